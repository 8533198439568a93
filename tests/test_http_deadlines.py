"""Request deadlines (web/deadlines.py): a client that trickles its headers or its body is
cut off at its deadline however often it sends a byte, and a crowd of such clients, over
the connection limit, cannot keep /healthz from answering.

Real sockets against the real server on 127.0.0.1 port 0, with short deadlines; the
1,000-connection figures are bench/http_trickle.py's.
"""

from __future__ import annotations

import http.client
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from typing import Any

import pytest

from sebridge.kernel.wsgi import StartResponse
from sebridge.web.server import HttpServer


def echo(environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
    body = environ["wsgi.input"].read(int(environ.get("CONTENT_LENGTH") or 0))
    start_response("200 OK", [("Content-Length", str(len(body)))])
    return [body]


def serve(**limits: Any) -> HttpServer:
    srv = HttpServer("127.0.0.1", 0, {"/echo": echo}, lambda: (200, {"status": "ok"}), **limits)
    srv.start()
    return srv


@pytest.fixture
def server() -> Iterator[HttpServer]:
    srv = serve(header_timeout=1.5, body_timeout=1.5, idle_timeout=60)
    yield srv
    srv.stop()


def trickle(port: int, head: bytes, drip: bytes, every: float, for_seconds: float) -> float | None:
    """Send `head`, then `drip` every `every` seconds for `for_seconds`; the seconds after
    which the server closed the connection, or None if it was still open at the end."""
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", port)) as sock:
        sock.sendall(head)
        while time.monotonic() - start < for_seconds:
            try:
                sock.sendall(drip)
            except OSError:  # reset: the server closed it and said so
                return time.monotonic() - start
            sock.settimeout(every)
            try:
                if sock.recv(4096) == b"":
                    return time.monotonic() - start
            except TimeoutError:
                continue  # still open: drip again
            except OSError:
                return time.monotonic() - start
    return None


@pytest.mark.slow
def test_headers_that_trickle_in_are_cut_off_at_the_header_deadline(server: HttpServer) -> None:
    # One header line every 0.3 s: waitress's idle timeout (60 s here) never fires.
    closed = trickle(server.port, b"GET /echo HTTP/1.1\r\n", b"X-A: b\r\n", 0.3, 10.0)
    assert closed is not None, "a trickling client kept its connection for 10 s"
    assert closed >= 1.5  # its deadline, not before


@pytest.mark.slow
def test_a_silent_connection_is_cut_off_at_the_header_deadline(server: HttpServer) -> None:
    start = time.monotonic()
    with socket.create_connection(("127.0.0.1", server.port)) as sock:
        sock.settimeout(10)
        assert sock.recv(1) == b""
    assert time.monotonic() - start >= 1.5


@pytest.mark.slow
def test_a_body_that_trickles_in_is_cut_off_at_the_body_deadline(server: HttpServer) -> None:
    head = b"POST /echo HTTP/1.1\r\nHost: x\r\nContent-Length: 1000\r\n\r\n"
    closed = trickle(server.port, head, b"x" * 10, 0.3, 10.0)  # 1,000 bytes would take 30 s
    assert closed is not None, "a trickling body kept its connection for 10 s"
    assert closed >= 1.5


@pytest.mark.slow
def test_requests_in_time_are_answered_and_the_deadline_restarts_for_the_next(
    server: HttpServer,
) -> None:
    """A keep-alive connection: each request has its own deadline, counted from the last
    answer; a connection that sends its requests on time is never cut."""
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=5)
    try:
        for _ in range(3):
            conn.request("POST", "/echo", body=b"hello")
            response = conn.getresponse()
            assert (response.status, response.read()) == (200, b"hello")
            time.sleep(1.0)  # under the deadline each time; 3 s in all, over it
    finally:
        conn.close()


def healthz(port: int, timeout: float) -> int | None:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", "/healthz")
        return conn.getresponse().status
    except OSError:
        return None
    finally:
        conn.close()


@pytest.mark.slow
def test_healthz_answers_beside_more_tricklers_and_silent_clients_than_the_limit() -> None:
    """100 connections against a limit of 50: half trickle a header line every second,
    half say nothing, and each comes back when cut off. /healthz answers every time: the
    deadlines free room each second (waitress as shipped stops accepting at the limit, so
    a probe waits its turn in the backlog, and may be reset in the crowd's turnover; a
    prompt answer beside a crowd is the probe port's, tests/test_probe_listener.py).
    Without the deadlines none would come."""
    srv = serve(header_timeout=3, body_timeout=3, idle_timeout=60, connection_limit=50)
    stop = threading.Event()

    def attacker(talks: bool) -> None:
        while not stop.is_set():
            with socket.socket() as sock:
                try:
                    sock.connect(("127.0.0.1", srv.port))
                    sock.sendall(b"GET /healthz HTTP/1.1\r\n" if talks else b"")
                    while not stop.wait(1.0):
                        sock.sendall(b"X-A: b\r\n" if talks else b"")
                except OSError:
                    continue  # cut off: come back

    threads = [threading.Thread(target=attacker, args=(i % 2 == 0,)) for i in range(100)]
    try:
        for thread in threads:
            thread.start()
        time.sleep(2.0)  # all of them connected (or waiting in the backlog)
        answers = []
        for _ in range(10):
            # A prober asks again at its next period; here at once, three times at most: a
            # probe the crowd's turnover resets (seen 1 in 3 runs) is asked again.
            tries = (healthz(srv.port, timeout=15) for _ in range(3))
            answers.append(next((a for a in tries if a is not None), None))
            time.sleep(0.5)
        assert answers == [200] * 10
    finally:
        stop.set()
        for thread in threads:
            thread.join(5)
        srv.stop()

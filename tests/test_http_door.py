"""The HTTP server's door (web/door.py, web/probe_desk.py): a whole probe request is
answered on a thread of its own while waitress's loop is busy; everything else is
waitress's, as before; and if the door fails, waitress accepts by itself.

Waitress's loop is held busy by a task pulled onto it (its trigger), so which way a
request went is seen, not timed: answered while the loop is held means the door's.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterable, Iterator
from typing import Any

import pytest
from tests.helpers import wait_until

import sebridge.web.door as door
from sebridge.web.headers import SECURITY_HEADERS
from sebridge.web.probe_desk import ProbeRequest, probe_request
from sebridge.web.server import HttpServer


def hello(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    start_response("200 OK", [("Content-Length", "5")])
    return [b"hello"]


@pytest.fixture
def server() -> Iterator[HttpServer]:
    srv = HttpServer("127.0.0.1", 0, {"/hello": hello}, lambda: (200, {"status": "ok"}))
    srv.start()
    yield srv
    srv.stop()


@pytest.fixture
def loop_held(server: HttpServer) -> Iterator[threading.Event]:
    """Waitress's loop, busy until the event is set (or the test ends)."""
    release = threading.Event()
    running = threading.Event()

    def hold() -> None:
        running.set()
        release.wait(30)

    server._server.trigger.pull_trigger(hold)
    assert running.wait(10)
    yield release
    release.set()


def send(server: HttpServer, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=10)
    sock.sendall(data)
    return sock


def answer(sock: socket.socket) -> bytes:
    """Everything the server sends until it closes the connection."""
    got = b""
    while chunk := sock.recv(65536):
        got += chunk
    sock.close()
    return got


def headers_of(got: bytes) -> tuple[str, dict[str, str], bytes]:
    head, _, body = got.partition(b"\r\n\r\n")
    status, *lines = head.decode("latin-1").split("\r\n")
    fields = dict(line.split(": ", 1) for line in lines)
    return status, fields, body


def test_a_probe_is_answered_while_waitress_loop_is_busy(
    server: HttpServer, loop_held: threading.Event
) -> None:
    got = answer(send(server, b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n"))
    status, fields, body = headers_of(got)
    assert status == "HTTP/1.1 200 OK"
    assert body == b'{"status": "ok"}'
    assert fields["Content-Length"] == str(len(body))
    assert fields["Content-Type"] == "application/json"
    assert fields["Connection"] == "close" and fields["Server"] == "sebridge"
    for name, value in SECURITY_HEADERS:
        assert fields[name] == value
    # The same answer as waitress gives it: the loop is held, so the door's.
    got = answer(send(server, b"HEAD /readyz HTTP/1.0\r\n\r\n"))
    status, fields, body = headers_of(got)
    assert status == "HTTP/1.0 200 OK" and body == b""
    assert fields["Content-Length"] == str(len(b'{"status": "ok"}'))


@pytest.mark.parametrize(
    "request_bytes",
    [
        b"GET /hello HTTP/1.1\r\nHost: x\r\n\r\n",  # not a probe
        b"GET /healthz?verbose HTTP/1.1\r\nHost: x\r\n\r\n",  # a query
        b"POST /healthz HTTP/1.1\r\nHost: x\r\nContent-Length: 2\r\n\r\nhi",  # a body
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\nGET /hello HTTP/1.1\r\n\r\n",  # two
        b"GET /healthz HTTP/1.1\r\nHost: x\r\n",  # not whole yet
    ],
    ids=["route", "query", "post", "pipelined", "partial"],
)
def test_anything_but_a_whole_bare_probe_is_waitress(
    server: HttpServer, loop_held: threading.Event, request_bytes: bytes
) -> None:
    sock = send(server, request_bytes)
    sock.settimeout(0.5)
    with pytest.raises(TimeoutError):
        sock.recv(1)  # the loop is held: no answer
    if request_bytes.endswith(b"Host: x\r\n"):
        sock.sendall(b"\r\n")
    loop_held.set()
    sock.settimeout(10)
    status = sock.recv(65536).split(b"\r\n", 1)[0]
    sock.close()
    expected = b"HTTP/1.1 405 Method Not Allowed" if b"POST" in request_bytes else b"200 OK"
    assert status.endswith(expected), status


@pytest.mark.parametrize(
    ("head", "expected"),
    [
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n", ProbeRequest("GET", "/healthz", "1.1", 34)),
        (b"HEAD /readyz HTTP/1.0\r\n\r\n", ProbeRequest("HEAD", "/readyz", "1.0", 25)),
        (b"GET /healthz HTTP/1.1\r\nHost: x\r\n", None),  # not complete
        (b"GET /healthz HTTP/2.0\r\n\r\n", None),
        (b"GET /healthz/ HTTP/1.1\r\n\r\n", None),
        (b"get /healthz HTTP/1.1\r\n\r\n", None),
        (b"GET  /healthz HTTP/1.1\r\n\r\n", None),
        (b"GET /healthz HTTP/1.1\r\nContent-Length: 0\r\n\r\n", None),
        (b"GET /healthz HTTP/1.1\r\ntransfer-encoding: chunked\r\n\r\n", None),
        (b"GET /healthz HTTP/1.1\r\nExpect: 100-continue\r\n\r\n", None),
        (b"GET /healthz HTTP/1.1\r\nHost : x\r\n\r\n", None),  # waitress's 400
        (b"GET /healthz HTTP/1.1\r\nno colon\r\n\r\n", None),
        (b"GET /healthz HTTP/1.1\n\n", None),
        (b"", None),
    ],
)
def test_what_the_door_takes_for_a_probe(head: bytes, expected: ProbeRequest | None) -> None:
    assert probe_request(head) == expected


def test_a_probe_that_raises_is_a_500_and_one_log_record(
    caplog: pytest.LogCaptureFixture,
) -> None:
    def failing() -> tuple[int, dict[str, Any]]:
        raise RuntimeError("a bug in a probe")

    srv = HttpServer("127.0.0.1", 0, {}, failing)
    srv.start()
    try:
        # The door's way and waitress's (a query string) answer alike.
        for request in (b"GET /healthz", b"GET /healthz?via=waitress"):
            caplog.clear()
            with caplog.at_level(logging.ERROR):
                got = answer(send(srv, request + b" HTTP/1.1\r\nConnection: close\r\n\r\n"))
            status, _, body = headers_of(got)
            assert status == "HTTP/1.1 500 Internal Server Error"
            assert body == b'{"error": "internal error"}'
            assert [r.getMessage() for r in caplog.records] == ["GET /healthz failed"]
    finally:
        srv.stop()


def test_when_the_door_fails_waitress_accepts_by_itself(
    monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    def bug(head: bytes) -> None:
        raise RuntimeError("a bug in the door")

    monkeypatch.setattr(door, "probe_request", bug)
    srv = HttpServer("127.0.0.1", 0, {"/hello": hello})
    srv.start()
    try:
        with caplog.at_level(logging.ERROR):
            lost = send(srv, b"GET /hello HTTP/1.1\r\n\r\n")  # the one the bug met
            wait_until(lambda: not srv._door.open(), 10, message="the door's thread ended")
        assert "waitress accepts by itself" in caplog.text
        lost.close()
        got = answer(send(srv, b"GET /hello HTTP/1.1\r\nConnection: close\r\n\r\n"))
        assert got.startswith(b"HTTP/1.1 200 OK") and got.endswith(b"hello")
    finally:
        srv.stop()


def test_stop_ends_the_door_and_the_desk() -> None:
    srv = HttpServer("127.0.0.1", 0, {"/hello": hello})
    srv.start()
    threads = [srv._door._thread, srv._desk._thread, srv._thread]
    assert [t.name for t in threads if t is not None and t.is_alive()] == [
        "http-door",
        "http-probes",
        "http",
    ]
    srv.stop()
    assert not [t for t in threads if t is not None and t.is_alive()]
    with pytest.raises(OSError):  # nothing listens any more
        socket.create_connection(("127.0.0.1", srv.port), timeout=2).close()

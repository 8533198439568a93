"""The daemon's HTTP server, hardened once for every route: body cap, idle
connections, route failures, /healthz; and when the daemon starts it."""

from __future__ import annotations

import http.client
import json
import logging
import socket
import threading
import time
from collections.abc import Iterable, Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import wait_until
from sebridge.cli.runtime import build_daemon, build_runner
from sebridge.engine.runner import Runner
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.web.server import MAX_BODY, HttpServer


class RecordingApp:
    """A route that records the bodies it read."""

    def __init__(self) -> None:
        self.bodies: list[bytes] = []

    def __call__(self, environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        length = int(environ.get("CONTENT_LENGTH") or 0)
        self.bodies.append(environ["wsgi.input"].read(length))
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]


def broken(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
    raise RuntimeError("a bug in a route")


@pytest.fixture
def app() -> RecordingApp:
    return RecordingApp()


@pytest.fixture
def server(app: RecordingApp) -> Iterator[HttpServer]:
    srv = HttpServer(
        "127.0.0.1",
        0,
        {"/hook": app, "/broken": broken, "/pages/": app},
        lambda: (200, {"status": "ok"}),
        idle_timeout=2,
    )
    srv.start()
    yield srv
    srv.stop()


def request(
    server: HttpServer, method: str, path: str, body: bytes | None = None, timeout: float = 5.0
) -> tuple[int, bytes]:
    conn = http.client.HTTPConnection("127.0.0.1", server.port, timeout=timeout)
    try:
        conn.request(method, path, body=body)
        response = conn.getresponse()
        return response.status, response.read()
    finally:
        conn.close()


def raw(server: HttpServer, data: bytes) -> socket.socket:
    sock = socket.create_connection(("127.0.0.1", server.port), timeout=5)
    sock.sendall(data)
    return sock


def status_of(sock: socket.socket) -> int:
    head = sock.recv(4096).split(b"\r\n", 1)[0]
    return int(head.split()[1])


def test_routes_exact_and_prefix(server: HttpServer, app: RecordingApp) -> None:
    assert request(server, "POST", "/hook", b"hello") == (200, b"ok")
    assert request(server, "GET", "/pages/abc")[0] == 200
    assert request(server, "GET", "/pages/")[0] == 200  # the prefix's app decides
    assert request(server, "GET", "/hook/x")[0] == 404
    assert request(server, "GET", "/nothing")[0] == 404
    assert app.bodies == [b"hello", b"", b""]


def test_a_body_over_the_cap_is_refused_before_it_is_sent(
    server: HttpServer, app: RecordingApp
) -> None:
    # Only the headers go out: the 413 must come without the body being read.
    sock = raw(
        server,
        b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Length: 268435456\r\n\r\n" + b"x" * 1024,
    )
    with sock:
        assert status_of(sock) == 413
    assert app.bodies == []


def test_a_chunked_body_over_the_cap_is_refused(server: HttpServer, app: RecordingApp) -> None:
    chunk = b"x" * 65536
    sock = raw(server, b"POST /hook HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n")
    with sock:
        try:
            for _ in range(MAX_BODY // len(chunk) + 2):
                sock.sendall(b"%x\r\n" % len(chunk) + chunk + b"\r\n")
            sock.sendall(b"0\r\n\r\n")
        except OSError:
            pass  # the server may close as soon as it has answered
        assert status_of(sock) == 413
    assert app.bodies == []


def test_a_body_at_the_cap_is_served(server: HttpServer, app: RecordingApp) -> None:
    assert request(server, "POST", "/hook", b"y" * MAX_BODY)[0] == 200
    assert len(app.bodies[0]) == MAX_BODY


def test_idle_connections_do_not_lock_out_healthz(server: HttpServer) -> None:
    # 100 idle connections made the old server (connection_limit 100) unreachable.
    idle = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(150)]
    try:
        assert request(server, "GET", "/healthz", timeout=5) == (200, b'{"status": "ok"}')
    finally:
        for sock in idle:
            sock.close()


@pytest.mark.slow
def test_a_half_sent_request_is_closed_after_the_idle_timeout(server: HttpServer) -> None:
    sock = raw(server, b"POST /hook HTTP/1.1\r\nHost: x\r\nContent-Le")
    with sock:
        sock.settimeout(30)
        assert sock.recv(1) == b""  # closed by the server (idle_timeout=2), not by us


def test_a_failing_route_is_a_500_and_one_log_record(
    server: HttpServer, caplog: pytest.LogCaptureFixture
) -> None:
    with caplog.at_level(logging.ERROR, logger="sebridge.web.server"):
        status, body = request(server, "GET", "/broken")
    assert status == 500
    assert json.loads(body) == {"error": "internal error"}
    assert [r.getMessage() for r in caplog.records] == ["GET /broken failed"]
    assert request(server, "GET", "/healthz")[0] == 200  # the server lives on


def test_healthz_allows_get_and_head_only(server: HttpServer) -> None:
    assert request(server, "HEAD", "/healthz")[0] == 200
    assert request(server, "POST", "/healthz", b"")[0] == 405


@pytest.mark.slow
def test_stop_while_requests_are_in_flight(caplog: pytest.LogCaptureFixture) -> None:
    """Start, serve, stop, 15 times, with answers being written as stop() comes.

    waitress's worker threads write to the connections and wake the loop through its
    trigger pipe, a bare fd number. stop() used to close every socket and that pipe first
    and end the workers after: a worker finishing a request then wrote to the closed pipe
    (EBADF, logged by waitress) or, once the number was reused, into someone else's file or
    socket; and stop()'s own wake-up could find the pipe closed by the loop already (EBADF
    out of stop()). A slow request under way when stop() comes must get its answer.
    """

    def echo(environ: dict[str, Any], start_response: Any) -> Iterable[bytes]:
        if environ.get("QUERY_STRING") == "slow":
            entered.set()
            time.sleep(0.1)
        start_response("200 OK", [("Content-Length", "2")])
        return [b"ok"]

    def hammer() -> None:  # one keep-alive connection, a request as soon as it is answered
        conn = http.client.HTTPConnection("127.0.0.1", srv.port, timeout=5)
        try:
            while not done.is_set():
                conn.request("GET", "/echo")
                conn.getresponse().read()
                answered.append(1)
        except OSError:
            pass  # the server went away under it
        finally:
            conn.close()

    def slow() -> None:
        try:
            slow_answers.append(request(srv, "GET", "/echo?slow"))
        except OSError as exc:
            slow_answers.append(exc)

    caplog.set_level(logging.WARNING)
    entered, done = threading.Event(), threading.Event()
    answered: list[int] = []
    slow_answers: list[object] = []
    for _ in range(15):
        entered.clear()
        done.clear()
        answered.clear()
        srv = HttpServer("127.0.0.1", 0, {"/echo": echo}, idle_timeout=2)
        srv.start()
        clients = [threading.Thread(target=hammer) for _ in range(3)]
        for client in clients:
            client.start()
        wait_until(lambda: len(answered) >= 20, interval=0.002)
        clients.append(threading.Thread(target=slow))
        clients[-1].start()
        assert entered.wait(5)
        try:
            srv.stop()
        finally:
            done.set()
            for client in clients:
                client.join(10)
    errors = [r for r in caplog.records if r.name.startswith("waitress") and r.levelno >= 40]
    assert [(r.getMessage(), r.exc_info and r.exc_info[1]) for r in errors] == []
    assert slow_answers == [(200, b"ok")] * 15


# --- the daemon's server -------------------------------------------------------------------


def config_for(tmp_path: Path, endpoint: str, **sections: Any) -> Any:
    data = {
        "imds": {"endpoint": endpoint, "vm_name": "vm0"},
        "store": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
        "console": {"enabled": False},
        **sections,
    }
    return from_mapping(data, environ={})


def servers(runner: Runner) -> list[HttpServer]:
    return [s for s in runner.services if isinstance(s, HttpServer)]


def test_no_server_unless_a_route_needs_it_or_listen_is_set(tmp_path: Path) -> None:
    runner = build_runner(config_for(tmp_path, "http://127.0.0.1:9"))
    assert servers(runner) == []
    runner.daemon.store.close()
    listening = config_for(tmp_path, "http://127.0.0.1:9", http={"listen": "127.0.0.1:0"})
    runner = build_runner(listening)
    (server,) = servers(runner)
    server.stop()
    runner.daemon.store.close()


def test_healthz_of_a_running_daemon(tmp_path: Path, sim: Simulator) -> None:
    config = config_for(
        tmp_path,
        sim.url,
        http={"listen": "127.0.0.1:0"},
        imds={"endpoint": sim.url, "vm_name": "vm0", "poll_interval": 0.2},
        jsonl={"path": str(tmp_path / "events.jsonl")},
    )
    runner = build_runner(config)
    (server,) = servers(runner)
    stop = threading.Event()
    thread = threading.Thread(target=runner.run, args=(stop,))
    thread.start()
    try:
        sim.schedule("Reboot")

        def health() -> tuple[int, dict[str, Any]]:
            status, body = request(server, "GET", "/healthz")
            return status, json.loads(body)

        def after_a_delivery() -> tuple[int, dict[str, Any]] | None:
            answer = health()
            return answer if answer[1]["sinks"] else None

        status, body = wait_until(after_a_delivery)
        assert status == 200
        assert body["status"] == "ok"
        assert body["imds"]["reachable"] is True
        assert body["imds"]["last_good_poll_age_seconds"] < 30
        # One daemon on a SQLite file holds every single-holder duty.
        assert body["store"] == {"writable": True, "agent": "vm0", "duties": ["prune"]}
        assert body["sinks"]["jsonl"]["state"] == "delivered"

        sim.inject("500", count=1_000_000)  # IMDS down from now on
        wait_until(lambda: health()[1]["imds"]["reachable"] is False)
        status, body = health()
        assert status == 200  # a few failed polls are weather, not an outage
        assert "error" in body["imds"]
    finally:
        stop.set()
        thread.join(15)
    assert not thread.is_alive()


def test_healthz_fails_when_imds_has_not_answered_for_long(tmp_path: Path) -> None:
    from sebridge.web.health import Health

    daemon = build_daemon(config_for(tmp_path, "http://127.0.0.1:9"))
    try:
        status, body = Health(Runner(daemon, daemon.parts), poll_interval=1.0).report()
        assert status == 503  # never polled
        assert body["status"] == "failing"
        assert body["imds"]["last_good_poll_age_seconds"] is None
        daemon.tick()  # refused: IMDS unreachable
        status, body = Health(Runner(daemon, daemon.parts), poll_interval=1.0).report()
        assert status == 503
        assert body["imds"]["reachable"] is False
        assert "127.0.0.1:9" in body["imds"]["error"]
    finally:
        daemon.imds.close()
        daemon.store.close()


def test_healthz_fails_when_the_store_cannot_be_written(tmp_path: Path, sim: Simulator) -> None:
    from sebridge.web.health import Health

    daemon = build_daemon(config_for(tmp_path, sim.url))
    try:
        assert daemon.tick().polled
        assert Health(Runner(daemon, daemon.parts), poll_interval=1.0).report()[0] == 200
        daemon.store.db.execute("PRAGMA query_only = ON")  # every write now fails
        status, body = Health(Runner(daemon, daemon.parts), poll_interval=1.0).report()
        assert status == 503
        assert body["store"]["writable"] is False
        assert "readonly" in body["store"]["error"] or "query_only" in body["store"]["error"]
    finally:
        daemon.imds.close()
        daemon.store.close()


def test_healthz_after_imds_is_gone_longer_than_ten_polls(tmp_path: Path, sim: Simulator) -> None:
    from sebridge.web.health import Health

    daemon = build_daemon(config_for(tmp_path, sim.url))
    try:
        assert daemon.tick().polled
        later = [daemon.poll_state.last_ok]
        health = Health(Runner(daemon, daemon.parts), poll_interval=1.0, clock=lambda: later[0])
        assert health.report()[0] == 200
        later[0] = later[0].__class__.fromtimestamp(time.time() + 31, later[0].tzinfo)
        status, body = health.report()
        assert status == 503
        assert body["imds"]["last_good_poll_age_seconds"] > 30
    finally:
        daemon.imds.close()
        daemon.store.close()


def test_a_listen_address_in_use_is_one_line_naming_the_key(tmp_path: Path, sim: Simulator) -> None:
    """`sebridge run` as a process: no traceback, exit 2 as for a configuration error."""
    from helpers import run_cli, write_config

    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        cfg = write_config(
            tmp_path / "sebridge.toml",
            endpoint=sim.url,
            db=tmp_path / "s.db",
            vm_name="vm0",
            extra=f'[http]\nlisten = "127.0.0.1:{port}"\n',
        )
        done = run_cli("run", "--config", str(cfg), timeout=60)
    assert done.returncode == 2, done.stderr
    assert "Traceback" not in done.stderr
    (line,) = [s for s in done.stderr.splitlines() if "http.listen" in s]
    assert line == (
        f"sebridge: configuration error: http.listen: cannot listen on 127.0.0.1:{port}: "
        "Address already in use"
    )

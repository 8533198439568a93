"""The probe listener ([http] probe_listen): /livez, /readyz and /healthz on a port of
their own, served by a server of their own (docs/ARCHITECTURE.md, "Metrics and probes").

A daemon built as `sebridge run` builds it (cli/runtime.py) runs in this process, both
ports on 127.0.0.1 port 0, asked over real HTTP. /livez asks the process alone: it stays
200 while the store is frozen or IMDS is down and /readyz says 503. A crowd on the traffic
port (idle connections held open, its loop held busy) does not keep the probe port from
answering.
"""

from __future__ import annotations

import contextlib
import http.client
import io
import json
import socket
import sqlite3
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

import pg
from helpers import wait_until, write_config
from sebridge.cli.main import main
from sebridge.cli.runtime import build_runner
from sebridge.engine.runner import Runner
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError
from sebridge.web.server import HttpServer

BOUND = 30.0  # generous: a loaded machine starts a daemon in a few seconds


def config_for(store_url: str, endpoint: str, **http: str) -> Any:
    return config_from_mapping(
        {
            "imds": {"endpoint": endpoint, "vm_name": "vm0", "poll_interval": 0.2},
            "store": {"url": store_url},
            "console": {"enabled": False},
            "http": http or {"listen": "127.0.0.1:0", "probe_listen": "127.0.0.1:0"},
        },
        environ={},
    )


def ask(port: int, path: str, timeout: float = 10.0) -> tuple[int, dict[str, Any]]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=timeout)
    try:
        conn.request("GET", path)
        response = conn.getresponse()
        return response.status, json.loads(response.read())
    finally:
        conn.close()


class Ports:
    """The running daemon's two ports: its traffic's and its probes'."""

    def __init__(self, runner: Runner) -> None:
        probes, traffic = (s for s in runner.services if isinstance(s, HttpServer))
        self.probes, self.traffic = probes.port, traffic.port
        self.servers = {"probes": probes, "traffic": traffic}


@pytest.fixture
def daemon() -> Iterator[Callable[[Any], tuple[Runner, Ports]]]:
    """daemon(config) runs `sebridge run`'s runner in a thread until the test ends."""
    started: list[tuple[threading.Event, threading.Thread]] = []

    def start(config: Any) -> tuple[Runner, Ports]:
        runner = build_runner(config, stdout=io.StringIO())
        stop = threading.Event()
        thread = threading.Thread(target=runner.run, args=(stop,), name="daemon-run")
        thread.start()
        started.append((stop, thread))
        ports = Ports(runner)
        wait_until(lambda: ask(ports.probes, "/livez")[0] == 200, BOUND, message="/livez 200")
        return runner, ports

    yield start
    for stop, thread in started:
        stop.set()
        thread.join(BOUND)
        assert not thread.is_alive(), "Runner.run() did not return"


def test_the_probe_port_answers_the_probes_and_only_them(
    store_url: str, sim: Simulator, daemon: Callable[[Any], tuple[Runner, Ports]]
) -> None:
    _, ports = daemon(config_for(store_url, sim.url))
    assert ask(ports.probes, "/livez") == (200, {"live": True})
    wait_until(lambda: ask(ports.probes, "/readyz")[0] == 200, BOUND, message="/readyz 200")
    assert ask(ports.probes, "/readyz") == ask(ports.traffic, "/readyz") == (200, {"ready": True})
    status, body = ask(ports.probes, "/healthz")
    assert status == 200 and body["status"] == "ok", body
    assert ask(ports.traffic, "/healthz")[1].keys() == body.keys()
    # The traffic's paths are the traffic port's; /livez is the probe port's.
    assert ask(ports.probes, "/metrics")[0] == 404
    assert ask(ports.traffic, "/livez")[0] == 404


@pytest.fixture
def relay() -> Iterator[pg.Relay]:
    relay = pg.Relay()
    yield relay
    relay.close()


@pytest.mark.slow  # the store probe waits its 2 s, by design
def test_livez_stays_200_while_the_store_is_frozen_and_readyz_says_503(
    store_url: str,
    sim: Simulator,
    relay: pg.Relay,
    daemon: Callable[[Any], tuple[Runner, Ports]],
) -> None:
    url = relay.url(store_url) if store_url.startswith("postgresql") else store_url
    _, ports = daemon(config_for(url, sim.url))
    wait_until(lambda: ask(ports.probes, "/readyz")[0] == 200, BOUND, message="/readyz 200")
    holder = None
    if store_url.startswith("sqlite"):  # another connection holds the write lock
        holder = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
        holder.execute("BEGIN EXCLUSIVE")
    else:  # the server stops answering, its sockets up
        relay.freeze()
    try:
        wait_until(lambda: ask(ports.probes, "/readyz")[0] == 503, BOUND, message="/readyz 503")
        body = ask(ports.probes, "/readyz")[1]
        assert any(r.startswith("the store does not answer") for r in body["reasons"]), body
        assert ask(ports.probes, "/healthz")[0] == 503
        assert ask(ports.probes, "/livez") == (200, {"live": True})
    finally:
        if holder is not None:
            holder.execute("ROLLBACK")
            holder.close()
        relay.thaw()
    wait_until(lambda: ask(ports.probes, "/readyz")[0] == 200, BOUND, message="/readyz again")


@pytest.mark.slow  # the IMDS probe's finding is reused for 2 s
def test_livez_stays_200_while_imds_is_down_and_readyz_says_503(
    tmp_path: Path, sim: Simulator, daemon: Callable[[Any], tuple[Runner, Ports]]
) -> None:
    _, ports = daemon(config_for(f"sqlite:///{tmp_path / 's.db'}", sim.url))
    wait_until(lambda: ask(ports.probes, "/readyz")[0] == 200, BOUND, message="/readyz 200")
    sim.inject("500", count=1_000_000)
    wait_until(lambda: ask(ports.probes, "/readyz")[0] == 503, BOUND, message="/readyz 503")
    (reason,) = ask(ports.probes, "/readyz")[1]["reasons"]
    assert reason.startswith("IMDS does not answer: "), reason
    assert ask(ports.probes, "/livez") == (200, {"live": True})


def test_livez_says_503_once_the_daemon_stops_polling(
    tmp_path: Path, sim: Simulator, daemon: Callable[[Any], tuple[Runner, Ports]]
) -> None:
    runner, ports = daemon(config_for(f"sqlite:///{tmp_path / 's.db'}", sim.url))
    schedule = runner._schedule
    assert schedule is not None
    schedule.stop(5.0)  # the poll loop ends: what a dead poll thread looks like
    assert ask(ports.probes, "/livez") == (503, {"live": False, "stopped": ["poll"]})


@pytest.mark.slow  # a few hundred connections opened and closed
def test_the_probe_port_answers_while_the_traffic_port_is_crowded(
    tmp_path: Path, sim: Simulator, daemon: Callable[[Any], tuple[Runner, Ports]]
) -> None:
    """500 idle connections held open on the traffic port and its loop held busy, so it
    answers nothing: the probe port answers all the same."""
    _, ports = daemon(config_for(f"sqlite:///{tmp_path / 's.db'}", sim.url))
    crowd = [socket.create_connection(("127.0.0.1", ports.traffic)) for _ in range(500)]
    release, running = threading.Event(), threading.Event()

    def hold() -> None:
        running.set()
        release.wait(BOUND)

    traffic = ports.servers["traffic"]._server
    traffic.trigger.pull_trigger(hold)  # waitress's loop of the traffic port, busy
    try:
        assert running.wait(10)
        with pytest.raises(TimeoutError):  # the traffic port answers nothing meanwhile
            ask(ports.traffic, "/healthz", timeout=1.0)
        for path in ("/livez", "/readyz", "/healthz"):
            assert ask(ports.probes, path)[0] == 200, path
    finally:
        release.set()
        for sock in crowd:
            sock.close()


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "said"),
    [
        ("8788", 'must be host:port (IPv6 as [::1]:8787), got "8788"'),
        ("0.0.0.0:70000", "port 70000 is out of range 0-65535"),
        ("127.0.0.1:8787", "port 8787 is http.listen's: the probes need a port of their own"),
    ],
)
def test_a_bad_probe_listen_is_a_config_error_naming_the_key(value: str, said: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_for("sqlite://", "http://127.0.0.1:1", listen="127.0.0.1:8787", probe_listen=value)
    assert f"http.probe_listen: {said}" in str(info.value)


def test_a_probe_port_in_use_is_an_error_naming_the_key(tmp_path: Path, sim: Simulator) -> None:
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        config = config_for(
            f"sqlite:///{tmp_path / 's.db'}", sim.url, probe_listen=f"127.0.0.1:{port}"
        )
        with pytest.raises(ConfigError) as info:
            build_runner(config, stdout=io.StringIO())
    assert str(info.value) == (
        f"http.probe_listen: cannot listen on 127.0.0.1:{port}: Address already in use"
    )


def test_probe_listen_alone_starts_the_probe_listener_alone(tmp_path: Path, sim: Simulator) -> None:
    config = config_for(f"sqlite:///{tmp_path / 's.db'}", sim.url, probe_listen="127.0.0.1:0")
    runner = build_runner(config, stdout=io.StringIO())
    servers = [s for s in runner.services if isinstance(s, HttpServer)]
    try:
        (server,) = servers
        server.start()
        assert ask(server.port, "/livez")[0] == 503  # not polling: built, never run
        assert ask(server.port, "/metrics")[0] == 404
    finally:
        for server in servers:
            server.stop()
        runner.daemon.imds.close()
        runner.daemon.store.close()


@pytest.mark.usefixtures("hermetic")
def test_check_says_where_the_probes_listen(tmp_path: Path, sim: Simulator) -> None:
    config = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "s.db",
        vm_name="vm0",
        extra='[http]\nlisten = "127.0.0.1:8787"\nprobe_listen = "0.0.0.0:8788"\n',
    )
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(io.StringIO()):
        code = main(["check", "--config", str(config), "--environment", "/dev/null"])
    assert code == 0, out.getvalue()
    assert (
        "ok: http.probe_listen: probes answer on 0.0.0.0:8788 (/livez, /readyz, /healthz),"
        " on a server of their own beside 127.0.0.1:8787"
    ) in out.getvalue().splitlines()

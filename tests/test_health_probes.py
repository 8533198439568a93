"""/healthz and /readyz tell the truth within 2 s of being asked (web/probe.py).

Each cause on each store: a store that refuses writes or is stopped (503 at the first
answer whose probe began after it), one that is frozen or locked (503 once the probe
has waited its 2 s), and for /readyz an IMDS that fails or cannot be reached. The
probe's clock is the test's: a finding is reused for 2 s on it and no longer, and
however many ask at once one write is in flight.
"""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest

import pg
from sebridge.cli.imds_client import build_imds
from sebridge.cli.runtime import build_daemon
from sebridge.engine.daemon import Daemon
from sebridge.engine.runner import Runner
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.web.health import Health, store_probe
from sebridge.web.readyz import ReadyCheck, imds_probe


class Clock:
    """The probes' monotonic clock, moved by the test."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


def config_for(store_url: str, endpoint: str) -> Any:
    return config_from_mapping(
        {
            "imds": {"endpoint": endpoint, "vm_name": "vm0"},
            "store": {"url": store_url},
            "console": {"enabled": False},
        },
        environ={},
    )


@pytest.fixture
def relay() -> Iterator[pg.Relay]:
    relay = pg.Relay()
    yield relay
    relay.close()


@pytest.fixture
def running(sim: Simulator) -> Iterator[Callable[[str], tuple[Daemon, Runner]]]:
    made: list[Daemon] = []

    def make(store_url: str) -> tuple[Daemon, Runner]:
        daemon = build_daemon(config_for(store_url, sim.url))
        made.append(daemon)
        assert daemon.tick().polled
        return daemon, Runner(daemon, daemon.parts)

    yield make
    for daemon in made:
        daemon.imds.close()
        daemon.store.close()


def counting_writes(daemon: Daemon) -> list[str]:
    """The probe's writes, as the store receives them."""
    writes: list[str] = []
    remember = daemon.store.settings.remember

    def counted(key: str, value: str) -> None:
        writes.append(key)
        remember(key, value)

    daemon.store.settings.remember = counted  # type: ignore[method-assign]
    return writes


def probed(made: tuple[Daemon, Runner]) -> tuple[Daemon, list[str], Clock, Health]:
    """/healthz of a daemon whose probe writes are counted, on the test's clock."""
    daemon, runner = made
    writes = counting_writes(daemon)
    clock = Clock()
    return (
        daemon,
        writes,
        clock,
        Health(runner, poll_interval=1.0, store=store_probe(runner, clock)),
    )


def test_a_finding_is_reused_for_two_seconds_and_one_write_is_in_flight_however_many_ask(
    store_url: str, running: Callable[[str], tuple[Daemon, Runner]]
) -> None:
    _, writes, clock, health = probed(running(store_url))
    answers: list[int] = []
    askers = [
        threading.Thread(target=lambda: answers.append(health.report()[0])) for _ in range(20)
    ]
    for asker in askers:
        asker.start()
    for asker in askers:
        asker.join(10)
    assert answers == [200] * 20
    assert writes == ["health_probe"]
    clock.now += 1.0  # within half its freshness: reused, and not yet renewed
    assert health.report()[0] == 200 and writes == ["health_probe"]
    clock.now += 1.1  # older than 2 s: written again before the answer
    assert health.report()[0] == 200 and writes == ["health_probe"] * 2


def test_a_steady_prober_never_waits_the_finding_is_renewed_behind_it(
    store_url: str, running: Callable[[str], tuple[Daemon, Runner]]
) -> None:
    daemon, writes, clock, health = probed(running(store_url))
    assert health.report()[0] == 200 and writes == ["health_probe"]
    held = threading.Event()
    remember = daemon.store.settings.remember

    def slow(key: str, value: str) -> None:
        held.wait(10)  # a check that takes its time (a busy daemon)
        remember(key, value)

    daemon.store.settings.remember = slow  # type: ignore[method-assign]
    clock.now += 1.5  # past half its freshness: renewed in the background
    assert health.report()[0] == 200  # answered from the finding it has, not waiting
    assert writes == ["health_probe"]  # the renewal's write is still held
    held.set()
    wait_until(lambda: len(writes) == 2)
    clock.now += 1.0  # 2.5 s after the first write, 1 s after the renewal began: fresh
    assert health.report()[0] == 200 and len(writes) == 2


def wait_until(condition: Callable[[], bool]) -> None:
    deadline = time.monotonic() + 10
    while not condition():
        assert time.monotonic() < deadline, "not within 10 s"
        time.sleep(0.01)


def refuse_writes(daemon: Daemon, store_url: str, relay: pg.Relay) -> None:
    """SQLite: the connection refuses writes; PostgreSQL: the server is gone (cut)."""
    if store_url.startswith("sqlite"):
        daemon.store.db.execute("PRAGMA query_only = ON")
    else:
        relay.cut()


def test_a_store_that_refuses_writes_is_503_at_the_first_probe_after(
    store_url: str, relay: pg.Relay, running: Callable[[str], tuple[Daemon, Runner]]
) -> None:
    url = relay.url(store_url) if store_url.startswith("postgresql") else store_url
    daemon, runner = running(url)
    clock = Clock()
    probe = store_probe(runner, clock)
    health = Health(runner, poll_interval=1.0, store=probe)
    ready = ReadyCheck(runner, store=probe)
    assert health.report()[0] == 200 and ready.report()[0] == 200
    refuse_writes(daemon, store_url, relay)
    clock.now += 2.1
    status, body = health.report()
    assert status == 503 and body["store"]["writable"] is False, body
    status, body = ready.report()
    assert status == 503, body
    (reason,) = body["reasons"]
    assert reason.startswith("the store does not answer: "), reason


@pytest.fixture
def freeze(relay: pg.Relay) -> Iterator[Callable[[Daemon, str], None]]:
    """SQLite: another process's connection holds the write lock (the probe's write waits
    its 10 s busy timeout); PostgreSQL: the server stops answering, its sockets up."""
    holders: list[sqlite3.Connection] = []

    def do(daemon: Daemon, store_url: str) -> None:
        if store_url.startswith("sqlite"):
            holder = sqlite3.connect(store_url.removeprefix("sqlite:///"), isolation_level=None)
            holder.execute("BEGIN EXCLUSIVE")
            holders.append(holder)
        else:
            relay.freeze()

    yield do
    for holder in holders:
        holder.execute("ROLLBACK")
        holder.close()
    relay.thaw()


@pytest.mark.slow  # the probe's 2 s wait, by design, and a daemon's build
def test_a_frozen_or_locked_store_is_503_once_the_probe_waited_two_seconds(
    store_url: str,
    relay: pg.Relay,
    freeze: Callable[[Daemon, str], None],
    running: Callable[[str], tuple[Daemon, Runner]],
) -> None:
    url = relay.url(store_url) if store_url.startswith("postgresql") else store_url
    daemon, runner = running(url)
    clock = Clock()
    probe = store_probe(runner, clock)
    health = Health(runner, poll_interval=1.0, store=probe)
    ready = ReadyCheck(runner, store=probe)
    assert health.report()[0] == 200
    freeze(daemon, store_url)
    clock.now += 2.1  # a new write: it hangs
    # The clock the wait is measured on stands still, so the asker waits 2 s of real time.
    status, body = health.report()
    assert status == 503, body
    assert body["store"]["error"].startswith("the store has not answered for "), body
    clock.now += 2.0  # the write still hangs: said at once, no second write started
    status, body = ready.report()
    assert status == 503, body
    (reason,) = body["reasons"]  # PostgreSQL: its statement in flight says so first
    assert reason.startswith("the store does not answer: the store has not answered "), reason


def test_readyz_says_an_imds_that_fails(
    store_url: str, sim: Simulator, running: Callable[[str], tuple[Daemon, Runner]]
) -> None:
    _daemon, runner = running(store_url)
    clock = Clock()
    config = config_for(store_url, sim.url)
    ready = ReadyCheck(runner, imds_probe(lambda: build_imds(config, timeout=5.0), clock))
    assert ready.report() == (200, {"ready": True})
    sim.inject("500", count=1_000)
    clock.now += 2.1
    status, body = ready.report()
    assert status == 503, body
    (reason,) = body["reasons"]
    assert reason.startswith("IMDS does not answer: ") and "500" in reason, reason
    sim.clear_faults()
    clock.now += 2.1
    assert ready.report() == (200, {"ready": True})


def test_readyz_says_an_imds_that_cannot_be_reached(
    store_url: str, sim: Simulator, running: Callable[[str], tuple[Daemon, Runner]]
) -> None:
    _daemon, runner = running(store_url)
    clock = Clock()
    config = config_for(store_url, sim.url)
    ready = ReadyCheck(runner, imds_probe(lambda: build_imds(config, timeout=5.0), clock))
    assert ready.report() == (200, {"ready": True})
    sim.stop()  # nothing listens on its port any more
    clock.now += 2.1
    status, body = ready.report()
    assert status == 503, body
    (reason,) = body["reasons"]
    assert reason.startswith("IMDS does not answer: "), reason
    assert f"127.0.0.1:{sim.port}" in reason, reason


@pytest.mark.slow  # the probe's 2 s wait, by design, and a daemon's build
def test_readyz_says_an_imds_that_hangs_once_the_probe_waited_two_seconds(
    store_url: str, sim: Simulator, running: Callable[[str], tuple[Daemon, Runner]]
) -> None:
    _daemon, runner = running(store_url)
    clock = Clock()
    config = config_for(store_url, sim.url)
    ready = ReadyCheck(runner, imds_probe(lambda: build_imds(config, timeout=5.0), clock))
    assert ready.report() == (200, {"ready": True})
    sim.inject("hang", count=1, seconds=4.0)
    clock.now += 2.1  # a new GET: it hangs
    status, body = ready.report()
    assert (status, body["reasons"]) == (
        503,
        ["IMDS does not answer: IMDS has not answered for 2 s"],
    )

"""The agent's name is this VM's name as Resources list it, known before the store opens:
`[imds] vm_name`, else IMDS's compute name, asked for a bounded time; then exit 2 naming
imds.vm_name. Never the host name; the same at every start. CLI commands that do not
need an identity work without IMDS, and invent none."""

from __future__ import annotations

import re
import signal
import socket
import sqlite3
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from pathlib import Path

import psycopg
import pytest

import pg
from fakes.imds_fixture import FixtureImds
from helpers import DaemonProcess, free_port, query, run_cli, simulators, wait_until, write_config
from sebridge.imds.simulator import Simulator
from sebridge.imds.vm_name import learn_vm_name
from sebridge.kernel.errors import ConfigError
from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind
from sebridge.store import Store


class FakeTime:
    """A clock that moves only when slept on."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def clock(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


def test_the_compute_name_is_learnt() -> None:
    with Simulator(port=0, vm_name="vmss_3") as sim:
        assert learn_vm_name(sim.url) == "vmss_3"


def test_a_silent_imds_is_asked_again_until_the_deadline_then_named_in_the_error() -> None:
    fake = FakeTime()
    dead = f"http://127.0.0.1:{free_port()}"
    with pytest.raises(ConfigError) as caught:
        learn_vm_name(dead, wait=30.0, clock=fake.clock, sleep=fake.sleep)
    said = str(caught.value)
    assert said.startswith(f"cannot learn this VM's name from IMDS at {dead} within 30 s")
    assert "connection refused" in said
    assert said.endswith(
        "set imds.vm_name to this VM's name as Scheduled Events' Resources list it"
    )
    assert len(fake.sleeps) > 10  # asked again and again, backing off
    assert max(fake.sleeps) <= 3.0
    assert fake.now == pytest.approx(30.0)  # the last attempt is at the deadline, not before


def test_imds_without_a_compute_name_is_an_error_naming_the_key() -> None:
    fake = FakeTime()
    with (
        FixtureImds({"DocumentIncarnation": 1, "Events": []}, vm_name="") as imds,
        pytest.raises(ConfigError, match=r"has no compute name.*set imds\.vm_name"),
    ):
        learn_vm_name(imds.url, wait=2.0, clock=fake.clock, sleep=fake.sleep)


def test_a_hanging_imds_does_not_stretch_the_wait() -> None:
    with FixtureImds({"DocumentIncarnation": 1, "Events": []}, hang_compute=True) as imds:
        started = time.monotonic()
        with pytest.raises(ConfigError) as caught:
            learn_vm_name(imds.url, wait=1.0)
        # Bounded by the wait (not IMDS's 5 s call timeout): what the error says is true.
        assert time.monotonic() - started < 5.0
    # The whole wait, not the last attempt's share of it.
    assert re.findall(r"within [0-9.]+ ?s", str(caught.value)) == ["within 1 s"], caught.value
    assert "it did not answer; it is slow or hanging" in str(caught.value)


# ------------------------------------------------------------------ real processes


@pytest.mark.slow
def test_imds_down_at_start_is_exit_2_naming_the_key(tmp_path: Path) -> None:
    cfg = write_config(
        tmp_path / "sebridge.toml", endpoint=f"http://127.0.0.1:{free_port()}", db=tmp_path / "s.db"
    )
    done = run_cli("run", "--config", str(cfg), timeout=90)
    assert done.returncode == 2, done.stderr
    assert "configuration error: cannot learn this VM's name from IMDS" in done.stderr
    assert "within 30 s" in done.stderr and "set imds.vm_name" in done.stderr
    # The wait is said when it begins, not only at its end.
    assert "asking IMDS at http://127.0.0.1:" in done.stderr
    assert "for this VM's name (imds.vm_name is not set), for up to 30 s" in done.stderr
    assert "Traceback" not in done.stderr
    assert not (tmp_path / "s.db").exists()  # no store opened under a made-up name


@pytest.mark.slow
def test_imds_answering_late_still_names_the_agent(tmp_path: Path) -> None:
    port = free_port()
    db = tmp_path / "s.db"
    cfg = write_config(
        tmp_path / "sebridge.toml", endpoint=f"http://127.0.0.1:{port}", db=db, console=True
    )
    daemon = DaemonProcess(cfg, tmp_path / "daemon.log")
    try:
        time.sleep(2.0)  # IMDS refuses meanwhile: the start asks again
        assert daemon.alive(), daemon.log_text()
        with Simulator(port=port, vm_name="vm-late") as sim:
            sim.schedule("Reboot", resources=["vm-late"])
            wait_until(lambda: agents_recorded(db), 30)
            assert query(db, "SELECT agent FROM documents") == [("vm-late",)]
        daemon.signal(signal.SIGTERM)
        assert daemon.wait(15) == 0, daemon.log_text()
    finally:
        daemon.kill()


def agents_recorded(db: Path) -> list[tuple[str, ...]]:
    """The agents with a document; none while the daemon has not yet written its schema
    (the file exists a moment before its tables do)."""
    try:
        return query(db, "SELECT agent FROM documents") if db.exists() else []
    except sqlite3.OperationalError:
        return []


AGENTS = 4


@pytest.fixture
def sims() -> Iterator[list[Simulator]]:
    with simulators([f"vmss_{i}" for i in range(AGENTS)]) as started:
        yield started


@pytest.mark.slow
@pytest.mark.pg
def test_agents_started_at_once_on_one_host_each_take_their_vm_name(
    tmp_path: Path, pg_url: str, sims: list[Simulator]
) -> None:
    """The issue's failure: named after the host, 3 of 4 were refused as duplicates."""
    configs = [
        write_config(tmp_path / f"a{i}.toml", endpoint=sim.url, store_url=pg_url)
        for i, sim in enumerate(sims)
    ]
    names = {f"vmss_{i}" for i in range(AGENTS)}

    def agents_seen() -> set[object]:
        try:
            return {r[0] for r in pg.query(pg_url, "SELECT agent FROM documents")}
        except psycopg.errors.UndefinedTable:  # not migrated yet
            return set()

    for restart in range(2):  # and the same names at the next start
        agents = [DaemonProcess(c, tmp_path / f"a{i}.log") for i, c in enumerate(configs)]

        def settled(started: list[DaemonProcess] = agents) -> bool:
            return agents_seen() == names or not all(a.alive() for a in started)

        try:
            wait_until(
                settled,
                40,
                message="every agent's first document",
            )
            for agent in agents:
                assert agent.alive(), agent.log_text()
            seen = agents_seen()
            assert seen == names, f"start {restart}"
            assert socket.gethostname() not in seen
        finally:
            for agent in agents:
                agent.signal(signal.SIGTERM)
            for agent in agents:
                agent.wait(15)
                agent.kill()


# ------------------------------------------------------------------ the CLI without IMDS


@pytest.fixture
def known_event(tmp_path: Path) -> tuple[Path, str]:
    """A store a daemon named vm0 wrote one event to; the config points at no IMDS."""
    db = tmp_path / "s.db"
    store = Store(f"sqlite:///{db}", agent="vm0")
    event = ScheduledEvent("E-1", "Redeploy", "Scheduled", ("vm0",))
    now = datetime.now(UTC)
    store.documents.apply(
        Document(1, (event,)), [(Transition(TransitionKind.SCHEDULED, event, now), ())], now
    )
    store.close()
    endpoint = f"http://127.0.0.1:{free_port()}"
    return write_config(tmp_path / "sebridge.toml", endpoint=endpoint, db=db), "E-1"


@pytest.mark.parametrize("command", ["events", "history"])
def test_commands_that_only_read_need_no_imds(known_event: tuple[Path, str], command: str) -> None:
    cfg, event_id = known_event
    done = run_cli(command, "--config", str(cfg), timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert event_id in done.stdout
    assert "sebridge has not polled" not in done.stdout


@pytest.mark.slow
def test_check_says_run_would_not_start_without_vm_name_or_imds(
    known_event: tuple[Path, str],
) -> None:
    """`run` would wait 30 s and exit 2: check says so, naming the key, within seconds."""
    cfg, _ = known_event
    started = time.monotonic()
    done = run_cli("check", "--config", str(cfg), timeout=30)
    assert time.monotonic() - started < 15
    assert done.returncode == 1, done.stdout + done.stderr
    (problem,) = [line for line in done.stdout.splitlines() if line.startswith("problem:")]
    assert problem.startswith(
        "problem: imds.vm_name: not set, and `sebridge run` would exit 2: "
        "cannot learn this VM's name from IMDS at http://127.0.0.1:"
    )
    assert "within 3 s (" in problem and "connection refused" in problem


def test_check_names_the_vm_imds_gives(tmp_path: Path) -> None:
    with Simulator(port=0, vm_name="vmss_2") as sim:
        cfg = write_config(tmp_path / "c.toml", endpoint=sim.url, db=tmp_path / "s.db")
        done = run_cli("check", "--config", str(cfg), timeout=30)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "ok: imds: this VM's name is vmss_2 (IMDS's compute name" in done.stdout


@pytest.mark.slow
def test_approve_without_imds_records_for_a_daemon_and_invents_no_agent(
    known_event: tuple[Path, str], tmp_path: Path
) -> None:
    cfg, event_id = known_event
    done = run_cli("approve", event_id, "--as", "alice", "--config", str(cfg), timeout=60)
    assert done.returncode == 4, done.stdout + done.stderr  # held: recorded, not carried out
    assert "a daemon whose IMDS lists the event sends StartRequests" in done.stdout
    db = tmp_path / "s.db"
    assert query(db, "SELECT actor, state, claimed_by FROM approvals") == [
        ("alice", "pending", None)
    ]
    assert query(db, "SELECT agent FROM documents") == [("vm0",)]
    assert query(db, "SELECT COUNT(*) FROM sightings WHERE agent <> 'vm0'") == [(0,)]

"""`sebridge` processes on one PostgreSQL database: a second `run` or a `once` beside the daemon
is refused naming the holder (fleet mode is not built yet); the CLI works beside it; an
approval recorded by another process reaches IMDS through the daemon, woken by NOTIFY; a
kill -9'd daemon never blocks a restart.

Real processes, the IMDS simulator, JSON lines in tmp_path, and a database of this module's
own on the machine's server (tests/pg.py).
"""

from __future__ import annotations

import signal
import socket
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

import pg
from helpers import (
    DaemonProcess,
    event_gets,
    free_port,
    lines_of,
    run_cli,
    wait_line,
    wait_until,
    write_config,
)
from sebridge.simulator import Simulator
from sebridge.store.postgres import DAEMON_LOCK

START_TIMEOUT = 20.0


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    with pg.temporary_database() as url:
        yield url


@pytest.fixture
def url(pg_database: str) -> str:
    return pg.reset(pg_database)


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator(port=0, approval_delay=3600) as simulator:
        yield simulator


@pytest.fixture
def config(tmp_path: Path, sim: Simulator, url: str) -> Path:
    return write_config(
        tmp_path / "sebridge.toml", endpoint=sim.url, store_url=url, jsonl=tmp_path / "events.jsonl"
    )


@pytest.fixture
def start_daemon(tmp_path: Path, sim: Simulator) -> Iterator[Callable[[Path], DaemonProcess]]:
    daemons: list[DaemonProcess] = []

    def start(config: Path) -> DaemonProcess:
        before = event_gets(sim)
        daemon = DaemonProcess(config, tmp_path / f"daemon-{len(daemons)}.log")
        daemons.append(daemon)
        wait_until(
            lambda: event_gets(sim) > before or not daemon.alive(),
            START_TIMEOUT,
            message="the daemon's first IMDS GET",
        )
        assert daemon.alive(), daemon.log_text()
        return daemon

    yield start
    for daemon in daemons:
        daemon.kill()
    for daemon in daemons:
        print(f"--- {daemon.log.name} (exit {daemon.proc.returncode}) ---\n{daemon.log_text()}")


def holder(pid: int) -> str:
    return f"pid {pid} on host {socket.gethostname()}"


def daemon_lock_held(url: str) -> bool:
    key = (DAEMON_LOCK >> 32, DAEMON_LOCK & 0xFFFFFFFF)
    rows = pg.query(
        url,
        "SELECT 1 FROM pg_locks l JOIN pg_database d ON d.oid = l.database "
        "WHERE l.locktype = 'advisory' AND d.datname = current_database() "
        f"AND l.classid = {key[0]} AND l.objid = {key[1]} AND l.granted",
    )
    return bool(rows)


def test_a_second_run_and_once_are_refused_naming_the_holder(
    config: Path, sim: Simulator, tmp_path: Path, start_daemon: Callable[[Path], DaemonProcess]
) -> None:
    first = start_daemon(config)
    second = run_cli("run", "--config", str(config), timeout=30)
    assert second.returncode == 1
    (line,) = second.stderr.strip().splitlines()
    assert holder(first.pid) in line and "until fleet mode" in line
    event_id = sim.schedule("Reboot")
    wait_line(tmp_path / "events.jsonl", event_id, "scheduled")
    once = run_cli("once", "--config", str(config))
    assert once.returncode == 1 and holder(first.pid) in once.stderr
    sim.complete(event_id)
    wait_line(tmp_path / "events.jsonl", event_id, "cancelled")
    assert [r["transition"] for r in lines_of(tmp_path / "events.jsonl", event_id)] == [
        "scheduled",
        "cancelled",
    ]
    assert first.alive()


def test_the_cli_works_beside_the_daemon_and_an_approval_it_could_not_post_is_carried_out(
    config: Path,
    sim: Simulator,
    tmp_path: Path,
    url: str,
    start_daemon: Callable[[Path], DaemonProcess],
) -> None:
    start_daemon(config)
    event_id = sim.schedule("Reboot")
    wait_line(tmp_path / "events.jsonl", event_id, "scheduled")
    for args in (["events"], ["history"], ["check"]):
        done = run_cli(*args, "--config", str(config))
        assert done.returncode == 0, (args, done.stderr)
        assert event_id in done.stdout or args == ["check"]
    # `sebridge approve` on a machine whose IMDS does not list the event (it does not even
    # answer): it records the approval, never POSTs it, and leaves it to the daemon, which
    # nothing else tells.
    elsewhere = write_config(
        tmp_path / "elsewhere.toml",
        endpoint=f"http://127.0.0.1:{free_port()}",
        store_url=url,
        vm_name="vm-elsewhere",
    )
    approved = run_cli("approve", event_id, "--as", "alice", "--config", str(elsewhere))
    assert approved.returncode == 0, approved.stderr
    assert "a daemon whose IMDS lists the event sends StartRequests" in approved.stdout
    # The daemon hears the commit (NOTIFY) at its next tick: no idle timeout to wait out.
    wait_until(lambda: sim.start_requests == [event_id], message="the daemon's StartRequests")
    line = wait_line(tmp_path / "events.jsonl", event_id, "approved")
    assert line["actor"] == "alice"
    assert pg.query(url, "SELECT actor, state FROM approvals") == [("alice", "posted")]


def test_a_killed_daemon_never_blocks_a_restart(
    config: Path,
    sim: Simulator,
    tmp_path: Path,
    url: str,
    start_daemon: Callable[[Path], DaemonProcess],
) -> None:
    first = start_daemon(config)
    assert daemon_lock_held(url)
    first.signal(signal.SIGKILL)
    first.wait(10)
    # The server ends the session once its socket closes: the lock goes with it.
    wait_until(lambda: not daemon_lock_held(url), message="the dead daemon's session to end")
    second = start_daemon(config)
    event_id = sim.schedule("Freeze", duration=5)
    wait_line(tmp_path / "events.jsonl", event_id, "scheduled")
    assert second.alive()
    refused = run_cli("run", "--config", str(config), timeout=30)
    assert refused.returncode == 1 and holder(second.pid) in refused.stderr


def test_a_database_that_does_not_answer_at_start_is_exit_1_without_the_password(
    tmp_path: Path, sim: Simulator
) -> None:
    config = write_config(
        tmp_path / "down.toml",
        endpoint=sim.url,
        store_url=f"postgresql://sebridge:S3CRET-5150@127.0.0.1:{free_port()}/sebridge",
    )
    for command in ("run", "once", "events"):
        done = run_cli(command, "--config", str(config), timeout=30)
        assert done.returncode == 1, (command, done.stderr)
        assert "cannot connect to the store at postgresql://sebridge:***@127.0.0.1" in done.stderr
        assert "S3CRET" not in done.stdout + done.stderr


def test_once_on_postgresql_records_and_delivers(
    config: Path, sim: Simulator, tmp_path: Path, url: str
) -> None:
    event_id = sim.schedule("Reboot")
    done = run_cli("once", "--json", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert lines_of(tmp_path / "events.jsonl", event_id, "scheduled")
    assert pg.query(url, "SELECT event_id, kind FROM transitions") == [(event_id, "scheduled")]
    again = run_cli("once", "--json", "--config", str(config))  # the same document: nothing new
    assert again.returncode == 0, again.stderr
    assert len(lines_of(tmp_path / "events.jsonl", event_id)) == 1

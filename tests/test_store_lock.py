"""One daemon per SQLite store: a second `run` or a `once` beside it refuses, naming the holder;
the CLI's readers and `approve` work beside it; a kill -9'd holder never blocks a restart.

Real `sebridge` processes against the IMDS simulator, store and JSON lines in tmp_path.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import sqlite3
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import (
    DaemonProcess,
    cli_env,
    lines_of,
    run_cli,
    transitions_in_store,
    wait_line,
    write_config,
)
from sebridge.imds.simulator import Simulator
from sebridge.kernel.errors import StoreError
from sebridge.store import Store
from sebridge.store.sqlite import SqliteDatabase


@pytest.fixture
def config(tmp_path: Path, sim: Simulator) -> Path:
    return write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "state.db",
        jsonl=tmp_path / "events.jsonl",
    )


def holder(pid: int) -> str:
    return f"pid {pid} on host {socket.gethostname()}"


def test_a_second_run_on_the_same_store_refuses_naming_the_holder(
    config: Path, sim: Simulator, start_daemon: Callable[..., DaemonProcess]
) -> None:
    first = start_daemon(config, sim)
    second = run_cli("run", "--config", str(config), timeout=30)
    assert second.returncode == 1
    # Besides the start's "asking IMDS ... for this VM's name" line: the refusal, once.
    (line,) = [s for s in second.stderr.strip().splitlines() if "asking IMDS" not in s]
    assert holder(first.pid) in line and "state.db" in line
    assert first.alive()


@pytest.mark.slow
def test_once_beside_the_daemon_refuses_and_nothing_is_delivered_twice(
    config: Path, sim: Simulator, tmp_path: Path, start_daemon: Callable[..., DaemonProcess]
) -> None:
    daemon = start_daemon(config, sim)
    event_id = sim.schedule("Reboot")
    wait_line(tmp_path / "events.jsonl", event_id, "scheduled")
    once = run_cli("once", "--config", str(config))
    assert once.returncode == 1
    assert holder(daemon.pid) in once.stderr
    sim.complete(event_id)
    wait_line(tmp_path / "events.jsonl", event_id, "cancelled")
    assert [r["transition"] for r in lines_of(tmp_path / "events.jsonl", event_id)] == [
        "scheduled",
        "cancelled",
    ]


@pytest.mark.slow
def test_events_history_approve_and_check_work_beside_the_daemon(
    config: Path, sim: Simulator, tmp_path: Path, start_daemon: Callable[..., DaemonProcess]
) -> None:
    start_daemon(config, sim)
    event_id = sim.schedule("Reboot")
    wait_line(tmp_path / "events.jsonl", event_id, "scheduled")
    for args in (["events"], ["history"], ["check"]):
        done = run_cli(*args, "--config", str(config))
        assert done.returncode == 0, (args, done.stderr)
        assert "in use" not in done.stderr
    approved = run_cli("approve", event_id, "--as", "alice", "--config", str(config))
    assert approved.returncode == 0, approved.stderr
    assert sim.start_requests == [event_id]
    line = wait_line(tmp_path / "events.jsonl", event_id, "approved")  # the daemon delivered it
    assert line["actor"] == "alice"


@pytest.mark.slow
def test_a_killed_daemon_never_blocks_a_restart(
    config: Path, sim: Simulator, tmp_path: Path, start_daemon: Callable[..., DaemonProcess]
) -> None:
    first = start_daemon(config, sim)
    first.signal(signal.SIGKILL)
    first.wait(10)
    # The lock file stays behind, still naming the dead process: the lock itself died with it.
    lock = json.loads((tmp_path / "state.db.lock").read_text(encoding="utf-8"))
    assert lock["pid"] == first.pid
    second = start_daemon(config, sim)
    event_id = sim.schedule("Freeze", duration=5)
    wait_line(tmp_path / "events.jsonl", event_id, "scheduled")
    assert second.alive()
    assert json.loads((tmp_path / "state.db.lock").read_text(encoding="utf-8"))["pid"] == second.pid


@pytest.mark.slow
def test_the_demo_beside_a_daemon_uses_its_own_store_and_touches_nothing_of_it(
    config: Path, sim: Simulator, tmp_path: Path, start_daemon: Callable[..., DaemonProcess]
) -> None:
    # The demo never reads a config: its store is a fresh temporary one, its IMDS its own
    # simulator, its sink the console. Beside a daemon it can neither block nor duplicate.
    start_daemon(config, sim)
    demo = run_cli(
        "demo", "--yes", "--time-scale", "600", env=cli_env(SEBRIDGE_CONFIG=str(config)), timeout=90
    )
    assert demo.returncode == 0, demo.stderr
    assert "demo-vm" in demo.stdout
    assert transitions_in_store(tmp_path / "state.db") == []
    assert not (tmp_path / "events.jsonl").exists()


# ---------------------------------------------------------------- in one process


def test_the_lock_is_freed_when_the_store_closes(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'state.db'}"
    first = Store(url, exclusive=True)
    with pytest.raises(StoreError, match=f"in use by another sebridge \\({holder(os.getpid())}"):
        Store(url, exclusive=True)
    # Readers and `approve` open it without the lock.
    Store(url).close()
    first.close()
    Store(url, exclusive=True).close()


def test_another_spelling_of_the_same_file_is_the_same_store(tmp_path: Path) -> None:
    (tmp_path / "link").symlink_to(tmp_path)
    first = Store(f"sqlite:///{tmp_path / 'state.db'}", exclusive=True)
    try:
        with pytest.raises(StoreError, match="in use"):
            Store(f"sqlite:///{tmp_path / 'link' / 'state.db'}", exclusive=True)
    finally:
        first.close()


def test_an_in_memory_store_needs_no_lock() -> None:
    first, second = Store("sqlite://", exclusive=True), Store("sqlite://", exclusive=True)
    first.close()
    second.close()


def test_another_process_commit_in_the_same_clock_tick_is_still_seen(tmp_path: Path) -> None:
    """The daemon notices `sebridge approve` on a SQLite file by its write marker. A commit
    into a WAL that SQLite reuses in place leaves the file's size as it was, and within one
    tick of the kernel's clock its time too: the marker must change all the same."""
    path = tmp_path / "s.db"
    mine = SqliteDatabase(f"sqlite:///{path}")
    mine.execute("CREATE TABLE t (x INTEGER)")
    other = sqlite3.connect(path, isolation_level=None)
    for i in range(50):  # a WAL of some size
        other.execute("INSERT INTO t VALUES (?)", (i,))
    mine.one("PRAGMA wal_checkpoint(PASSIVE)")  # every frame in the file: the WAL restarts
    wal = Path(f"{path}-wal")
    before = mine.write_marker()
    stats = [os.stat(path), os.stat(wal)]
    other.execute("INSERT INTO t VALUES (99)")  # written from the WAL's start
    other.close()
    for name, stat in zip((path, wal), stats, strict=True):  # the same clock tick
        os.utime(name, ns=(stat.st_atime_ns, stat.st_mtime_ns))
    assert wal.stat().st_size == stats[1].st_size  # reused in place: the files say nothing
    assert mine.write_marker() != before
    mine.close()


def test_a_commit_after_the_files_settled_is_seen(tmp_path: Path) -> None:
    """Once the files' times are well past (the marker then reads two stat()s alone), the
    next commit by another process changes the marker, and an idle look after it does not."""
    path = tmp_path / "s.db"
    mine = SqliteDatabase(f"sqlite:///{path}")
    mine.execute("CREATE TABLE t (x INTEGER)")
    for name in (path, Path(f"{path}-wal")):  # written ten seconds ago
        stat = os.stat(name)
        os.utime(name, ns=(stat.st_atime_ns, stat.st_mtime_ns - 10_000_000_000))
    settled = mine.write_marker()
    assert mine.write_marker() == settled
    other = sqlite3.connect(path, isolation_level=None)
    other.execute("INSERT INTO t VALUES (1)")
    other.close()
    written = mine.write_marker()
    assert written != settled
    mine.close()

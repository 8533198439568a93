"""End to end: `sebridge run` as a real process against the IMDS simulator over real sockets.

The simulator runs in this process (`Simulator(port=0)`), so tests script it and
read what it received directly; the daemon and the CLI are real subprocesses
with a config in tmp_path (console off, JSON lines to a file, store in
tmp_path, 0.2 s polls). Outcomes are awaited with bounded polls, never fixed
sleeps; every process is killed in teardown.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import pytest

from helpers import (
    DaemonProcess,
    FakeClock,
    event_gets,
    free_port,
    lines_of,
    query,
    read_jsonl,
    run_cli,
    transitions_in_store,
    undelivered,
    wait_line,
    wait_polls,
    wait_until,
    write_config,
)
from sebridge.cli.runtime import build_daemon
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import load_config as load

# real `sebridge run` processes: about 17 s for the module, up to 3 s a test
pytestmark = pytest.mark.slow

# A subprocess's Python start-up on a loaded 2-core machine: be generous.
START_TIMEOUT = 20.0


@dataclass
class Setup:
    """One test's files: config, store and JSON-lines output."""

    config: Path
    db: Path
    jsonl: Path


@pytest.fixture
def setup(tmp_path: Path, sim: Simulator) -> Setup:
    db, jsonl = tmp_path / "state.db", tmp_path / "events.jsonl"
    config = write_config(tmp_path / "sebridge.toml", endpoint=sim.url, db=db, jsonl=jsonl)
    return Setup(config, db, jsonl)


def started(daemon: DaemonProcess, sim: Simulator) -> DaemonProcess:
    """Wait until the daemon polled once (its signal handlers are installed by then)."""
    wait_until(
        lambda: event_gets(sim) > 0 or not daemon.alive(),
        START_TIMEOUT,
        message="the daemon's first IMDS GET",
    )
    assert daemon.alive(), daemon.log_text()
    return daemon


def settle(sim: Simulator, db: Path) -> None:
    """A few more polls and an empty outbox: duplicates or stray transitions would show now."""
    wait_polls(sim, 3)
    wait_until(lambda: undelivered(db) == 0, 10, message="an empty outbox")


def kinds(jsonl: Path, event_id: str) -> list[str]:
    return [r["transition"] for r in lines_of(jsonl, event_id)]


# --- 1. lifecycle ----------------------------------------------------------------------------


def test_scheduled_started_completed_each_delivered_once(
    sim: Simulator, setup: Setup, start_daemon: Callable[..., DaemonProcess]
) -> None:
    started(start_daemon(setup.config), sim)
    event_id = sim.schedule("Reboot")

    line = wait_line(setup.jsonl, event_id, "scheduled")
    assert line["event_type"] == "Reboot"
    assert line["status"] == "Scheduled"
    assert line["source"] == "Platform"
    assert line["policy"] == "ask"
    assert line["resources"] == [sim.vm_name]
    assert line["this_vm"] is True  # the daemon learnt its name (vm0) from IMDS

    sim.start_event(event_id)
    assert wait_line(setup.jsonl, event_id, "started")["status"] == "Started"
    sim.complete(event_id)
    wait_line(setup.jsonl, event_id, "completed")

    settle(sim, setup.db)
    assert kinds(setup.jsonl, event_id) == ["scheduled", "started", "completed"]
    assert transitions_in_store(setup.db) == [
        (event_id, "scheduled"),
        (event_id, "started"),
        (event_id, "completed"),
    ]
    assert sim.start_requests == []  # a Platform Reboot waits for a person


# --- 2. approval from the CLI beside the daemon ------------------------------------------------


def test_cli_approval_reaches_imds_once_and_refusals_post_nothing(
    sim: Simulator, setup: Setup, start_daemon: Callable[..., DaemonProcess]
) -> None:
    started(start_daemon(setup.config), sim)
    event_id = sim.schedule("Reboot")
    wait_line(setup.jsonl, event_id, "scheduled")
    cfg = str(setup.config)

    first = run_cli("approve", event_id, "--config", cfg, "--as", "alice")
    assert first.returncode == 0, first.stderr
    assert event_id in first.stdout
    assert "StartRequests sent" in first.stdout
    assert sim.start_requests == [event_id]
    approved = wait_line(setup.jsonl, event_id, "approved")  # delivered by the daemon
    assert approved["actor"] == "alice"
    assert approved["via"] == "cli"
    assert approved["dry_run"] is False

    again = run_cli("approve", event_id, "--config", cfg, "--as", "bob")
    assert again.returncode == 3, again.stderr  # refused: already approved
    assert "already approved" in again.stdout
    assert "alice" in again.stdout  # the first approver stays the approver

    unknown = "00000000-0000-4000-8000-000000000000"
    refused = run_cli("approve", unknown, "--config", cfg)
    assert refused.returncode == 3
    assert "unknown event" in refused.stderr

    running = sim.schedule("Redeploy")
    wait_line(setup.jsonl, running, "scheduled")
    sim.start_event(running)
    wait_line(setup.jsonl, running, "started")
    too_late = run_cli("approve", running, "--config", cfg)
    assert too_late.returncode == 3
    assert "already started" in too_late.stderr

    settle(sim, setup.db)
    assert sim.start_requests == [event_id]
    assert [p.ids for p in sim.posts] == [(event_id,)]  # nothing POSTed for refusals
    assert kinds(setup.jsonl, event_id) == ["scheduled", "approved"]
    assert kinds(setup.jsonl, running) == ["scheduled", "started"]


# --- 3. policy: user-initiated events ---------------------------------------------------------


def test_user_event_is_approved_by_policy(
    make_sim: Callable[..., Simulator],
    tmp_path: Path,
    start_daemon: Callable[..., DaemonProcess],
) -> None:
    sim = make_sim(time_scale=1.0, approval_delay=3600)
    db, jsonl = tmp_path / "state.db", tmp_path / "events.jsonl"
    config = write_config(tmp_path / "sebridge.toml", endpoint=sim.url, db=db, jsonl=jsonl)
    started(start_daemon(config), sim)

    event_id = sim.schedule("Reboot", source="User")
    wait_until(lambda: sim.start_requests, 15, message="StartRequests from the policy")
    line = wait_line(jsonl, event_id, "approved")
    assert line["actor"] == "policy"
    assert line["via"] == "policy"
    assert line["dry_run"] is False
    assert lines_of(jsonl, event_id, "scheduled")[0]["policy"] == "approve"

    settle(sim, db)
    assert sim.start_requests == [event_id]
    assert kinds(jsonl, event_id) == ["scheduled", "approved"]


def test_dry_run_marks_the_approval_and_posts_nothing(
    make_sim: Callable[..., Simulator],
    tmp_path: Path,
    start_daemon: Callable[..., DaemonProcess],
) -> None:
    sim = make_sim()
    db, jsonl = tmp_path / "state.db", tmp_path / "events.jsonl"
    config = write_config(
        tmp_path / "sebridge.toml", endpoint=sim.url, db=db, jsonl=jsonl, dry_run=True
    )
    started(start_daemon(config), sim)

    event_id = sim.schedule("Reboot", source="User")
    line = wait_line(jsonl, event_id, "would_approve")
    assert line["dry_run"] is True
    assert line["actor"] == "policy"
    assert lines_of(jsonl, event_id, "approved") == []

    settle(sim, db)
    assert sim.start_requests == []
    assert sim.posts == []
    assert query(db, "SELECT state FROM approvals WHERE event_id = ?", (event_id,)) == [
        ("dry_run",)
    ]


# --- 4. crash between commit and delivery ----------------------------------------------------


def _crash_with_rows_committed_but_undelivered(
    sim: Simulator,
    setup: Setup,
    start_daemon: Callable[..., DaemonProcess],
    events: tuple[str, ...],
) -> list[str]:
    """Run the daemon with the JSONL path a FIFO nobody reads: the tick commits, the
    delivery blocks opening the FIFO. SIGKILL it there and put a regular path back."""
    os.mkfifo(setup.jsonl)
    daemon = started(start_daemon(setup.config), sim)
    ids = [sim.schedule(event_type) for event_type in events]
    wait_until(
        lambda: (
            len(transitions_in_store(setup.db)) == len(ids) and undelivered(setup.db) == len(ids)
        ),
        15,
        message="the tick's transitions and outbox rows in the store",
    )
    assert sorted(transitions_in_store(setup.db)) == sorted((i, "scheduled") for i in ids)
    daemon.signal(signal.SIGKILL)
    assert daemon.wait(10) == -signal.SIGKILL
    setup.jsonl.unlink()
    assert undelivered(setup.db) == len(ids)  # committed, never sent
    return ids


def test_crash_after_commit_delivers_every_notification_exactly_once(
    sim: Simulator, setup: Setup, start_daemon: Callable[..., DaemonProcess]
) -> None:
    ids = _crash_with_rows_committed_but_undelivered(
        sim, setup, start_daemon, ("Reboot", "Redeploy")
    )

    started(start_daemon(setup.config), sim)
    wait_until(lambda: len(read_jsonl(setup.jsonl)) >= len(ids), 15, message="redelivery")
    # The daemon still works after the restart: a new transition goes out too.
    sim.complete(ids[0])
    wait_line(setup.jsonl, ids[0], "cancelled")
    settle(sim, setup.db)

    stored = transitions_in_store(setup.db)
    sent = [(r["event_id"], r["transition"]) for r in read_jsonl(setup.jsonl)]
    assert sorted(sent) == sorted(stored)  # none missing, none twice
    assert len(set(sent)) == len(sent)
    assert sorted(stored) == sorted(
        [(ids[0], "scheduled"), (ids[1], "scheduled"), (ids[0], "cancelled")]
    )
    assert query(setup.db, "SELECT state, COUNT(*) FROM outbox GROUP BY state") == [
        ("delivered", len(stored))
    ]


def test_redelivery_after_restart_names_this_vm(
    make_sim: Callable[..., Simulator],
    tmp_path: Path,
    start_daemon: Callable[..., DaemonProcess],
) -> None:
    vm = "vm-e2e-7f3a"  # the IMDS compute name, unlike this machine's hostname
    if socket.gethostname() == vm:
        pytest.skip("the hostname equals the simulated VM name")
    sim = make_sim(vm_name=vm)
    db, jsonl = tmp_path / "state.db", tmp_path / "events.jsonl"
    setup = Setup(
        write_config(tmp_path / "sebridge.toml", endpoint=sim.url, db=db, jsonl=jsonl), db, jsonl
    )
    (event_id,) = _crash_with_rows_committed_but_undelivered(sim, setup, start_daemon, ("Reboot",))
    # IMDS is slow to answer the restarted daemon's first poll (it may take up to two
    # minutes on a real VM): the notification must still name this VM correctly.
    sim.inject("hang", seconds=5)
    start_daemon(setup.config)
    line = wait_line(jsonl, event_id, "scheduled", timeout=START_TIMEOUT)
    assert line["resources"] == [vm]
    assert (line["vm"], line["this_vm"]) == (vm, True)


# --- 5. graceful stop --------------------------------------------------------------------------


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_signal_stops_the_daemon_with_exit_code_0(
    signum: int, sim: Simulator, setup: Setup, start_daemon: Callable[..., DaemonProcess]
) -> None:
    daemon = started(start_daemon(setup.config), sim)
    event_id = sim.schedule("Reboot")
    wait_line(setup.jsonl, event_id, "scheduled")
    daemon.signal(signum)
    assert daemon.wait(15) == 0, daemon.log_text()
    assert "Traceback" not in daemon.log_text()


# --- 6. malformed documents --------------------------------------------------------------------


def test_malformed_and_html_answers_change_nothing(
    sim: Simulator, setup: Setup, start_daemon: Callable[..., DaemonProcess]
) -> None:
    daemon = started(start_daemon(setup.config), sim)
    event_id = sim.schedule("Reboot")
    wait_line(setup.jsonl, event_id, "scheduled")

    sim.inject("malformed", count=5)
    sim.inject("html")
    wait_until(lambda: not sim.faults, 15, message="the faults to be served")
    wait_polls(sim, 3)  # and good answers again

    assert daemon.alive(), daemon.log_text()
    assert kinds(setup.jsonl, event_id) == ["scheduled"]
    assert transitions_in_store(setup.db) == [(event_id, "scheduled")]
    listed = run_cli("events", "--json", "--config", str(setup.config))
    assert listed.returncode == 0, listed.stderr
    events = json.loads(listed.stdout)
    assert [(e["event_id"], e["state"], e["present"]) for e in events] == [
        (event_id, "scheduled", True)
    ]
    log = daemon.log_text()
    assert "IMDS poll failed" in log  # said once, readable
    assert "Traceback" not in log

    newer = sim.schedule("Freeze", duration=30)
    wait_line(setup.jsonl, newer, "scheduled")
    settle(sim, setup.db)
    assert kinds(setup.jsonl, event_id) == ["scheduled"]
    assert kinds(setup.jsonl, newer) == ["scheduled"]


# --- 7. IMDS down for a minute (in process, fake clock) --------------------------------------


def test_imds_down_for_a_minute_invents_no_transition(tmp_path: Path) -> None:
    clock = FakeClock()
    sim = Simulator(port=0, clock=clock).start()
    jsonl = tmp_path / "events.jsonl"
    config = load(
        write_config(
            tmp_path / "sebridge.toml",
            endpoint=sim.url,
            db=tmp_path / "state.db",
            jsonl=jsonl,
            poll_interval=10.0,  # 6 polls are a minute
            vm_name=sim.vm_name,
        )
    )
    daemon = build_daemon(config)

    def deliver() -> None:
        for name in daemon.parts.dispatcher.sinks:
            daemon.parts.dispatcher.deliver_due(name)

    def history() -> list[tuple[int, str, str]]:
        return [
            (h.id, h.transition.kind, h.transition.event_id) for h in daemon.store.history.entries()
        ]

    try:
        event_id = sim.schedule("Reboot")
        result = daemon.tick()
        assert result.polled
        assert [(t.kind, t.event_id) for t in result.transitions] == [("scheduled", event_id)]
        deliver()
        before, lines = history(), jsonl.read_text()
        assert len(lines.splitlines()) == 1

        # 30 s of 500s, then 30 s with nothing listening at all (connection refused).
        sim.inject("500", count=10_000)
        for _ in range(3):
            clock.advance(10)
            result = daemon.tick()
            assert not result.polled
            assert "500" in (result.error or "")
            assert result.transitions == []
        sim.stop()
        for _ in range(3):
            clock.advance(10)
            result = daemon.tick()
            assert not result.polled
            assert "cannot reach IMDS" in (result.error or "")
            assert result.transitions == []
        deliver()
        assert history() == before
        assert jsonl.read_text() == lines
        record = daemon.store.events.get(event_id)
        assert record is not None
        assert (record.present, record.state) == (True, "scheduled")

        # IMDS is back: same document, nothing to say.
        sim.clear_faults()
        sim.start()
        for _ in range(3):
            clock.advance(1)
            result = daemon.tick()
            assert result.polled
            assert result.error is None
            assert result.transitions == []
        deliver()
        assert history() == before
        assert jsonl.read_text() == lines
        assert [r.event.event_id for r in daemon.store.events.current()] == [event_id]

        # And it still sees real changes: gone before NotBefore, unapproved -> cancelled.
        sim.complete(event_id)
        result = daemon.tick()
        assert [(t.kind, t.event_id) for t in result.transitions] == [("cancelled", event_id)]
        deliver()
        assert [r["transition"] for r in read_jsonl(jsonl)] == ["scheduled", "cancelled"]
    finally:
        daemon.imds.close()
        daemon.store.close()
        sim.stop()


# --- 8. start-up -------------------------------------------------------------------------------


def test_first_imds_get_arrives_soon_after_start(
    sim: Simulator, setup: Setup, start_daemon: Callable[..., DaemonProcess]
) -> None:
    begun = time.monotonic()
    daemon = start_daemon(setup.config)
    wait_until(lambda: event_gets(sim) > 0, START_TIMEOUT, message="the first IMDS GET")
    assert daemon.alive()
    first = next(r for r in sim.requests if r.path == "/metadata/scheduledevents")
    assert (first.method, first.status) == ("GET", 200)
    # Recorded for the log only; the benchmark measures it, the test does not judge it.
    print(f"first IMDS GET {time.monotonic() - begun:.2f}s after spawning the daemon")


def test_dead_endpoint_keeps_the_daemon_running(
    tmp_path: Path, start_daemon: Callable[..., DaemonProcess]
) -> None:
    port = free_port()
    db = tmp_path / "state.db"
    config = write_config(
        tmp_path / "sebridge.toml",
        endpoint=f"http://127.0.0.1:{port}",
        db=db,
        jsonl=tmp_path / "events.jsonl",
        vm_name="vm0",  # given: without it the start waits for IMDS (test_vm_name.py)
    )
    daemon = start_daemon(config)
    wait_until(
        lambda: "IMDS poll failed" in daemon.log_text() or not daemon.alive(),
        START_TIMEOUT,
        message="the first failed poll in the log",
    )
    assert daemon.alive(), daemon.log_text()
    assert "cannot reach IMDS" in daemon.log_text()
    assert transitions_in_store(db) == []
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(15) == 0

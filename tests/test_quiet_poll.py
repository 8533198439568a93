"""Daemon.quiet(): which polls the daemon keeps from the recorder's thread (engine/daemon.py).

Only a poll that returned the very document object last acted on, with nothing written to
the store since and no timer due, is quiet: it is counted as an unchanged poll on the
poller's thread, and act() is not run for it. A changed document, a failed poll, another
process's write and a due prepare lead are each handed on, and act() then does what it did
before (the approval recorded elsewhere reaches IMDS). The simulator over real sockets, the
real client, a real store, on both dialects.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from helpers import ListSink, wait_until
from sebridge.cli.assembly import compose_daemon
from sebridge.config.loader import from_mapping
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.kernel.clock import utcnow
from sebridge.model import Approval
from sebridge.policy.compile import build_policy
from sebridge.store import Store
from sebridge.web.metrics_export import registry_of


def _daemon(sim: Simulator, url: str, **options: object) -> Daemon:
    imds = ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None)
    return compose_daemon(
        imds, Store(url, agent="vm0"), {"list": ListSink()}, vm_name="vm0", **options
    )  # type: ignore[arg-type]


@pytest.fixture
def daemon(sim: Simulator, store_url: str) -> Iterator[Daemon]:
    made = _daemon(sim, store_url)
    yield made
    made.imds.close()
    made.store.close()


def _unchanged(d: Daemon) -> float:
    value = registry_of(d.metrics).get_sample_value(
        "sebridge_imds_polls_total", {"outcome": "unchanged"}
    )
    assert value is not None
    return value


def _step(d: Daemon) -> bool:
    """One poll as the runner makes it: quiet, or acted on; True when quiet."""
    polled = d.poll()
    if d.quiet(polled):
        return True
    d.act(polled)
    return False


def _first_record(d: Daemon, url: str) -> None:
    """The first poll of a scheduled event, recorded, and its write seen by the daemon.

    PostgreSQL tells of a commit by NOTIFY, heard on the listener's thread some time after
    it (a busy machine: after the next poll); the running daemon is woken by it then
    (Daemon.watch_store). quiet() counts the record's write when the listener has heard it,
    so wait for that before the next poll, which must hand the write on. A SQLite file's
    marker sees the commit at once (and is read by the poll thread alone)."""
    heard = d.store.write_marker() if url.startswith("postgresql") else ()
    assert not _step(d)
    if heard:
        wait_until(lambda: d.store.write_marker() != heard, message="the record's NOTIFY")


def test_an_unchanged_document_is_quiet_and_counted(
    sim: Simulator, daemon: Daemon, store_url: str
) -> None:
    sim.schedule("Reboot")
    _first_record(daemon, store_url)  # the first document is recorded
    assert not _step(daemon)  # the store was written by that record: acted on once more
    before = _unchanged(daemon)
    assert [_step(daemon) for _ in range(3)] == [True, True, True]
    assert _unchanged(daemon) == before + 3


def test_a_changed_document_is_handed_on(sim: Simulator, daemon: Daemon) -> None:
    _step(daemon)
    _step(daemon)
    assert _step(daemon)
    sim.schedule("Reboot")
    polled = daemon.poll()
    assert not daemon.quiet(polled)
    assert [t.kind for t in daemon.act(polled).transitions] == ["scheduled"]


def test_a_failed_poll_is_handed_on(sim: Simulator, daemon: Daemon) -> None:
    _step(daemon)
    _step(daemon)
    sim.inject("500", count=1000)  # the client's retries included
    polled = daemon.poll()
    sim.clear_faults()
    assert polled.document is None
    assert not daemon.quiet(polled)


def test_another_process_write_is_handed_on_and_acted_on(
    sim: Simulator, daemon: Daemon, store_url: str
) -> None:
    eid = sim.schedule("Reboot")  # a person approves a reboot (built-in rules)
    _step(daemon)
    # Quiet once the record's own write was heard and acted on (PostgreSQL: its NOTIFY
    # may come a poll later).
    wait_until(lambda: _step(daemon), message="a quiet poll after the first record")
    other = Store(store_url)  # `sebridge approve` beside the daemon, recording only
    try:
        assert other.approvals.record(Approval(eid, "alice", "cli", daemon.clock()))
    finally:
        other.close()
    polled = daemon.poll()
    for _ in range(200):  # PostgreSQL: until the listener's thread heard the NOTIFY
        if not daemon.quiet(polled):
            break
        polled = daemon.poll()
    else:
        pytest.fail("another process's write was never handed on")
    daemon.act(polled)  # every part is woken (what the other process wrote is unknown)
    daemon.rounds.run_once()  # the rounds their threads would run now
    assert sim.start_requests == [eid]


def test_a_due_prepare_lead_needs_no_poll_handed_on(
    sim: Simulator, store_url: str, tmp_path: Path
) -> None:
    """The hook worker keeps its own time (its round's due time is the lead): a quiet poll
    at the lead wakes nobody, and the worker's round then runs the hook."""
    offset = timedelta()

    def clock() -> datetime:
        return utcnow() + offset

    script = tmp_path / "drain.py"
    script.write_text("pass\n")
    config = from_mapping(
        {
            "policy": {"rules": [{"action": "ask", "prepare": ["drain"]}]},
            "hooks": {"drain": {"command": [sys.executable, str(script)]}},
        }
    )
    d = _daemon(sim, store_url, policy=build_policy(config.policy), hooks=config.hooks, clock=clock)
    d.watch_store()  # as `sebridge run` does: commits heard as they are made, not at a poll
    try:
        sim.schedule("Reboot")  # NotBefore in 15 minutes; its prepare lead in 10
        while not _step(d):
            pass
        event_id = d.store.events.current()[0].event.event_id
        d.parts.hook_worker.run_once()  # before the lead: nothing runs
        assert d.store.hook_runs.of_event(event_id) == []
        offset = timedelta(minutes=10, seconds=1)
        assert _step(d)  # quiet: the recorder is not woken for a timer
        d.parts.hook_worker.run_once()  # the round the worker's own due time brings
        assert [run.run.hook for run in d.store.hook_runs.of_event(event_id)] == ["drain"]
    finally:
        d.imds.close()
        d.store.close()

"""tick() end to end, in process: the simulator over real sockets, the real client, a real store.

Every test on both dialects: a SQLite file in tmp_path and a PostgreSQL database of this
module's own (tests/pg.py; skipped only when no server answers on 127.0.0.1:5432).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from helpers import ListSink, wait_until
from sebridge.cli.assembly import compose_daemon
from sebridge.config.core import PolicyConfig
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.model import Approval
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from sebridge.policy.compile import build_policy
from sebridge.store import Store


class FakeClock:
    """Epoch seconds for the simulator; its datetime for the daemon."""

    def __init__(self) -> None:
        self.t = datetime.now(UTC).timestamp()

    def epoch(self) -> float:
        return self.t

    def now(self) -> datetime:
        return datetime.fromtimestamp(self.t, UTC)

    def advance(self, seconds: float) -> None:
        self.t += seconds


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


@pytest.fixture
def sim(clock: FakeClock) -> Iterator[Simulator]:
    with Simulator(vm_name="vm0", clock=clock.epoch, approval_delay=2.0) as s:
        yield s


class Harness:
    def __init__(self, sim: Simulator, clock: FakeClock, url: str, **options: object) -> None:
        self.sim, self.clock, self.url = sim, clock, url
        self.sink = ListSink()
        self.options = options
        self.daemon = self._daemon()

    def _daemon(self) -> Daemon:
        imds = ImdsClient(self.sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None)
        store = Store(self.url, agent="vm0")
        daemon = compose_daemon(
            imds, store, {"list": self.sink}, vm_name="vm0", clock=self.clock.now, **self.options
        )  # type: ignore[arg-type]
        daemon.carrier.start()  # as in `sebridge run`: a person's approval is carried out
        return daemon

    def tick(self) -> None:
        self.daemon.tick()
        self.daemon.parts.dispatcher.deliver_due(self.sink.name)

    def restart(self) -> None:
        self.daemon.carrier.stop(5.0)
        self.daemon.imds.close()
        self.daemon.store.close()
        self.daemon = self._daemon()

    def close(self) -> None:
        self.daemon.carrier.stop(5.0)
        self.daemon.imds.close()
        self.daemon.store.close()


@pytest.fixture
def h(sim: Simulator, clock: FakeClock, store_url: str) -> Iterator[Harness]:
    harness = Harness(sim, clock, store_url)
    yield harness
    harness.close()


def test_platform_reboot_is_notified_not_approved(h: Harness) -> None:
    eid = h.sim.schedule("Reboot")
    h.tick()
    assert h.sink.pairs() == [("scheduled", eid)]
    assert h.sink.sent[0].policy == "ask"
    h.tick()
    assert h.sim.start_requests == []


def test_user_event_is_approved_by_the_policy(h: Harness) -> None:
    eid = h.sim.schedule("Redeploy", source="User")
    h.tick()
    assert h.sim.start_requests == [eid]
    assert h.sink.pairs() == [("scheduled", eid), ("approved", eid)]
    approved = h.sink.sent[1].transition
    assert (approved.actor, approved.via, approved.dry_run) == ("policy", "policy", False)
    h.clock.advance(3)  # past the simulator's approval delay
    h.tick()
    assert h.sink.pairs()[-1] == ("started", eid)
    h.tick()
    assert h.sim.start_requests == [eid]  # approved once, never again


@pytest.mark.parametrize(("duration", "approved"), [(5, True), (0, True), (9, False), (-1, False)])
def test_freeze_under_nine_seconds_is_approved(h: Harness, duration: int, approved: bool) -> None:
    eid = h.sim.schedule("Freeze", duration=duration)
    h.tick()
    assert h.sim.start_requests == ([eid] if approved else [])


def test_a_persons_approval_reaches_imds_once(h: Harness) -> None:
    eid = h.sim.schedule("Reboot")
    h.tick()
    first = h.daemon.approvals.request(ApprovalRequest(eid.lower(), "alice", "cli"))
    assert first.kind == OutcomeKind.APPROVED and first.event_id == eid
    assert first.approval is not None and first.approval.state == "posted"
    again = h.daemon.approvals.request(ApprovalRequest(eid, "bob", "slack"))
    assert again.kind == OutcomeKind.ALREADY
    assert again.approval is not None and again.approval.actor == "alice"
    h.tick()
    h.tick()
    assert h.sim.start_requests == [eid]
    approved = h.sink.sent[-1].transition
    assert (approved.kind, approved.actor, approved.via) == ("approved", "alice", "cli")


def _refusal(h: Harness, event_id: str) -> str:
    outcome = h.daemon.approvals.request(ApprovalRequest(event_id, "a", "cli"))
    assert outcome.kind == OutcomeKind.REFUSED and outcome.approval is None
    return outcome.reason


def test_approving_unknown_gone_or_started_events_never_reaches_imds(h: Harness) -> None:
    assert "unknown event" in _refusal(h, "00000000-0000-0000-0000-000000000000")
    started = h.sim.schedule("Reboot", status="Started")
    gone = h.sim.schedule("Reboot")
    h.tick()
    h.sim.complete(gone)
    h.tick()
    assert "already started" in _refusal(h, started)
    assert "gone" in _refusal(h, gone)
    h.tick()
    assert h.sim.posts == []
    assert ("unplanned", started) in h.sink.pairs() and ("cancelled", gone) in h.sink.pairs()


def test_a_failed_post_is_retried_on_the_next_tick(h: Harness) -> None:
    eid = h.sim.schedule("Reboot")
    h.tick()
    h.sim.inject("500", count=3)  # the POST, with the client's 2 retries
    held = h.daemon.approvals.request(ApprovalRequest(eid, "alice", "cli"))
    assert held.kind == OutcomeKind.HELD and "500" in held.reason
    assert h.sim.start_requests == []
    record = h.daemon.store.approvals.get(eid)
    assert record is not None and record.state == "pending" and "500" in (record.last_error or "")
    h.tick()
    assert h.sim.start_requests == [eid]
    assert h.sink.pairs().count(("approved", eid)) == 1


def test_dry_run_notifies_but_never_posts(sim: Simulator, clock: FakeClock, store_url: str) -> None:
    h = Harness(sim, clock, store_url, dry_run=True)
    eid = sim.schedule("Reboot", source="User")
    h.tick()
    assert sim.posts == []
    assert h.sink.pairs() == [("scheduled", eid), ("would_approve", eid)]
    assert h.sink.sent[1].transition.dry_run and h.sink.sent[1].dry_run
    h.close()


def test_only_this_vm_ignores_other_vms_events(
    sim: Simulator, clock: FakeClock, store_url: str
) -> None:
    h = Harness(sim, clock, store_url, policy=build_policy(PolicyConfig(only_this_vm=True)))
    sim.schedule("Reboot", resources=["other-vm"])
    mine = sim.schedule("Reboot", resources=["vm0", "other-vm"])
    h.tick()
    assert h.sink.pairs() == [("scheduled", mine)]
    h.close()


def test_unchanged_document_writes_nothing(h: Harness) -> None:
    h.sim.schedule("Reboot")
    h.tick()
    before = _dump(h.url)
    for _ in range(5):
        h.tick()
    assert _dump(h.url) == before


def test_malformed_document_keeps_the_previous_state(h: Harness) -> None:
    eid = h.sim.schedule("Reboot")
    h.tick()
    for kind in ("malformed", "html"):
        h.sim.inject(kind)
        h.tick()
    assert h.sink.pairs() == [("scheduled", eid)]
    record = h.daemon.store.events.get(eid)
    assert record is not None and record.present
    h.tick()
    assert h.sink.pairs() == [("scheduled", eid)]


def test_an_outage_is_not_all_events_completed(h: Harness) -> None:
    eid = h.sim.schedule("Reboot")
    h.tick()
    h.sim.inject("500", count=1000)
    for _ in range(60):
        h.clock.advance(1)
        h.tick()
    h.sim.clear_faults()
    h.tick()
    assert h.sink.pairs() == [("scheduled", eid)]
    record = h.daemon.store.events.get(eid)
    assert record is not None and record.present and record.state == "scheduled"


def test_a_restart_does_not_repeat_transitions(h: Harness) -> None:
    eid = h.sim.schedule("Reboot")
    h.tick()
    h.restart()
    h.tick()
    h.sim.start_event(eid)
    h.tick()
    assert h.sink.pairs() == [("scheduled", eid), ("started", eid)]


def test_an_event_gone_while_we_were_down_completes_if_approved(h: Harness) -> None:
    eid = h.sim.schedule("Reboot")
    h.tick()
    h.daemon.approvals.request(ApprovalRequest(eid, "alice", "cli"))
    h.tick()
    h.restart()  # the VM rebooted with the event; it is gone when we come back
    h.sim.complete(eid)
    h.tick()
    assert h.sink.pairs()[-1] == ("completed", eid)


def _dump(url: str) -> list[tuple[object, ...]]:
    """Every row, read through a connection of its own."""
    store = Store(url)
    try:
        rows: list[tuple[object, ...]] = []
        for table in ("documents", "events", "transitions", "outbox", "approvals", "receipts"):
            rows += [(table, *r) for r in store.db.all(f"SELECT * FROM {table} ORDER BY 1, 2")]
        return rows
    finally:
        store.close()


def test_an_approval_too_late_is_reported_not_posted(h: Harness) -> None:
    eid = h.sim.schedule("Reboot")
    h.tick()
    h.sim.start_event(eid)
    h.tick()  # the daemon sees it started ...
    # ... when an approval made just before (a click in flight) is carried out:
    h.daemon.store.approvals.record(Approval(eid, "bob", "slack", h.clock.now()))
    # A tick acts on it once the write is heard (PostgreSQL: its NOTIFY, on a thread).
    wait_until(lambda: h.tick() or h.sink.sent[-1].transition.kind == "problem")
    assert h.sim.start_requests == []
    problem = h.sink.sent[-1].transition
    assert (problem.kind, problem.actor) == ("problem", "bob")
    assert "started first" in problem.note
    record = h.daemon.store.events.get(eid)
    assert record is not None and record.state == "started"


def test_an_approval_imds_refuses_is_reported(h: Harness) -> None:
    eid = h.sim.schedule("Reboot")
    h.tick()
    h.sim.complete(eid)  # gone from IMDS, but the daemon has not polled since
    refused = h.daemon.approvals.request(ApprovalRequest(eid, "alice", "cli"))
    assert refused.kind == OutcomeKind.REFUSED and "IMDS refused it" in refused.reason
    h.daemon.parts.dispatcher.deliver_due(h.sink.name)
    approval = h.daemon.store.approvals.get(eid)
    assert approval is not None and approval.state == "failed"
    problem = h.sink.sent[-1].transition
    assert problem.kind == "problem" and "IMDS refused" in problem.note

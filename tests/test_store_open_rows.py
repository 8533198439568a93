"""The indexed queries of the periodic rounds (schema version 12) find the rows they found
before: open approvals are found and closed ones are not, events are those in the latest
document (and those gone since a time) with their approval and deliveries, and an approval
counts for diff() while its event is in this agent's document. Beside some history
(store_history.py), on both dialects. The plans: test_store_scans.py.
"""

from __future__ import annotations

from datetime import timedelta

import pytest

from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.approval import ApprovalState
from sebridge.store import Store
from store_history import CLOSED, NOW, SINKS, past


def approval_in(store: Store, state: str, *, lease_over: bool = False) -> None:
    """E1 present, its approval in `state` (posting: claimed by us, lease over or not)."""
    e = ScheduledEvent("E1", "Reboot", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
    store.documents.apply(
        Document(1, (e,)), [], NOW, approvals=[Approval("E1", "alice", "slack", NOW)]
    )
    until = NOW + (timedelta(seconds=-1) if lease_over else timedelta(minutes=2))
    store.db.execute(
        "UPDATE approvals SET state = ?, claimed_by = ?, claimed_until = ? WHERE event_id = 'E1'",
        (state, "vm0" if state == ApprovalState.POSTING else None, until.isoformat()),
    )


@pytest.mark.parametrize(
    ("state", "lease_over", "open_now", "open_or_waiting"),
    [
        (ApprovalState.PENDING, False, True, True),
        (ApprovalState.WAITING, False, False, True),
        (ApprovalState.POSTING, True, True, True),
        (ApprovalState.POSTING, False, False, False),
        *[(state, False, False, False) for state in CLOSED],
    ],
)
def test_open_approvals_are_found_and_closed_ones_are_not(
    store: Store, state: str, lease_over: bool, open_now: bool, open_or_waiting: bool
) -> None:
    past(store, 2)
    approval_in(store, state, lease_over=lease_over)
    assert store.approvals.has_pending(NOW) is open_now
    assert store.approvals.has_pending(NOW, waiting=True) is open_or_waiting
    assert store.agents.heartbeat(NOW) is open_or_waiting  # the heartbeat's look: no outbox row due
    claimed = [a.event_id for a in store.approvals.claim(NOW, timedelta(minutes=2))]
    assert claimed == (["E1"] if open_or_waiting else [])


def test_claims_take_open_approvals_oldest_first(store: Store) -> None:
    past(store, 2)
    events = tuple(
        ScheduledEvent(f"E{i}", "Reboot", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
        for i in range(3)
    )
    store.documents.apply(Document(1, events), [], NOW)
    for i, when in ((2, 0), (0, 1), (1, 2)):  # recorded in this order
        store.approvals.record(Approval(f"E{i}", "alice", "cli", NOW + timedelta(seconds=when)))
    claimed = store.approvals.claim(NOW + timedelta(seconds=5), timedelta(minutes=2))
    assert [a.event_id for a in claimed] == ["E2", "E0", "E1"]


def test_events_reads_present_and_recently_gone_with_approval_and_deliveries(
    store: Store,
) -> None:
    past(store, 2)  # gone a day ago: outside every window below
    e1, e2, e3 = (
        ScheduledEvent(f"E{i}", "Reboot", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
        for i in (1, 2, 3)
    )
    t0 = NOW - timedelta(minutes=30)
    store.documents.apply(
        Document(1, (e1, e2, e3)),
        [(Transition(TransitionKind.SCHEDULED, e, t0), SINKS) for e in (e1, e2, e3)],
        t0,
        approvals=[Approval("E2", "bob", "cli", t0)],
    )
    store.db.execute("UPDATE outbox SET state = 'delivered' WHERE event_id = 'E1'")
    store.db.execute(
        "UPDATE outbox SET state = 'failed', last_error = 'no' "
        "WHERE event_id = 'E2' AND sink = 'jsonl'"
    )
    store.documents.apply(
        Document(2, (e1, e2)), [(Transition(TransitionKind.CANCELLED, e3, NOW), SINKS)], NOW
    )

    now_ids = [r.event.event_id for r in store.events.current()]
    assert now_ids == ["E1", "E2"]
    recent = store.events.current(include_gone_since=NOW - timedelta(hours=1))
    assert [r.event.event_id for r in recent] == ["E1", "E2", "E3"]
    assert recent == [store.events.get(r.event.event_id) for r in recent]  # one record, either way
    e1_record, e2_record, e3_record = recent
    assert e1_record.approval is None
    assert {(s.sink, s.state) for s in e1_record.deliveries} == {
        ("console", "delivered"),
        ("jsonl", "delivered"),
    }
    assert e2_record.approval is not None and e2_record.approval.actor == "bob"
    assert e2_record.approval.state == ApprovalState.PENDING
    assert {(s.sink, s.state, s.last_error) for s in e2_record.deliveries} == {
        ("console", "pending", None),
        ("jsonl", "failed", "no"),
    }
    assert not e3_record.present and e3_record.gone_at == NOW
    assert [(s.sink, s.state) for s in e3_record.deliveries] == [
        ("console", "pending"),
        ("jsonl", "pending"),
    ]
    everything = store.events.current(include_gone_since=NOW - timedelta(days=2))
    assert len(everything) == 10 * 3 + 3  # the history (template and copies), when asked


def test_approved_ids_are_those_of_events_in_our_document(store: Store, store_url: str) -> None:
    """What diff() asks: an approved event that leaves our document is completed, not
    cancelled. Past approvals, and events only another agent lists, are not asked about."""
    past(store, 2)
    e1, e2 = (
        ScheduledEvent(f"E{i}", "Reboot", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
        for i in (1, 2)
    )
    store.documents.apply(
        Document(1, (e1, e2)), [], NOW, approvals=[Approval("E1", "alice", "cli", NOW)]
    )
    assert store.approvals.approved_ids() == frozenset()  # recorded, not carried out yet
    store.db.execute(
        "UPDATE approvals SET state = ? WHERE event_id = 'E1'", (ApprovalState.POSTED,)
    )
    assert store.approvals.approved_ids() == {"E1"}
    other = Store(store_url, "vm1")
    try:
        assert other.approvals.approved_ids() == frozenset()  # vm1's document lists nothing
    finally:
        other.close()
    store.documents.apply(Document(2, (e2,)), [], NOW)
    assert store.approvals.approved_ids() == frozenset()

"""Claiming a delivery is index-backed: the plan walks a sink's pending rows in id order and
stops at its LIMIT, whatever the backlog (schema version 6; docs/ARCHITECTURE.md, "Seams").

How long a claim takes at 100 and at 10,000 pending rows is a benchmark's matter
(bench/big_backlog.py); here the plan itself, on both dialects, before and after the
planner has statistics, beside delivered history it must not walk.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

import pytest

from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind
from sebridge.store import Store

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
EVENTS = 300


def backlog(store: Store, count: int = EVENTS) -> None:
    """`count` events, each with a scheduled row for two sinks, and a changed row behind it
    for one: all pending."""
    events = [
        ScheduledEvent(f"E{i:05d}", "Freeze", "Scheduled", ("vm0",), "VirtualMachine")
        for i in range(count)
    ]
    scheduled = [
        (Transition(TransitionKind.SCHEDULED, e, T0), ("jsonl", "console")) for e in events
    ]
    moved = [replace(e, resources=("vm0", "vm1")) for e in events]
    changed = [
        (Transition(TransitionKind.CHANGED, e, T0, changes=("resources",)), ("jsonl",))
        for e in moved
    ]
    store.documents.apply(Document(1, tuple(events)), scheduled, T0)
    store.documents.apply(Document(2, tuple(moved)), changed, T0)


def plan(store: Store) -> str:
    """The claim's plan as the dialect prints it, one node per line."""
    sql, params = store.outbox.claim_sql, store.outbox.claim_params("jsonl", T0 + timedelta(1))
    if store.location.startswith("postgresql"):
        return "\n".join(str(r[0]) for r in store.db.all("EXPLAIN " + sql, params))
    return "\n".join(str(r[-1]) for r in store.db.all("EXPLAIN QUERY PLAN " + sql, params))


def assert_index_backed(text: str, postgres: bool) -> None:
    # The earlier-row check is one probe of the (sink, event_id, id) index...
    assert "outbox_pending_event" in text, text
    if postgres:
        # ... the rows come in id order under a LIMIT: no sort of every pending row, no
        # scan of the whole table, no anti join over every pending row.
        assert text.splitlines()[0].lstrip().startswith("Limit"), text
        assert "Sort" not in text and "Seq Scan on outbox" not in text, text
        assert "Anti Join" not in text, text
    else:
        assert "SEARCH o USING INDEX outbox_pending (sink=?)" in text, text
        assert "TEMP B-TREE" not in text and "SCAN o" not in text, text


@pytest.mark.slow
def test_the_claim_walks_the_pending_index_in_order(store: Store) -> None:
    backlog(store)
    postgres = store.location.startswith("postgresql")
    assert_index_backed(plan(store), postgres)
    store.db.execute("ANALYZE")  # and once the planner knows the table
    assert_index_backed(plan(store), postgres)
    store.close()


@pytest.mark.slow
def test_delivered_history_is_outside_the_walk(store: Store) -> None:
    """Most rows delivered, a few pending: the plan still starts from the pending index."""
    backlog(store)
    store.db.execute("UPDATE outbox SET state = 'delivered' WHERE id % 50 <> 0")
    store.db.execute("ANALYZE")
    assert_index_backed(plan(store), store.location.startswith("postgresql"))
    store.close()


@pytest.mark.slow
def test_claims_keep_each_events_rows_in_order_across_a_big_backlog(store: Store) -> None:
    """The rewritten condition (the oldest pending row of its event) claims every event's
    scheduled row before its changed row, and each row once."""
    backlog(store)
    now = T0 + timedelta(seconds=1)
    first = store.outbox.claim("jsonl", now, now + timedelta(minutes=2), limit=1000)
    assert len(first) == EVENTS
    assert {d.transition.kind for d in first} == {TransitionKind.SCHEDULED}
    assert store.outbox.claim("jsonl", now, now + timedelta(minutes=2)) == []  # all held
    for delivery in first:
        store.outbox.ack(delivery, None, now)
    second = store.outbox.claim("jsonl", now, now + timedelta(minutes=2), limit=1000)
    assert [d.transition.kind for d in second] == [TransitionKind.CHANGED] * EVENTS
    assert [d.transition.event_id for d in second] == sorted(d.transition.event_id for d in first)
    store.close()

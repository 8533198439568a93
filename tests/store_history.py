"""A store with history, for the tests of what periodic rounds read (test_store_scans.py,
test_store_open_rows.py): events that came and went, with everything they left behind.

The rows are written the way the daemon writes them (Store.documents.apply), then copied in bulk
under new event ids: a planner judges a table by its size (PostgreSQL's reads a table of a
few hundred rows whole, rightly), and Store.documents.apply takes seconds per thousand events there.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.approval import ApprovalState
from sebridge.store import Store

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
COPIES = 500  # x 10 events that came and went (a day ago), with everything they left behind
SINKS = ("console", "jsonl")
CLOSED = (
    ApprovalState.POSTED,
    ApprovalState.DRY_RUN,
    ApprovalState.FAILED,
    ApprovalState.ABANDONED,
    ApprovalState.HELD,
)


def past(store: Store, copies: int = COPIES) -> None:
    """Events that came and went a day ago, with all they left behind: ten written the way
    the daemon writes them (Store.documents.apply; every other one approved, its approval closed in
    each closed state in turn, and completed; the rest cancelled; every transition delivered
    to both sinks), then each of their rows copied `copies` times under new event ids, in
    bulk (a planner judges a table by its size: PostgreSQL's reads a table of a few hundred
    rows whole, rightly)."""
    at = NOW - timedelta(days=1)
    events = tuple(
        ScheduledEvent(f"TMPL{i}", "Reboot", "Scheduled", ("vm0",), not_before=at)
        for i in range(2 * len(CLOSED))
    )
    approved = {e.event_id: CLOSED[i // 2] for i, e in enumerate(events) if i % 2 == 0}
    store.documents.apply(
        Document("past", events),
        [(Transition(TransitionKind.SCHEDULED, e, at), SINKS) for e in events],
        at,
        approvals=[Approval(event_id, "alice", "slack", at) for event_id in sorted(approved)],
    )
    for event_id, state in approved.items():
        store.db.execute(
            "UPDATE approvals SET state = ?, done_at = ? WHERE event_id = ?",
            (state, at.isoformat(), event_id),
        )
    kinds = {True: TransitionKind.COMPLETED, False: TransitionKind.CANCELLED}
    gone = [Transition(kinds[e.event_id in approved], e, at) for e in events]
    store.documents.apply(Document("past-gone", ()), [(t, SINKS) for t in gone], at)
    store.db.execute("UPDATE outbox SET state = 'delivered', delivered_at = ?", (at.isoformat(),))
    store.db.execute(  # what each sink answered (a Slack message's ts, a Jira key)
        "INSERT INTO receipts (event_id, sink, external_id, data) "
        "SELECT DISTINCT event_id, sink, 'ts', '{}' FROM outbox"
    )
    for table, columns in COPIED.items():
        into = ", ".join(columns)
        values = ", ".join(_COPY.get(c, c) for c in columns)
        store.db.execute(
            f"{_NUMBERS} INSERT INTO {table} ({into}) SELECT {values} FROM {table}, n "
            "WHERE event_id LIKE 'TMPL%'",
            (copies,),
        )
    # A copied row names its copied transition: the one of its event and kind.
    store.db.execute(
        f"{_NUMBERS} INSERT INTO outbox (transition_id, event_id, sink, state, attempts, "
        "next_attempt_at, delivered_at, begun) SELECT c.id, c.event_id, o.sink, o.state, "
        "o.attempts, o.next_attempt_at, o.delivered_at, o.begun "
        "FROM outbox o JOIN transitions t ON t.id = o.transition_id CROSS JOIN n "
        "JOIN transitions c ON c.event_id = replace(t.event_id, 'TMPL', 'P' || i || '-') "
        "AND c.kind = t.kind WHERE o.event_id LIKE 'TMPL%'",
        (copies,),
    )


# Copies 1..n of the template rows (a recursive CTE: the same SQL on both dialects).
_NUMBERS = "WITH RECURSIVE n (i) AS (SELECT 1 UNION ALL SELECT i + 1 FROM n WHERE i < ?)"
_COPY = {
    "event_id": "replace(event_id, 'TMPL', 'P' || i || '-')",
    "data": "replace(data, 'TMPL', 'P' || i || '-')",
}
COPIED = {
    "events": (
        "event_id",
        "event_type",
        "status",
        "state",
        "policy",
        "data",
        "present",
        "first_seen",
        "last_seen",
        "gone_at",
        "decision",
    ),
    "sightings": ("agent", "event_id", "incarnation", "present", "last_seen"),
    "approvals": ("event_id", "actor", "via", "at", "state", "attempts", "done_at"),
    "transitions": ("event_id", "kind", "at", "data", "content"),
    "receipts": ("event_id", "sink", "external_id", "data"),
}


def present(store: Store, count: int = 3) -> Document:
    """`count` events in this agent's document now, their first message delivered."""
    events = tuple(
        ScheduledEvent(f"O{i}", "Freeze", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
        for i in range(count)
    )
    document = Document("now", events)
    opened = NOW - timedelta(hours=2)
    store.documents.apply(
        document, [(Transition(TransitionKind.SCHEDULED, e, opened), SINKS) for e in events], opened
    )
    store.db.execute("UPDATE outbox SET state = 'delivered' WHERE state = 'pending'")
    return document

"""Periodic rounds read open rows only, through an index (schema version 11).

With history in the store (past events, their transitions, delivered outbox rows, closed
approvals), every statement an idle round sends (the carrier's, the hook worker's, the
reminders', the Jira search's, the dispatcher's, the heartbeat's) and those of a tick that
records a changed document are planned as index searches, or as scans of a partial index
that holds open rows alone: the plan, as each dialect prints it, before and after the
planner has statistics (PostgreSQL: after, as autovacuum gives them). How long a round
takes at 20 and at 20,000 past events is bench/idle_round.py's matter. Then the rows: the
indexed queries find what they found before (closed approvals are not open, gone events
are not present, an approval counts for diff() while its event is in our document).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from helpers import ListSink
from sebridge.approval.states import ApprovalState
from sebridge.daemon import Daemon, Polled, TickResult
from sebridge.hooks.process import HookSpec
from sebridge.imds import ImdsClient
from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.store import Store

NOW = datetime(2026, 11, 27, 12, 0, tzinfo=UTC)
COPIES = 500  # x 10 events that came and went (a day ago), with everything they left behind
SINKS = ("console", "jsonl")
# The indexes that hold open rows only (schema versions 6 and 11): a scan of one reads no
# history. Any other scan of a table that keeps history is what this module forbids.
PARTIAL = {
    "outbox_pending",
    "outbox_pending_event",
    "approvals_open",
    "events_present",
    "events_gone",
    "sightings_present",
}
HISTORY = ("events", "approvals", "sightings", "outbox", "transitions", "receipts", "hook_runs")
CLOSED = (
    ApprovalState.POSTED,
    ApprovalState.DRY_RUN,
    ApprovalState.FAILED,
    ApprovalState.ABANDONED,
    ApprovalState.HELD,
)


def past(store: Store, copies: int = COPIES) -> None:
    """Events that came and went a day ago, with all they left behind: ten written the way
    the daemon writes them (Store.apply; every other one approved, its approval closed in
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
    store.apply(
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
    store.apply(Document("past-gone", ()), [(t, SINKS) for t in gone], at)
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
    store.apply(
        document, [(Transition(TransitionKind.SCHEDULED, e, opened), SINKS) for e in events], opened
    )
    store.db.execute("UPDATE outbox SET state = 'delivered' WHERE state = 'pending'")
    return document


def daemon(store: Store) -> Daemon:
    """A daemon over the store, without threads: each round runs on the caller's."""
    return Daemon(
        ImdsClient("http://127.0.0.1:9", retries=0),  # never asked: nothing is approved
        store,
        {name: ListSink() for name in SINKS},
        vm_name="vm0",
        hooks={"drain": HookSpec("drain", ("true",))},  # a hook: the worker reads events
        clock=lambda: NOW,
    )


class Recorded:
    """Every statement the store sends while installed (Database._run, which all go through)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[tuple[str, tuple[Any, ...]]] = []
        self._monkeypatch = monkeypatch
        self._db = store.db
        run = store.db._run

        def recording(sql: str, params: Sequence[Any] = ()) -> Any:
            self.sent.append((sql, tuple(params)))
            return run(sql, params)

        monkeypatch.setattr(store.db, "_run", recording)

    def stop(self) -> list[tuple[str, tuple[Any, ...]]]:
        self._monkeypatch.undo()
        return [
            (sql, p) for sql, p in self.sent if re.match(r"\s*(SELECT|UPDATE|INSERT|DELETE)", sql)
        ]


def plan(store: Store, sql: str, params: tuple[Any, ...]) -> list[str]:
    """The statement's plan as the dialect prints it, one node (or detail) per line."""
    if postgres(store):
        return [str(r[0]) for r in store.db.all("EXPLAIN " + sql, params)]
    return [str(r[-1]) for r in store.db.all("EXPLAIN QUERY PLAN " + sql, params)]


def postgres(store: Store) -> bool:
    return store.db.location.startswith("postgresql")


def full_reads(store: Store, lines: list[str]) -> list[str]:
    """The plan's reads of every row of a table that keeps history, or of a whole index that
    is not one of the partial (open rows only) ones."""
    bad: list[str] = []
    if not postgres(store):
        for line in lines:
            scan = re.match(r"\s*SCAN (\w+)(?: USING (?:COVERING )?INDEX (\w+))?", line)
            if scan and scan[1] not in ("documents", "CONSTANT") and scan[2] not in PARTIAL:
                bad.append(line)
        return bad
    for i, line in enumerate(lines):
        seq = re.search(r"Seq Scan on (\w+)", line)
        if seq and seq[1] in HISTORY:
            bad.append(line)
        index = re.search(
            r"(?:Index|Index Only|Bitmap Index) Scan (?:Backward )?(?:using|on) (\w+)", line
        )
        if index and index[1] not in PARTIAL:
            detail = []
            for later in lines[i + 1 :]:
                if "->" in later:
                    break
                detail.append(later)
            if not any("Index Cond" in d for d in detail):
                bad.append(line)
    return bad


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url, "vm0", exclusive=True)
    yield s
    s.close()


def rounds(d: Daemon, document: Document) -> dict[str, Callable[[], object]]:
    """An idle round of each periodic part, then a tick that records a changed document."""
    store = d.store
    flip = ScheduledEvent("F1", "Freeze", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
    changed = replace(document, incarnation="changed", events=(*document.events, flip))
    return {
        "carrier": d.carrier.wake,
        "hook worker": d.hooks.worker.round,
        "reminders": lambda: d.reminders.round(NOW),
        "jira search": d.approvals.open_events,
        "dispatcher claim": lambda: store.outbox.claim("jsonl", NOW, NOW + timedelta(minutes=2)),
        "dispatcher next_due": lambda: store.outbox.next_due("jsonl"),
        "heartbeat": lambda: store.heartbeat(NOW),
        "health probe": lambda: store.remember("health_probe", NOW.isoformat()),
        "changed tick": lambda: d.act(Polled(changed, NOW, TickResult())),
        "claim after it": lambda: store.outbox.claim("jsonl", NOW, NOW + timedelta(minutes=2)),
    }


@pytest.mark.parametrize("statistics", [False, True], ids=["no statistics", "analyzed"])
def test_every_statement_of_a_round_reads_through_an_index(
    store: Store, monkeypatch: pytest.MonkeyPatch, statistics: bool
) -> None:
    if postgres(store) and not statistics:
        # Never analyzed, PostgreSQL guesses (a table's rows from its pages, 0.5 % of them
        # present) and hashes whole tables for what are three rows; autovacuum analyzes a
        # table long before it holds this much history.
        pytest.skip("PostgreSQL plans with the statistics autovacuum keeps")
    past(store)
    document = present(store)
    if statistics:
        store.db.execute("ANALYZE")
    d = daemon(store)
    used: set[str] = set()
    for name, run in rounds(d, document).items():
        recorded = Recorded(store, monkeypatch)
        run()
        statements = recorded.stop()
        assert statements, name
        for sql, params in statements:
            lines = plan(store, sql, params)
            assert full_reads(store, lines) == [], (name, sql, "\n".join(lines))
            used |= {index for index in PARTIAL if any(index in line for line in lines)}
    # Each open-rows index served some round (the carrier's checks and claim, events, the
    # hook worker's recently gone, our sightings): none was left for a scan of history.
    assert {"approvals_open", "events_present", "events_gone", "sightings_present"} <= used


# -- the same rows as before -------------------------------------------------------------------


def approval_in(store: Store, state: str, *, lease_over: bool = False) -> None:
    """E1 present, its approval in `state` (posting: claimed by us, lease over or not)."""
    e = ScheduledEvent("E1", "Reboot", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
    store.apply(Document(1, (e,)), [], NOW, approvals=[Approval("E1", "alice", "slack", NOW)])
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
    assert store.has_pending_approvals(NOW) is open_now
    assert store.has_pending_approvals(NOW, waiting=True) is open_or_waiting
    assert store.heartbeat(NOW) is open_or_waiting  # the heartbeat's look: no outbox row due
    claimed = [a.event_id for a in store.claim_approvals(NOW, timedelta(minutes=2))]
    assert claimed == (["E1"] if open_or_waiting else [])


def test_claims_take_open_approvals_oldest_first(store: Store) -> None:
    past(store, 2)
    events = tuple(
        ScheduledEvent(f"E{i}", "Reboot", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
        for i in range(3)
    )
    store.apply(Document(1, events), [], NOW)
    for i, when in ((2, 0), (0, 1), (1, 2)):  # recorded in this order
        store.record_approval(Approval(f"E{i}", "alice", "cli", NOW + timedelta(seconds=when)))
    claimed = store.claim_approvals(NOW + timedelta(seconds=5), timedelta(minutes=2))
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
    store.apply(
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
    store.apply(
        Document(2, (e1, e2)), [(Transition(TransitionKind.CANCELLED, e3, NOW), SINKS)], NOW
    )

    now_ids = [r.event.event_id for r in store.events()]
    assert now_ids == ["E1", "E2"]
    recent = store.events(include_gone_since=NOW - timedelta(hours=1))
    assert [r.event.event_id for r in recent] == ["E1", "E2", "E3"]
    assert recent == [store.event(r.event.event_id) for r in recent]  # one record, either way
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
    everything = store.events(include_gone_since=NOW - timedelta(days=2))
    assert len(everything) == 10 * 3 + 3  # the history (template and copies), when asked


def test_approved_ids_are_those_of_events_in_our_document(store: Store, store_url: str) -> None:
    """What diff() asks: an approved event that leaves our document is completed, not
    cancelled. Past approvals, and events only another agent lists, are not asked about."""
    past(store, 2)
    e1, e2 = (
        ScheduledEvent(f"E{i}", "Reboot", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
        for i in (1, 2)
    )
    store.apply(Document(1, (e1, e2)), [], NOW, approvals=[Approval("E1", "alice", "cli", NOW)])
    assert store.approved_ids() == frozenset()  # recorded, not carried out yet
    store.db.execute(
        "UPDATE approvals SET state = ? WHERE event_id = 'E1'", (ApprovalState.POSTED,)
    )
    assert store.approved_ids() == {"E1"}
    other = Store(store_url, "vm1")
    try:
        assert other.approved_ids() == frozenset()  # vm1's document lists nothing
    finally:
        other.close()
    store.apply(Document(2, (e2,)), [], NOW)
    assert store.approved_ids() == frozenset()

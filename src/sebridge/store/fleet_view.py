"""What the fleet page and its calendar feed read: every agent's events in four statements.

Read only. The open events and those that ended since a time, each with its
approval; every VM's hook runs of those events; how often and when each event
changed (its transitions: the calendar's SEQUENCE and LAST-MODIFIED, and when
it started); and the agents the fleet knows. A page of 500 events costs these
four round trips, not four per event, and an event's row unchanged since the
last read is not parsed again (bench/fleet_page.py). See
docs/ARCHITECTURE.md, "The fleet page".
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime, timedelta

from sebridge.model import HookRun, TransitionKind
from sebridge.model.records import ApprovalRecord, EventRecord, HookRunRecord
from sebridge.store.codec import decision_from_db, event_from_dict, from_iso, iso
from sebridge.store.database import Database, Row
from sebridge.store.store import AgentSeen

__all__ = ["Changes", "FleetRead", "FleetView"]

# The events shown, as the partial indexes events_present and events_gone state them (a
# planner uses a partial index only for a query that states its condition).
_SHOWN = (
    "SELECT event_id FROM events WHERE present = 1 "
    "UNION ALL SELECT event_id FROM events WHERE present = 0 AND gone_at >= ?"
)
_APPROVAL = (
    "a.actor, a.via, a.at, a.state, a.attempts, a.last_error, a.done_at, a.unanswered, "
    "a.anyway_by, a.anyway_via, a.actor_id, a.anyway_id"
)
_EVENTS = (
    "SELECT e.event_id, e.data, e.state, e.policy, e.present, e.first_seen, e.last_seen, "
    f"e.gone_at, e.decision, {_APPROVAL} FROM events e "
    "LEFT JOIN approvals a ON a.event_id = e.event_id WHERE {arm}"
)
_HOOK_RUNS = (
    "SELECT h.event_id, h.vm, h.stage, h.hook, h.attempt, h.state, h.started_at, "
    "h.finished_at, h.exit_code, h.timed_out, h.seconds, h.output, h.why, h.tries, "
    "h.retry_at, CASE WHEN r.seq > h.retry_asked THEN 1 ELSE 0 END "
    "FROM hook_runs h LEFT JOIN hook_retries r ON r.event_id = h.event_id "
    f"WHERE h.event_id IN ({_SHOWN}) ORDER BY h.started_at, h.vm, h.hook"
)
# Started: the first `started` or `unplanned` transition (IMDS sends no NotBefore then).
_CHANGES = (
    "SELECT t.event_id, COUNT(*), MAX(t.at), "
    "MIN(CASE WHEN t.kind IN (?, ?) THEN t.at END) FROM transitions t "
    f"WHERE t.event_id IN ({_SHOWN}) GROUP BY t.event_id"
)


@dataclass(frozen=True)
class Changes:
    """How often an event's record changed (its transitions), the latest when, and when it
    started (None: not seen starting)."""

    count: int
    last: datetime
    started: datetime | None


@dataclass(frozen=True)
class FleetRead:
    """One read of the fleet: its events (open ones first seen first, then those ended),
    each event's hook runs, its changes, and the agents known."""

    events: tuple[EventRecord, ...]
    runs: dict[str, list[HookRunRecord]]
    changes: dict[str, Changes]
    agents: dict[str, AgentSeen]


class FleetView:
    """The fleet page's reads, over the store's database (any agent's: the whole fleet)."""

    def __init__(self, db: Database) -> None:
        self._db = db
        # Each event's row as last read, and what it was parsed into: an unchanged row is
        # not parsed again (its JSON, its times: 18 µs an event, most of a read's CPU).
        self._parsed: dict[str, tuple[Row, EventRecord]] = {}

    def read(self, now: datetime, *, ended_since: datetime, known_for: timedelta) -> FleetRead:
        """The open events and those that ended since `ended_since`, with what goes with
        them; the agents heard from within `known_for` of `now`."""
        since = (iso(ended_since),)
        rows = self._db.all(
            _EVENTS.format(arm="e.present = 1")
            + " UNION ALL "
            + _EVENTS.format(arm="e.present = 0 AND e.gone_at >= ?")
            + " ORDER BY 5 DESC, 6, 1",  # open first; first seen; event id
            since,
        )
        runs: dict[str, list[HookRunRecord]] = {}
        for row in self._db.all(_HOOK_RUNS, since):
            runs.setdefault(str(row[0]), []).append(_run(row))
        changes = {
            str(r[0]): Changes(int(r[1]), from_iso(r[2]), from_iso(r[3]) if r[3] else None)
            for r in self._db.all(
                _CHANGES, (TransitionKind.STARTED, TransitionKind.UNPLANNED, *since)
            )
        }
        agents = {
            str(r[0]): AgentSeen(str(r[0]), from_iso(r[1]), r[2] is not None)
            for r in self._db.all(
                "SELECT agent, seen_at, stopped_at FROM documents WHERE seen_at >= ?",
                (iso(now - known_for),),
            )
        }
        return FleetRead(self._events(rows), runs, changes, agents)

    def _events(self, rows: list[Row]) -> tuple[EventRecord, ...]:
        before, parsed = self._parsed, {}
        for row in rows:
            kept = before.get(row[0])
            parsed[row[0]] = kept if kept is not None and kept[0] == row else (row, _event(row))
        self._parsed = parsed  # events no longer shown are let go
        return tuple(record for _, record in parsed.values())


def _event(row: Row) -> EventRecord:
    approval = row[9:]
    return EventRecord(
        event=event_from_dict(json.loads(row[1])),
        state=row[2],
        decision=decision_from_db(row[8], row[3]),
        present=bool(row[4]),
        first_seen=from_iso(row[5]),
        last_seen=from_iso(row[6]),
        gone_at=from_iso(row[7]) if row[7] else None,
        approval=_approval(row[0], approval) if approval[0] is not None else None,
    )


def _approval(event_id: str, a: Row) -> ApprovalRecord:
    return ApprovalRecord(
        event_id=event_id,
        actor=a[0],
        via=a[1],
        at=from_iso(a[2]),
        state=a[3],
        attempts=int(a[4]),
        last_error=a[5],
        done_at=from_iso(a[6]) if a[6] else None,
        unanswered=int(a[7] or 0),
        anyway_by=a[8],
        anyway_via=a[9],
        actor_id=a[10],
        anyway_id=a[11],
    )


def _run(row: Row) -> HookRunRecord:
    failed = row[5] == "failed"
    tries = int(row[13])
    run = HookRun(
        hook=row[3],
        stage=row[2],
        vm=row[1],
        attempt=int(row[4]),
        exit_code=row[8],
        timed_out=bool(row[9]),
        seconds=row[10],
        output=row[11],
        why=row[12],
        retry=max(0, tries - 1) if failed else tries,  # tries counts the failures
        retry_at=row[14],
    )
    return HookRunRecord(
        event_id=row[0],
        run=run,
        state=row[5],
        started_at=from_iso(row[6]),
        finished_at=from_iso(row[7]) if row[7] else None,
        retry_at=from_iso(row[14]) if row[14] and failed else None,
        asked=bool(row[15]) and failed,
    )

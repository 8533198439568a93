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

from dataclasses import dataclass
from datetime import datetime, timedelta

from sebridge.model import TransitionKind
from sebridge.model.records import EventRecord, HookRunRecord
from sebridge.store.codec import from_iso, iso
from sebridge.store.database import Database, Row
from sebridge.store.events import EVENT_COLUMNS, event_record
from sebridge.store.hook_runs import RUN_COLUMNS, hook_run_record
from sebridge.store.store import AgentSeen

__all__ = ["Changes", "FleetRead", "FleetView"]

# The events shown, as the partial indexes events_present and events_gone state them (a
# planner uses a partial index only for a query that states its condition).
_SHOWN = (
    "SELECT event_id FROM events WHERE present = 1 "
    "UNION ALL SELECT event_id FROM events WHERE present = 0 AND gone_at >= ?"
)
_EVENTS = (
    f"SELECT {EVENT_COLUMNS} FROM events e "
    "LEFT JOIN approvals a ON a.event_id = e.event_id WHERE {arm}"
)
_HOOK_RUNS = (
    f"SELECT {RUN_COLUMNS} "
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
            runs.setdefault(str(row[0]), []).append(hook_run_record(row))
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
            parsed[row[0]] = (
                kept if kept is not None and kept[0] == row else (row, event_record(row))
            )
        self._parsed = parsed  # events no longer shown are let go
        return tuple(record for _, record in parsed.values())

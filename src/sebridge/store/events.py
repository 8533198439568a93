"""Reading events as the store knows them: content, state, approval and deliveries.

The hook worker, reminders and the Jira
search read current() at every round: two statements whatever the number of events (each
event's approval is joined, the deliveries of all of them are one query), and only the
open ones, through the partial indexes of schema version 12 (events_present,
events_gone): past events never slow a round.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from datetime import datetime

from sebridge.model.records import DeliveryStatus, EventRecord
from sebridge.store.approvals import APPROVAL_COLUMNS, approval_record
from sebridge.store.codec import decision_from_db, event_from_dict, from_iso, iso
from sebridge.store.database import Database, Row

__all__ = ["Events"]

# An event's columns, then its approval's (NULL when none). The approval's event_id is left
# out (the event's stands for it): no two result columns share a name the ORDER BY uses.
_APPROVAL = ", ".join(f"a.{c}" for c in APPROVAL_COLUMNS.split(", ")[1:])
EVENT_COLUMNS = (
    "e.event_id, e.data, e.state, e.policy, e.present, e.first_seen, e.last_seen, e.gone_at, "
    f"e.decision, {_APPROVAL}"
)
_APPROVAL_AT = 9  # where the approval's columns begin
_FROM = "FROM events e LEFT JOIN approvals a ON a.event_id = e.event_id"
# The events a round reads, as the partial indexes state them (literal conditions: a planner
# uses a partial index only for a query that states its condition): those in the latest
# document; and those gone since a time (one `?`).
_PRESENT = "e.present = 1"
_GONE_SINCE = "e.present = 0 AND e.gone_at >= ?"


class Events:
    """Events by id, and the events of the latest document."""

    def __init__(self, db: Database, agent: str) -> None:
        self._db = db
        self._agent = agent

    def left_here(self, event_ids: Sequence[str]) -> frozenset[str]:
        """Which of these events this agent's own latest document no longer lists (its
        sighting says gone), though other agents' may still: in a fleet an event stays
        present until the last agent's document lost it, but each VM's recover hooks are
        due as soon as its own document did (docs/ARCHITECTURE.md, "Readiness hooks")."""
        if not event_ids:
            return frozenset()
        rows = self._db.all(
            "SELECT event_id FROM sightings WHERE agent = ? AND present = 0 "
            f"AND event_id IN ({', '.join('?' * len(event_ids))})",
            (self._agent, *event_ids),
        )
        return frozenset(r[0] for r in rows)

    def get(self, event_id: str) -> EventRecord | None:
        """One event by id; ids match case-insensitively (people type GUIDs in lower case)."""
        row = self._db.one(
            f"SELECT {EVENT_COLUMNS} {_FROM} WHERE lower(e.event_id) = lower(?)", (event_id,)
        )
        if row is None:
            return None
        deliveries = self._db.all(
            "SELECT event_id, sink, state, attempts, last_error FROM outbox "
            "WHERE event_id = ? ORDER BY id",
            (row[0],),
        )
        return event_record(row, _summaries(deliveries).get(row[0], ()))

    def current(self, *, include_gone_since: datetime | None = None) -> list[EventRecord]:
        """Events in the latest document, plus those gone since the given time."""
        arms = [_PRESENT]
        params: tuple[str, ...] = ()
        if include_gone_since is not None:
            arms.append(_GONE_SINCE)
            params = (iso(include_gone_since),)
        rows = self._db.all(
            " UNION ALL ".join(f"SELECT {EVENT_COLUMNS} {_FROM} WHERE {arm}" for arm in arms)
            + " ORDER BY 6, 1",  # first_seen, event_id (a compound SELECT's: by position)
            params,
        )
        if not rows:
            return []
        # The events first, then their rows by outbox_event: CROSS JOIN keeps that order in
        # SQLite (its planner without statistics scanned the whole outbox instead); to
        # PostgreSQL it is the inner join it reads.
        deliveries = self._db.all(
            " UNION ALL ".join(
                "SELECT o.id, o.event_id, o.sink, o.state, o.attempts, o.last_error "
                f"FROM events e CROSS JOIN outbox o WHERE o.event_id = e.event_id AND {arm}"
                for arm in arms
            )
            + " ORDER BY 1",  # o.id
            params,
        )
        summaries = _summaries([d[1:] for d in deliveries])
        return [event_record(row, summaries.get(row[0], ())) for row in rows]


def event_record(row: Row, deliveries: tuple[DeliveryStatus, ...] = ()) -> EventRecord:
    """An event read with EVENT_COLUMNS (its approval's joined), with its deliveries."""
    approval = row[_APPROVAL_AT:]
    return EventRecord(
        event=event_from_dict(json.loads(row[1])),
        state=row[2],
        decision=decision_from_db(row[8], row[3]),
        present=bool(row[4]),
        first_seen=from_iso(row[5]),
        last_seen=from_iso(row[6]),
        gone_at=from_iso(row[7]) if row[7] else None,
        approval=approval_record((row[0], *approval)) if approval[0] is not None else None,
        deliveries=deliveries,
    )


def _summaries(rows: Sequence[Row]) -> dict[str, tuple[DeliveryStatus, ...]]:
    """Per event, per sink: failed if any row failed, else pending if any is, else
    delivered. Rows: (event id, sink, state, attempts, last error), in id order."""
    rank = {"delivered": 0, "pending": 1, "failed": 2}
    worst: dict[str, dict[str, DeliveryStatus]] = {}
    for event_id, sink, state, attempts, error in rows:
        sinks = worst.setdefault(event_id, {})
        current = sinks.get(sink)
        if current is None or rank.get(state, 1) >= rank.get(current.state, 1):
            sinks[sink] = DeliveryStatus(sink, state, attempts, error)
    return {event_id: tuple(sinks.values()) for event_id, sinks in worst.items()}

"""Reading events as the store knows them: content, state, approval and deliveries.

Part of Store (a mixin: Store provides `db` and `approval`).
"""

from __future__ import annotations

import json
from datetime import datetime
from typing import TYPE_CHECKING

from sebridge.store.codec import decision_from_db, event_from_dict, from_iso, iso
from sebridge.store.database import Database, Row
from sebridge.store.records import ApprovalRecord, DeliveryStatus, EventRecord

__all__ = ["EventReads"]

_EVENT_COLUMNS = "event_id, data, state, policy, present, first_seen, last_seen, gone_at, decision"


class EventReads:
    """Events by id, and the events of the latest document."""

    db: Database

    if TYPE_CHECKING:  # Store's other parts

        def approval(self, event_id: str) -> ApprovalRecord | None: ...

    def event(self, event_id: str) -> EventRecord | None:
        """One event by id; ids match case-insensitively (people type GUIDs in lower case)."""
        row = self.db.one(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE lower(event_id) = lower(?)", (event_id,)
        )
        return self._event_record(row) if row else None

    def events(self, *, include_gone_since: datetime | None = None) -> list[EventRecord]:
        """Events in the latest document, plus those gone since the given time."""
        since = iso(include_gone_since) if include_gone_since else "9999"
        rows = self.db.all(
            f"SELECT {_EVENT_COLUMNS} FROM events WHERE present = 1 OR gone_at >= ? "
            "ORDER BY first_seen, event_id",
            (since,),
        )
        return [self._event_record(row) for row in rows]

    def _event_record(self, row: Row) -> EventRecord:
        event_id = row[0]
        return EventRecord(
            event=event_from_dict(json.loads(row[1])),
            state=row[2],
            decision=decision_from_db(row[8], row[3]),
            present=bool(row[4]),
            first_seen=from_iso(row[5]),
            last_seen=from_iso(row[6]),
            gone_at=from_iso(row[7]) if row[7] else None,
            approval=self.approval(event_id),
            deliveries=self._delivery_summary(event_id),
        )

    def _delivery_summary(self, event_id: str) -> tuple[DeliveryStatus, ...]:
        """Per sink: failed if any row failed, else pending if any is, else delivered."""
        rows = self.db.all(
            "SELECT sink, state, attempts, last_error FROM outbox WHERE event_id = ? ORDER BY id",
            (event_id,),
        )
        worst: dict[str, DeliveryStatus] = {}
        rank = {"delivered": 0, "pending": 1, "failed": 2}
        for sink, state, attempts, error in rows:
            current = worst.get(sink)
            if current is None or rank.get(state, 1) >= rank.get(current.state, 1):
                worst[sink] = DeliveryStatus(sink, state, attempts, error)
        return tuple(worst.values())

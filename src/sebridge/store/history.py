"""History: transitions with their deliveries, the audit log, and pruning."""

from __future__ import annotations

from datetime import datetime

from sebridge.model.records import AuditEntry, DeliveryStatus, HistoryEntry
from sebridge.store.codec import from_iso, iso, transition_from_json
from sebridge.store.database import Database
from sebridge.store.event_locks import lock_events

__all__ = ["History"]


class History:
    """What happened, oldest first, and forgetting it after the retention."""

    def __init__(self, db: Database) -> None:
        self._db = db

    def audit(self, entry: AuditEntry) -> None:
        """Record a refused or otherwise noteworthy action."""
        self._db.execute(
            "INSERT INTO audit (at, event_id, actor, via, action, detail) "
            "VALUES (?, ?, ?, ?, ?, ?)",
            (iso(entry.at), entry.event_id, entry.actor, entry.via, entry.action, entry.detail),
        )

    def entries(self, *, event_id: str | None = None, limit: int = 100) -> list[HistoryEntry]:
        """The newest transitions (oldest first), with their deliveries."""
        where, params = ("WHERE lower(event_id) = lower(?)", (event_id,)) if event_id else ("", ())
        rows = self._db.all(
            f"SELECT id, at, data FROM transitions {where} ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        entries = []
        for transition_id, at, data in reversed(rows):
            deliveries = self._db.all(
                "SELECT sink, state, attempts, last_error FROM outbox WHERE transition_id = ? "
                "ORDER BY sink",
                (transition_id,),
            )
            entries.append(
                HistoryEntry(
                    id=transition_id,
                    at=from_iso(at),
                    transition=transition_from_json(data),
                    deliveries=tuple(DeliveryStatus(*d) for d in deliveries),
                )
            )
        return entries

    def size(self, *, event_id: str | None = None) -> tuple[int, int]:
        """How many transitions and audit entries there are (of one event, if given): what
        `history` says it cut when it shows only the newest."""
        where, params = ("WHERE lower(event_id) = lower(?)", (event_id,)) if event_id else ("", ())
        sizes = []
        for table in ("transitions", "audit"):
            row = self._db.one(f"SELECT COUNT(*) FROM {table} {where}", params)
            sizes.append(int(row[0]) if row else 0)
        return sizes[0], sizes[1]

    def audit_entries(self, *, event_id: str | None = None, limit: int = 100) -> list[AuditEntry]:
        """The newest audit entries (of one event, if given), oldest first."""
        where, params = ("WHERE lower(event_id) = lower(?)", (event_id,)) if event_id else ("", ())
        rows = self._db.all(
            f"SELECT at, event_id, actor, via, action, detail FROM audit {where} "
            "ORDER BY id DESC LIMIT ?",
            (*params, limit),
        )
        return [AuditEntry(from_iso(r[0]), *r[1:]) for r in reversed(rows)]

    def prune(self, before: datetime) -> int:
        """Forget events gone before `before` (with their transitions, deliveries,
        receipts and approvals) and older audit entries; returns the events removed."""
        with self._db.transaction():
            gone = [
                r[0]
                for r in self._db.all(
                    "SELECT event_id FROM events WHERE present = 0 AND gone_at < ?", (iso(before),)
                )
            ]
            lock_events(self._db, gone)  # the one lock order (store/event_locks.py)
            for event_id in gone:
                for table in (
                    "outbox",
                    "receipts",
                    "approvals",
                    "transitions",
                    "sightings",
                    "events",
                ):
                    self._db.execute(f"DELETE FROM {table} WHERE event_id = ?", (event_id,))
            self._db.execute("DELETE FROM audit WHERE at < ?", (iso(before),))
        return len(gone)

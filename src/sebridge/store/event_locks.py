"""The one lock order: every write transaction about an event locks the event's row first.

Two agents' transactions about one event then take turns instead of each holding a row the
other waits for (an approval's outcome and another agent's tick deadlocked before). SQLite
locks the whole file anyway (store/sqlite.py drops the row lock).
"""

from __future__ import annotations

from collections.abc import Iterable

from sebridge.store.database import Database

__all__ = ["lock_events"]


def lock_events(db: Database, event_ids: Iterable[str]) -> None:
    """Lock these events' rows for the rest of the transaction, in event id order."""
    for event_id in sorted(event_ids):
        db.one("SELECT 1 FROM events WHERE event_id = ? FOR UPDATE", (event_id,))

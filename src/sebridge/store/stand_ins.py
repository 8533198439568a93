"""Stand-ins: the events rows of events IMDS lists that sebridge cannot read.

A tick's documents (store/documents.py) hold them. An event whose
EventId holds NUL or a lone surrogate (model.UnreadableEvent) is announced
once, by a transition on a row of its own under its stand-in id. The row is
recorded gone from the start: nothing can approve it (its id is not IMDS's),
no agent's sightings keep it, and pruning forgets it with the history. Said
once across restarts and a fleet: only the transaction that inserts the row
records its announcement. See docs/ARCHITECTURE.md, "Hostile text".
"""

from __future__ import annotations

import json
from datetime import datetime

from sebridge.model import ScheduledEvent
from sebridge.model.decision import UNREADABLE
from sebridge.store.codec import decision_to_json, event_to_dict, iso
from sebridge.store.database import Database
from sebridge.store.event_locks import lock_events

__all__ = ["hold_stand_in"]


def hold_stand_in(db: Database, stand_in: ScheduledEvent, now: datetime) -> bool:
    """Insert the stand-in's row unless the store holds it; True when this call did (its
    announcement is then this transaction's to record). Its row is locked either way,
    in the caller's event order (store/event_locks.py)."""
    data = json.dumps(event_to_dict(stand_in), separators=(",", ":"))
    inserted = db.execute(
        "INSERT INTO events (event_id, event_type, status, state, policy, decision, data, "
        "present, first_seen, last_seen, gone_at) VALUES (?, ?, ?, ?, ?, ?, ?, 0, ?, ?, ?) "
        "ON CONFLICT (event_id) DO NOTHING",
        (
            stand_in.event_id,
            stand_in.event_type,
            stand_in.status,
            "new",
            UNREADABLE.action,
            decision_to_json(UNREADABLE),
            data,
            iso(now),
            iso(now),
            iso(now),
        ),
    )
    lock_events(db, [stand_in.event_id])
    return inserted == 1

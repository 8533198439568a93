"""The transitions table: what was said about an event, keyed by what it says, each with one
outbox row per sink that wants it.

An agent's transition is inserted unless an agent already said the same (the first insert
wins): only that insert moves the event along its lifecycle and queues deliveries. The
repositories whose writes announce something (approvals, hook runs, hook retries, a tick's
documents) add theirs here, inside their own transaction.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import datetime

from sebridge.model import Transition, TransitionKind
from sebridge.store.codec import (
    event_digest,
    iso,
    transition_from_json,
    transition_key,
    transition_to_json,
)
from sebridge.store.database import Database
from sebridge.store.event_locks import lock_events
from sebridge.store.outbox import Outbox

__all__ = ["NOTES", "Transitions"]

# Transitions that annotate an event without moving it along its lifecycle.
NOTES = (
    TransitionKind.TAKEN,
    TransitionKind.PROBLEM,
    TransitionKind.HELD,
    TransitionKind.REMINDER,
    TransitionKind.STARTED_UNREADY,
    TransitionKind.HOOK_STARTED,
    TransitionKind.HOOK_SUCCEEDED,
    TransitionKind.HOOK_FAILED,
    TransitionKind.READY,
    TransitionKind.HOOKS_RETRY,
)


class Transitions:
    """Transitions, each queued to the outbox once."""

    def __init__(self, db: Database, outbox: Outbox) -> None:
        self._db = db
        self._outbox = outbox
        self._recorded: Callable[[str], None] = lambda kind: None

    def on_recorded(self, recorded: Callable[[str], None]) -> None:
        """Call `recorded(kind)` for each transition recorded, once committed (the daemon's
        metrics count them)."""
        self._recorded = recorded

    def record(self, transition: Transition, sinks: Sequence[str], now: datetime) -> int | None:
        """Queue a transition that no document produced (someone took the event);
        None when it was recorded before (by another agent, or an earlier click)."""
        with self._db.transaction():
            lock_events(self._db, [transition.event_id])
            return self.add(transition, sinks, now)

    def add(self, transition: Transition, sinks: Sequence[str], now: datetime) -> int | None:
        """Inside the caller's transaction: insert it unless an agent already said the
        same; only the first insert moves the event along and queues deliveries."""
        key = transition_key(transition)
        if transition.kind == TransitionKind.CHANGED:
            # Agents deriving a change take turns (apply() holds the event's row): the
            # later one finds it said. Keyed by the announcement it follows, a change
            # back to earlier content (NotBefore T1 -> T2 -> T1) is said again.
            last = self._last_announcement(transition.event_id)
            if last is not None and last[1] == key:
                return None
            key = f"{key}:{last[0] if last else 0}"
        row = self._db.one(
            "INSERT INTO transitions (event_id, kind, at, data, content) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (event_id, kind, content) DO NOTHING RETURNING id",
            (
                transition.event_id,
                transition.kind,
                iso(transition.at),
                transition_to_json(transition),
                key,
            ),
        )
        if row is None:
            return None
        transition_id = int(row[0])
        kind = str(transition.kind)
        self._db.after_commit(lambda: self._recorded(kind))
        if transition.kind not in NOTES:
            self._db.execute(
                "UPDATE events SET state = ? WHERE event_id = ?",
                (transition.kind, transition.event_id),
            )
        self._outbox.enqueue(transition_id, transition, sinks, now)
        return transition_id

    def _last_announcement(self, event_id: str) -> tuple[int, str] | None:
        """The id of the latest transition that said the event's content (scheduled,
        unplanned, changed) and what it said (codec.event_digest)."""
        row = self._db.one(
            "SELECT id, data FROM transitions WHERE event_id = ? AND kind IN (?, ?, ?) "
            "ORDER BY id DESC LIMIT 1",
            (
                event_id,
                TransitionKind.SCHEDULED,
                TransitionKind.UNPLANNED,
                TransitionKind.CHANGED,
            ),
        )
        if row is None:
            return None
        return int(row[0]), event_digest(transition_from_json(row[1]).event)

"""A tick's documents: the one act that writes what IMDS showed, in one transaction.

`apply` writes the agent's document, its events and sightings (stand-ins for the unreadable:
store/stand_ins.py), the transitions with one outbox row per (transition, sink), and the
policy's approvals: all or nothing. An event leaves the latest document when no agent sees
it any more. See docs/ARCHITECTURE.md, "Poll".
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

from sebridge.model import Approval, Document, ScheduledEvent, Transition
from sebridge.model.decision import NO_MATCH, Decision
from sebridge.store.agents import STALE
from sebridge.store.approvals import Approvals
from sebridge.store.codec import (
    decision_to_json,
    event_from_dict,
    event_to_dict,
    incarnation_from_db,
    incarnation_to_db,
    iso,
)
from sebridge.store.database import Database
from sebridge.store.event_locks import lock_events
from sebridge.store.stand_ins import hold_stand_in
from sebridge.store.transitions import Transitions

__all__ = ["Documents"]


class Documents:
    """This agent's latest document, and recording a tick."""

    def __init__(
        self, db: Database, agent: str, transitions: Transitions, approvals: Approvals
    ) -> None:
        self._db = db
        self._agent = agent
        self._transitions = transitions
        self._approvals = approvals

    def last(self) -> Document | None:
        """The events of the latest stored document, or None before the first one."""
        row = self._db.one("SELECT incarnation FROM documents WHERE agent = ?", (self._agent,))
        if row is None:
            return None
        events = self._db.all(
            "SELECT e.data FROM events e JOIN sightings s ON s.event_id = e.event_id "
            "WHERE s.agent = ? AND s.present = 1 ORDER BY e.first_seen, e.event_id",
            (self._agent,),
        )
        return Document(
            incarnation_from_db(row[0]), tuple(event_from_dict(json.loads(r[0])) for r in events)
        )

    def any_recorded(self) -> bool:
        """Whether any agent has recorded a document yet (asked by the CLI, which is none)."""
        return self._db.one("SELECT 1 FROM documents LIMIT 1") is not None

    def apply(
        self,
        document: Document,
        deliveries: Sequence[tuple[Transition, Sequence[str]]],
        now: datetime,
        *,
        decisions: Mapping[str, Decision] | None = None,
        approvals: Sequence[Approval] = (),
    ) -> list[Transition]:
        """Write one tick: the document, its events and this agent's sightings of them,
        the transitions with one outbox row per (transition, sink), and the
        policy's approvals. All or nothing. An event leaves the latest document
        when no agent sees it any more. Returns the transitions recorded here (not
        those another agent of a fleet had recorded already).

        Args:
            decisions: the policy's decision for events first seen in this tick (others:
                policy.NO_MATCH, "ask"); a known event keeps the decision it was
                recorded with (in a fleet: the first agent's).
        """
        decisions = decisions or {}
        present = {e.event_id: e for e in document.events}
        # Events IMDS lists that we cannot read: announced only by the tick that first
        # records their stand-in (store/stand_ins.py), here or on another agent.
        stand_ins = {u.stand_in.event_id: u.stand_in for u in document.unreadable}
        new_stand_ins: set[str] = set()
        db = self._db
        with db.transaction():
            db.execute(
                "INSERT INTO documents (agent, incarnation, seen_at) VALUES (?, ?, ?) "
                "ON CONFLICT (agent) DO UPDATE SET incarnation = excluded.incarnation, "
                "seen_at = excluded.seen_at, stopped_at = NULL",
                (self._agent, incarnation_to_db(document.incarnation), iso(now)),
            )
            seen = db.all(
                "SELECT event_id FROM sightings WHERE agent = ? AND present = 1", (self._agent,)
            )
            # Every event this tick writes about, in one order (event_locks.py): present ones
            # (upserted, their row locked) and those this agent lost sight of.
            for event_id in sorted(set(present) | {r[0] for r in seen} | set(stand_ins)):
                event = present.get(event_id)
                if event_id in stand_ins:
                    if hold_stand_in(db, stand_ins[event_id], now):
                        new_stand_ins.add(event_id)
                    continue
                if event is None:
                    self._lose_sight(event_id, now)
                    continue
                self._upsert_event(event, decisions.get(event_id, NO_MATCH), now)
                db.execute(
                    "INSERT INTO sightings (agent, event_id, incarnation, present, last_seen) "
                    "VALUES (?, ?, ?, 1, ?) ON CONFLICT (agent, event_id) DO UPDATE SET "
                    "incarnation = excluded.incarnation, present = 1, "
                    "last_seen = excluded.last_seen",
                    (self._agent, event_id, incarnation_to_db(document.incarnation), iso(now)),
                )
            recorded = [
                t
                for t, sinks in deliveries
                if (t.event_id not in stand_ins or t.event_id in new_stand_ins)
                and self._transitions.add(t, sinks, now)
            ]
            for approval in approvals:
                self._approvals.record(approval)
        return recorded

    def _lose_sight(self, event_id: str, now: datetime) -> None:
        # The event's row first: agents losing sight of it at once take turns, so the
        # last one sees the others' sightings gone (each alone would see the other's).
        lock_events(self._db, [event_id])
        self._db.execute(
            "UPDATE sightings SET present = 0 WHERE agent = ? AND event_id = ?",
            (self._agent, event_id),
        )
        self._db.execute(
            "UPDATE events SET present = 0, gone_at = ? WHERE event_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM sightings s JOIN documents d ON d.agent = s.agent "
            "WHERE s.event_id = ? AND s.present = 1 AND d.agent <> ? AND d.seen_at >= ?)",
            (iso(now), event_id, event_id, self._agent, iso(now - STALE)),
        )

    def _upsert_event(self, event: ScheduledEvent, decision: Decision, now: datetime) -> None:
        data = json.dumps(event_to_dict(event), separators=(",", ":"))
        self._db.execute(
            "INSERT INTO events (event_id, event_type, status, state, policy, decision, data, "
            "present, first_seen, last_seen) VALUES (?, ?, ?, ?, ?, ?, ?, 1, ?, ?) "
            "ON CONFLICT (event_id) DO UPDATE SET event_type = excluded.event_type, "
            "status = excluded.status, data = excluded.data, present = 1, "
            "last_seen = excluded.last_seen, gone_at = NULL",
            (
                event.event_id,
                event.event_type,
                event.status,
                "new",
                decision.action,
                decision_to_json(decision),
                data,
                iso(now),
                iso(now),
            ),
        )

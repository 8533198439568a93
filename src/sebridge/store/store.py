"""Store: documents, events, transitions and approvals, durably, one tick per transaction."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.decision import NO_MATCH, Decision
from sebridge.store.approvals import ApprovalTable
from sebridge.store.codec import (
    decision_to_json,
    event_digest,
    event_from_dict,
    event_to_dict,
    from_iso,
    incarnation_from_db,
    incarnation_to_db,
    iso,
    transition_from_json,
    transition_key,
    transition_to_json,
)
from sebridge.store.connect import open_database
from sebridge.store.database import Held
from sebridge.store.events import EventReads
from sebridge.store.history import HistoryLog
from sebridge.store.hook_retries import HookRetryTable
from sebridge.store.hook_runs import HookRunTable
from sebridge.store.outbox import Outbox
from sebridge.store.schema_check import open_schema
from sebridge.store.settings import SettingsTable
from sebridge.store.stand_ins import StandIns
from sebridge.store.vm_tags import VmTags

__all__ = ["NOTES", "AgentSeen", "Store"]

# An agent whose documents row is older than this is taken for dead: its sightings
# no longer keep an event in the latest document. Daemons beat every HEARTBEAT.
HEARTBEAT = timedelta(seconds=30)
STALE = 3 * HEARTBEAT
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


@dataclass(frozen=True)
class AgentSeen:
    """An agent the fleet knows: when it was last heard from (a document or a beat), and
    whether it stopped since (a clean shutdown: silent at once)."""

    agent: str
    seen_at: datetime
    stopped: bool


class Store(
    EventReads, ApprovalTable, HookRunTable, HookRetryTable, HistoryLog, SettingsTable, StandIns
):
    """Everything sebridge remembers. Only this package runs SQL.

    Args:
        url: store.url: sqlite:////var/lib/sebridge/state.db, or
            postgresql://user@host/db (any number of agents: fleet mode).
        agent: who this process is (the VM name); claims and sightings carry it. A
            process that only reads and records (the CLI beside daemons) has none: "".
        exclusive: this process delivers (the daemon): hold the store against
            a second daemon on a SQLite file (its flock, store/lock.py), or
            against a second daemon of the same name on PostgreSQL (shared by
            a fleet: each agent its own name). StoreError names the holder.
        migrate: bring the schema up to date; False (a command that only reads):
            refuse an older one instead, writing nothing (schema_check.open_schema).
    """

    def __init__(
        self, url: str, agent: str = "local", *, exclusive: bool = False, migrate: bool = True
    ) -> None:
        self.db = open_database(url)
        self._lock: Held | None = None
        try:
            if exclusive:
                self._lock = self.db.hold_exclusive(agent)
            open_schema(self.db, migrate=migrate)
        except BaseException:
            self.close()
            raise
        self.agent = agent
        self.outbox = Outbox(self.db, agent)
        self.vm_tags = VmTags(self.db)
        self._recorded: Callable[[str], None] = lambda kind: None

    def on_transition(self, recorded: Callable[[str], None]) -> None:
        """Call `recorded(kind)` for each transition this store records, once committed
        (the daemon's metrics count them)."""
        self._recorded = recorded

    def close(self) -> None:
        """Close the database, then free the lock."""
        self.db.close()
        if self._lock is not None:
            self._lock.release()

    def check_integrity(self) -> None:
        """Raise StoreError when SQLite finds a corrupt page (PRAGMA quick_check)."""
        self.db.check_integrity()

    # -- the poll flow -------------------------------------------------------------------------

    def last_document(self) -> Document | None:
        """The events of the latest stored document, or None before the first one."""
        row = self.db.one("SELECT incarnation FROM documents WHERE agent = ?", (self.agent,))
        if row is None:
            return None
        events = self.db.all(
            "SELECT e.data FROM events e JOIN sightings s ON s.event_id = e.event_id "
            "WHERE s.agent = ? AND s.present = 1 ORDER BY e.first_seen, e.event_id",
            (self.agent,),
        )
        return Document(
            incarnation_from_db(row[0]), tuple(event_from_dict(json.loads(r[0])) for r in events)
        )

    def polled(self) -> bool:
        """Whether any agent has recorded a document yet (asked by the CLI, which is none)."""
        return self.db.one("SELECT 1 FROM documents LIMIT 1") is not None

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
        with self.db.transaction():
            self.db.execute(
                "INSERT INTO documents (agent, incarnation, seen_at) VALUES (?, ?, ?) "
                "ON CONFLICT (agent) DO UPDATE SET incarnation = excluded.incarnation, "
                "seen_at = excluded.seen_at, stopped_at = NULL",
                (self.agent, incarnation_to_db(document.incarnation), iso(now)),
            )
            seen = self.db.all(
                "SELECT event_id FROM sightings WHERE agent = ? AND present = 1", (self.agent,)
            )
            # Every event this tick writes about, in one order (lock_events): present ones
            # (upserted, their row locked) and those this agent lost sight of.
            for event_id in sorted(set(present) | {r[0] for r in seen} | set(stand_ins)):
                event = present.get(event_id)
                if event_id in stand_ins:
                    if self._hold_stand_in(stand_ins[event_id], now):
                        new_stand_ins.add(event_id)
                    continue
                if event is None:
                    self._lose_sight(event_id, now)
                    continue
                self._upsert_event(event, decisions.get(event_id, NO_MATCH), now)
                self.db.execute(
                    "INSERT INTO sightings (agent, event_id, incarnation, present, last_seen) "
                    "VALUES (?, ?, ?, 1, ?) ON CONFLICT (agent, event_id) DO UPDATE SET "
                    "incarnation = excluded.incarnation, present = 1, "
                    "last_seen = excluded.last_seen",
                    (self.agent, event_id, incarnation_to_db(document.incarnation), iso(now)),
                )
            recorded = [
                t
                for t, sinks in deliveries
                if (t.event_id not in stand_ins or t.event_id in new_stand_ins)
                and self._add_transition(t, sinks, now)
            ]
            for approval in approvals:
                self.record_approval(approval)
        return recorded

    def lock_events(self, event_ids: Iterable[str]) -> None:
        """Lock these events' rows for the rest of the transaction, in event id order.

        Every write transaction about an event locks its row first (a new event's
        upsert does too): then two agents' transactions about one event take turns
        instead of each holding a row the other waits for (an approval's outcome and
        another agent's tick deadlocked before). SQLite locks the whole file anyway.
        """
        for event_id in sorted(event_ids):
            self.db.one("SELECT 1 FROM events WHERE event_id = ? FOR UPDATE", (event_id,))

    def _lose_sight(self, event_id: str, now: datetime) -> None:
        # The event's row first: agents losing sight of it at once take turns, so the
        # last one sees the others' sightings gone (each alone would see the other's).
        self.lock_events([event_id])
        self.db.execute(
            "UPDATE sightings SET present = 0 WHERE agent = ? AND event_id = ?",
            (self.agent, event_id),
        )
        self.db.execute(
            "UPDATE events SET present = 0, gone_at = ? WHERE event_id = ? AND NOT EXISTS "
            "(SELECT 1 FROM sightings s JOIN documents d ON d.agent = s.agent "
            "WHERE s.event_id = ? AND s.present = 1 AND d.agent <> ? AND d.seen_at >= ?)",
            (iso(now), event_id, event_id, self.agent, iso(now - STALE)),
        )

    def heartbeat(self, now: datetime) -> bool:
        """Say this agent is alive (its sightings count); the daemon calls it every HEARTBEAT.
        Returns, in the same round trip, whether work no NOTIFY announced may wait:
        outbox rows due that nobody claims (a dead agent's among them: nothing else
        tells the living of a death), an approval put back after a failed POST, or
        one whose claimant died or whose lease ended."""
        at = iso(now)
        row = self.db.beat(
            "UPDATE documents SET seen_at = ?, stopped_at = NULL WHERE agent = ? RETURNING "
            f"{self.outbox.stranded()} OR {self.approvals_stranded()}",
            (at, self.agent, at, at, at),
        )
        return bool(row and row[0])

    def known_agents(self, now: datetime, known_for: timedelta) -> dict[str, AgentSeen]:
        """The agents the fleet knows, by name: those heard from (a document or a beat)
        within `known_for` of `now`, each with when and whether it stopped since
        ([fleet] known_for; hooks/readiness.py tells live from silent)."""
        rows = self.db.all(
            "SELECT agent, seen_at, stopped_at FROM documents WHERE seen_at >= ?",
            (iso(now - known_for),),
        )
        return {str(r[0]): AgentSeen(str(r[0]), from_iso(r[1]), r[2] is not None) for r in rows}

    def agent_stopped(self, now: datetime) -> None:
        """Say this agent stopped (a clean shutdown): the fleet takes it for silent at once;
        its row stays, so it stays known (its VMs' approvals are held, not released)."""
        self.db.execute(
            "UPDATE documents SET seen_at = ?, stopped_at = ? WHERE agent = ?",
            (iso(now), iso(now), self.agent),
        )

    def _upsert_event(self, event: ScheduledEvent, decision: Decision, now: datetime) -> None:
        data = json.dumps(event_to_dict(event), separators=(",", ":"))
        self.db.execute(
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

    def record_transition(
        self, transition: Transition, sinks: Sequence[str], now: datetime
    ) -> int | None:
        """Queue a transition that no document produced (someone took the event);
        None when it was recorded before (by another agent, or an earlier click)."""
        with self.db.transaction():
            self.lock_events([transition.event_id])
            return self._add_transition(transition, sinks, now)

    def _add_transition(
        self, transition: Transition, sinks: Sequence[str], now: datetime
    ) -> int | None:
        """Insert it unless an agent already said the same; only the first insert
        moves the event along and queues deliveries."""
        key = transition_key(transition)
        if transition.kind == TransitionKind.CHANGED:
            # Agents deriving a change take turns (apply() holds the event's row): the
            # later one finds it said. Keyed by the announcement it follows, a change
            # back to earlier content (NotBefore T1 -> T2 -> T1) is said again.
            last = self._last_announcement(transition.event_id)
            if last is not None and last[1] == key:
                return None
            key = f"{key}:{last[0] if last else 0}"
        row = self.db.one(
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
        self.db.after_commit(lambda: self._recorded(kind))
        if transition.kind not in NOTES:
            self.db.execute(
                "UPDATE events SET state = ? WHERE event_id = ?",
                (transition.kind, transition.event_id),
            )
        self.outbox.enqueue(transition_id, transition, sinks, now)
        return transition_id

    def _last_announcement(self, event_id: str) -> tuple[int, str] | None:
        """The id of the latest transition that said the event's content (scheduled,
        unplanned, changed) and what it said (codec.event_digest)."""
        row = self.db.one(
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

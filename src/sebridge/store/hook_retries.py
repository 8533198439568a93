"""The hook_retries table: a person's `sebridge hooks retry EVENT_ID`, for every agent.

A request is one row per event whose `seq` counts the requests; each VM's agent runs
again the failed prepare hooks of its own VM whose row has not taken the latest request up
(hook_runs.retry_asked: store/hook_runs.py), with their retry budget afresh. The request,
its transition ("hooks retry requested by X") and putting a held approval back to waiting
for readiness are one transaction: the carrier then claims it again, and the gate waits
for the hooks' new runs. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime

from sebridge.model import Transition, TransitionKind
from sebridge.model.approval import CARRIED_OUT, ApprovalState
from sebridge.model.records import EventRecord
from sebridge.store.codec import iso
from sebridge.store.database import Database
from sebridge.store.event_locks import lock_events
from sebridge.store.events import Events
from sebridge.store.transitions import Transitions

__all__ = ["HookRetries", "RetryAnswer"]


@dataclass(frozen=True)
class RetryAnswer:
    """What became of a request: `refused` says why nothing was asked (unknown, gone,
    started, no failed prepare hook); else `runs` are the (VM, hook) that run again."""

    event_id: str
    refused: str = ""
    runs: tuple[tuple[str, str], ...] = ()
    released: bool = False  # a held approval went back to waiting for readiness


class HookRetries:
    """Requests to run an event's failed prepare hooks again."""

    def __init__(self, db: Database, events: Events, transitions: Transitions) -> None:
        self._db = db
        self._events = events
        self._transitions = transitions

    def request(
        self,
        event_id: str,
        *,
        actor: str,
        via: str,
        now: datetime,
        sinks_for: Callable[[EventRecord], Sequence[str]],
    ) -> RetryAnswer:
        """Ask every agent to run the event's failed prepare hooks again (see the module's
        docstring); refused for an unknown, gone or started event, or one with no failed
        prepare hook."""
        with self._db.transaction():
            record = self._events.get(event_id)
            if record is None:
                return RetryAnswer(event_id, refused=f"unknown event {event_id}")
            event_id = record.event.event_id  # as stored (people type GUIDs in lower case)
            lock_events(self._db, [event_id])
            record = self._events.get(event_id)  # as of the lock
            if record is None or not record.present:
                return RetryAnswer(event_id, refused=f"{event_id} is gone from IMDS")
            if record.event.started:
                return RetryAnswer(event_id, refused=f"{event_id} has started")
            approval = record.approval
            if approval is not None and approval.state in (*CARRIED_OUT, ApprovalState.POSTING):
                # Draining again after the StartRequests would run after the start it prepares.
                return RetryAnswer(
                    event_id,
                    refused=f"{event_id}'s StartRequests was sent to Azure already (approved by"
                    f" {approval.anyway_by or approval.actor}): running its prepare hooks again"
                    " would come too late",
                )
            rows = self._db.all(
                "SELECT vm, hook FROM hook_runs WHERE event_id = ? AND stage = 'prepare' "
                "AND state = 'failed' ORDER BY vm, hook",
                (event_id,),
            )
            runs = tuple((str(r[0]), str(r[1])) for r in rows)
            if not runs:
                return RetryAnswer(event_id, refused=f"{event_id} has no failed prepare hook")
            seq = self._db.one("SELECT seq FROM hook_retries WHERE event_id = ?", (event_id,))
            number = int(seq[0]) + 1 if seq else 1
            self._db.execute(
                "INSERT INTO hook_retries (event_id, seq, actor, via, at) VALUES (?, ?, ?, ?, ?) "
                "ON CONFLICT (event_id) DO UPDATE SET seq = excluded.seq, "
                "actor = excluded.actor, via = excluded.via, at = excluded.at",
                (event_id, number, actor, via, iso(now)),
            )
            released = self._db.execute(
                # Never POSTed (a held one was not): its attempts start afresh, so what it
                # says while claimed is the wait, not "IMDS did not answer".
                "UPDATE approvals SET state = ?, done_at = NULL, last_error = ?, attempts = 0 "
                "WHERE event_id = ? AND state = ?",
                (
                    ApprovalState.WAITING,
                    f"hooks retry requested by {actor}",
                    event_id,
                    ApprovalState.HELD,
                ),
            )
            what = ", ".join(f"{hook} on {vm}" for vm, hook in runs)
            again = f" (request {number})" if number > 1 else ""
            note = f"hooks retry requested by {actor}{again}: {what} runs again"
            if released:
                note += "; the held approval waits for them"
            said = Transition(
                TransitionKind.HOOKS_RETRY, record.event, now, actor=actor, via=via, note=note
            )
            self._transitions.add(said, sinks_for(record), now)
        return RetryAnswer(event_id, runs=runs, released=released == 1)

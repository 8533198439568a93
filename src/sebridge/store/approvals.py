"""The approvals table: recorded once, claimed by the agent that carries them out.

A claim names its claimant; a claim whose claimant died (PostgreSQL: its
session ended; SQLite: the daemon restarted and let its own claims go) is
void at once, not after its lease, so an approval whose POST a crash cut
short is sent again as soon as a live process can (IMDS takes a repeated
StartRequests for one event as one).

A claim is owned (store/claims.py): its POST is begun, and its outcome recorded, only by the
holder of the live claim. `unanswered` counts the POSTs IMDS never answered: each is counted
before it goes out (committed) and taken off by its answer, so after a crash (or a timeout),
whatever state the row was put back in, it says a POST may have reached IMDS.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime, timedelta

from sebridge.model import Approval, Transition
from sebridge.model.approval import CARRIED_OUT, OPEN, ApprovalState
from sebridge.model.records import ApprovalRecord
from sebridge.store.claims import new_token
from sebridge.store.codec import from_iso, iso
from sebridge.store.database import Database, Row
from sebridge.store.event_locks import lock_events
from sebridge.store.transitions import Transitions

__all__ = ["APPROVAL_COLUMNS", "Approvals", "approval_record"]

APPROVAL_COLUMNS = (
    "event_id, actor, via, at, state, attempts, last_error, done_at, unanswered, "
    "anyway_by, anyway_via, actor_id, anyway_id"
)
PENDING, POSTING, WAITING = ApprovalState.PENDING, ApprovalState.POSTING, ApprovalState.WAITING
HELD = ApprovalState.HELD
# The open states as the approvals_open index (schema version 12) spells them, written into
# the SQL: a planner uses a partial index only for a query that states its condition, and
# not through a parameter (PostgreSQL's generic plans cannot see its value).
_OPEN_LIST = ", ".join(f"'{s}'" for s in OPEN)
OPEN_STATES = f"approvals.state IN ({_OPEN_LIST})"
# Approvals this agent may carry out (one `?`: the agent): of events its own latest
# document lists, or of events no agent sees any more (the claimer closes them as
# abandoned). An agent whose IMDS does not list the event never POSTs it.
_OURS = (
    "(EXISTS (SELECT 1 FROM sightings s WHERE s.event_id = approvals.event_id "
    "AND s.agent = ? AND s.present = 1) OR NOT EXISTS (SELECT 1 FROM events e "
    "WHERE e.event_id = approvals.event_id AND e.present = 1))"
)


class Approvals:
    """Approvals: who approved which event, and what became of it."""

    def __init__(self, db: Database, agent: str, transitions: Transitions) -> None:
        self._db = db
        self._agent = agent
        self._transitions = transitions

    def _claimable(self, *, waiting: bool = True) -> str:
        """SQL (one `?`: now): pending (or waiting for readiness), or claimed by one whose
        lease ended or who is gone. Open approvals only, through approvals_open: closed
        ones (every approval ever carried out) are never read."""
        gone = self._db.claimant_gone("approvals.claimed_by")
        states = f"'{PENDING}', '{WAITING}'" if waiting else f"'{PENDING}'"
        return (
            f"({OPEN_STATES} AND (approvals.state IN ({states}) OR "
            f"(approvals.state = '{POSTING}' AND (approvals.claimed_until < ? OR {gone}))))"
        )

    def approved_ids(self) -> frozenset[str]:
        """Events in this agent's latest document whose approval went (or would have gone,
        dry run) to IMDS: what diff() asks of the events the document no longer lists.
        Read from this agent's present sightings (sightings_present), not every approval."""
        rows = self._db.all(
            "SELECT s.event_id FROM sightings s JOIN approvals a ON a.event_id = s.event_id "
            "WHERE s.agent = ? AND s.present = 1 AND a.state IN (?, ?)",
            (self._agent, *CARRIED_OUT),
        )
        return frozenset(r[0] for r in rows)

    def record(self, approval: Approval, *, anyway: bool = False) -> bool:
        """Store an approval once; False when the event already had one (idempotent).
        `anyway`: carried out despite unready VMs (approve anyway), as its approver asked."""
        a = approval
        who, via, who_id = (a.actor, a.via, a.actor_id) if anyway else (None, None, None)
        changed = self._db.execute(
            "INSERT INTO approvals (event_id, actor, via, at, state, anyway_by, anyway_via, "
            "actor_id, anyway_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (event_id) DO NOTHING",
            (a.event_id, a.actor, a.via, iso(a.at), PENDING, who, via, a.actor_id, who_id),
        )
        return changed == 1

    def anyway(self, event_id: str, actor: str, via: str, actor_id: str | None = None) -> bool:
        """Turn an approval not carried out for want of ready VMs (held, or still open:
        waiting for its prepare hooks) into an anyway one: `actor` asks that it be carried
        out despite them. A held one is pending again (claimable: the usual claim rules);
        an open one keeps its state and its claim (the next claim reads the flag). False
        when the approval is in no such state (carried out, closed, anyway already). The
        first approver (`actor`) stays: the one who asked, whose approval was held."""
        with self._db.transaction():
            lock_events(self._db, [event_id])
            # A held one was closed (done_at, its reason; never POSTed): open again, as
            # recorded anew.
            held = f"state = '{HELD}'"
            changed = self._db.execute(
                "UPDATE approvals SET anyway_by = ?, anyway_via = ?, anyway_id = ?, "
                f"last_error = CASE WHEN {held} THEN NULL ELSE last_error END, "
                f"attempts = CASE WHEN {held} THEN 0 ELSE attempts END, "
                f"done_at = CASE WHEN {held} THEN NULL ELSE done_at END, "
                f"state = CASE WHEN {held} THEN '{PENDING}' ELSE state END "
                f"WHERE event_id = ? AND anyway_by IS NULL AND state IN ('{HELD}', {_OPEN_LIST})",
                (actor, via, actor_id, event_id),
            )
        return changed == 1

    def wait_again(self, event_id: str, why: str) -> bool:
        """A held approval waits for readiness again: a listed VM's agent, back after it was
        silent, prepared, and nothing holds the approval any more (hooks/worker.py). The
        carrier's gate then lets it go once every VM is ready. Its attempts start afresh
        (it was never POSTed). False when it was not held."""
        with self._db.transaction():
            lock_events(self._db, [event_id])
            changed = self._db.execute(
                "UPDATE approvals SET state = ?, done_at = NULL, last_error = ?, attempts = 0 "
                "WHERE event_id = ? AND state = ?",
                (WAITING, why, event_id, HELD),
            )
        return changed == 1

    def get(self, event_id: str) -> ApprovalRecord | None:
        """The approval of an event, if any."""
        row = self._db.one(
            f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE event_id = ?", (event_id,)
        )
        return approval_record(row) if row else None

    def claim(self, now: datetime, lease: timedelta) -> list[ApprovalRecord]:
        """Take approvals to carry out: pending ones, and those whose claimant died or whose
        lease ended (a POST of theirs IMDS never answered may have reached it:
        ApprovalRecord.maybe_sent). Only those of events in this agent's latest document
        (its IMDS is the one that can start them), or of events no agent sees any more (to
        close them). Each claim carries a token of its own (store/claims.py)."""
        token = new_token()
        with self._db.transaction():
            rows = self._db.all(
                f"SELECT {APPROVAL_COLUMNS} FROM approvals WHERE {self._claimable()} "
                f"AND {_OURS} ORDER BY at FOR UPDATE SKIP LOCKED",
                (iso(now), self._agent),
            )
            for row in rows:
                self._db.execute(
                    "UPDATE approvals SET state = ?, claimed_by = ?, claimed_until = ?, "
                    "claim_token = ? WHERE event_id = ?",
                    (POSTING, self._agent, iso(now + lease), token, row[0]),
                )
        return [replace(approval_record(row), token=token) for row in rows]

    def begin_post(self, claim: ApprovalRecord, lease_until: datetime) -> bool:
        """Record a POST as begun (committed before it goes out) and renew the claim's lease:
        after a crash, the next claim knows a POST may have reached IMDS. False: the claim
        was lost (another claim took the approval): nothing written, do not POST."""
        changed = self._db.execute(
            "UPDATE approvals SET unanswered = unanswered + 1, claimed_until = ? "
            "WHERE event_id = ? AND state = ? AND claim_token = ?",
            (iso(lease_until), claim.event_id, POSTING, claim.token),
        )
        return changed == 1

    def has_pending(self, now: datetime, *, waiting: bool = False) -> bool:
        """Whether claim_approvals could return anything (cheap, for every tick). One that
        waits for readiness counts only with `waiting`: the tick does not look again for
        it at every poll; a hook's end or the heartbeat wakes the carrier for it."""
        row = self._db.one(
            f"SELECT 1 FROM approvals WHERE {self._claimable(waiting=waiting)} AND {_OURS} LIMIT 1",
            (iso(now), self._agent),
        )
        return row is not None

    def stranded(self) -> str:
        """SQL (one `?`: now), true when some approval waits that nobody carries out
        (Agents.heartbeat asks: no NOTIFY tells the living of a death)."""
        return f"EXISTS (SELECT 1 FROM approvals WHERE {self._claimable()})"

    def release_own(self) -> int:
        """Put back the approvals this agent was POSTing when its process ended (the daemon,
        at start): they are sent again at once, not after their lease. Their `unanswered`
        stays: the next claim knows whether a POST went out before the end."""
        return self._db.execute(
            "UPDATE approvals SET state = ?, claimed_by = NULL, claimed_until = NULL, "
            "claim_token = NULL WHERE state = ? AND claimed_by = ?",
            (PENDING, POSTING, self._agent),
        )

    def put_back(self, claims: Sequence[ApprovalRecord]) -> int:
        """Put back approvals claimed whose POST never began (a round the store cut short):
        pending again at once, not after their lease. Only under each claim's own token: one
        that passed to another claim meanwhile is the new holder's. Never for a claim whose
        POST began (begin_post): that one's outcome is recorded, or its lease runs out and
        the next claim knows a POST may have reached IMDS."""
        changed = 0
        for token in {claim.token for claim in claims}:
            ids = [claim.event_id for claim in claims if claim.token == token]
            changed += self._db.execute(
                "UPDATE approvals SET state = ?, claimed_by = NULL, claimed_until = NULL, "
                f"claim_token = NULL WHERE state = ? AND claim_token = ? "
                f"AND event_id IN ({', '.join('?' * len(ids))})",
                (PENDING, POSTING, token, *ids),
            )
        return changed

    def finish(
        self,
        claim: ApprovalRecord,
        state: str,
        now: datetime,
        *,
        error: str | None = None,
        transition: Transition | None = None,
        sinks: Sequence[str] = (),
        answered: bool = False,
    ) -> bool:
        """Record what became of an approval claimed by `claim` (claim_approvals); with a
        transition, queue it in the same transaction. False (nothing written) when the
        claim was lost: its lease ran out and another claim took the approval. State
        PENDING puts it back for the next tick (a failed POST); WAITING until the event's
        VMs are ready (not an attempt: nothing was POSTed). `answered`: this claim's POST
        (begin_post) got IMDS's answer, or never reached IMDS: it did not start the event.

        The event's row is locked first, as every write about an event does (store/event_locks.py):
        one lock order, so this never deadlocks with another agent's tick.
        """
        with self._db.transaction():
            lock_events(self._db, [claim.event_id])
            changed = self._db.execute(
                "UPDATE approvals SET state = ?, attempts = attempts + ?, last_error = ?, "
                "claimed_by = NULL, claimed_until = NULL, claim_token = NULL, done_at = ?, "
                "unanswered = unanswered - ? WHERE event_id = ? AND state = ? AND claim_token = ?",
                (
                    state,
                    0 if state == WAITING else 1,
                    error,
                    None if state in (PENDING, WAITING) else iso(now),
                    1 if answered else 0,
                    claim.event_id,
                    POSTING,
                    claim.token,
                ),
            )
            if changed and transition is not None:
                self._transitions.add(transition, sinks, now)
        return changed == 1


def approval_record(row: Row) -> ApprovalRecord:
    """An approvals row (APPROVAL_COLUMNS, in order) as a record."""
    return ApprovalRecord(
        event_id=row[0],
        actor=row[1],
        via=row[2],
        at=from_iso(row[3]),
        state=row[4],
        attempts=row[5],
        last_error=row[6],
        done_at=from_iso(row[7]) if row[7] else None,
        unanswered=row[8],
        anyway_by=row[9],
        anyway_via=row[10],
        actor_id=row[11],
        anyway_id=row[12],
    )

"""The approvals table: recorded once, claimed by an agent that can carry them out.

Part of Store (a mixin: Store provides `db`, `agent` and `_add_transition`).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime, timedelta

from sebridge.model import Approval, Transition
from sebridge.store.codec import from_iso, iso
from sebridge.store.database import Database, Row
from sebridge.store.records import ApprovalRecord

__all__ = ["ABANDONED", "DRY_RUN", "FAILED", "PENDING", "POSTED", "POSTING", "ApprovalTable"]

_APPROVAL_COLUMNS = "event_id, actor, via, at, state, attempts, last_error, done_at"
# Approvals this agent may carry out (one `?`: the agent): of events its own latest
# document lists, or of events no agent sees any more (the claimer closes them as
# abandoned). An agent whose IMDS does not list the event never POSTs it.
_OURS = (
    "(EXISTS (SELECT 1 FROM sightings s WHERE s.event_id = approvals.event_id "
    "AND s.agent = ? AND s.present = 1) OR NOT EXISTS (SELECT 1 FROM events e "
    "WHERE e.event_id = approvals.event_id AND e.present = 1))"
)
# The states an approval passes through (see ApprovalRecord).
PENDING, POSTING, POSTED, DRY_RUN, FAILED, ABANDONED = (
    "pending",
    "posting",
    "posted",
    "dry_run",
    "failed",
    "abandoned",
)


class ApprovalTable:
    """Approvals: who approved which event, and what became of it."""

    db: Database
    agent: str

    def _add_transition(
        self, transition: Transition, sinks: Sequence[str], now: datetime
    ) -> int | None:
        raise NotImplementedError  # Store's

    def approved_ids(self) -> frozenset[str]:
        """Events with an approval that went (or would have gone, dry run) to IMDS."""
        rows = self.db.all(
            "SELECT event_id FROM approvals WHERE state IN (?, ?)", (POSTED, DRY_RUN)
        )
        return frozenset(r[0] for r in rows)

    def record_approval(self, approval: Approval) -> bool:
        """Store an approval once; False when the event already had one (idempotent)."""
        changed = self.db.execute(
            "INSERT INTO approvals (event_id, actor, via, at, state) VALUES (?, ?, ?, ?, ?) "
            "ON CONFLICT (event_id) DO NOTHING",
            (approval.event_id, approval.actor, approval.via, iso(approval.at), PENDING),
        )
        return changed == 1

    def approval(self, event_id: str) -> ApprovalRecord | None:
        """The approval of an event, if any."""
        row = self.db.one(
            f"SELECT {_APPROVAL_COLUMNS} FROM approvals WHERE event_id = ?", (event_id,)
        )
        return _approval_record(row) if row else None

    def claim_approvals(self, now: datetime, lease: timedelta) -> list[ApprovalRecord]:
        """Take pending approvals (and ones whose claimer died) to carry them out: only
        those of events in this agent's latest document (its IMDS is the one that
        can start them), or of events no agent sees any more (to close them)."""
        with self.db.transaction():
            rows = self.db.all(
                f"SELECT {_APPROVAL_COLUMNS} FROM approvals WHERE "
                f"(state = ? OR (state = ? AND claimed_until < ?)) AND {_OURS} "
                "ORDER BY at FOR UPDATE SKIP LOCKED",
                (PENDING, POSTING, iso(now), self.agent),
            )
            for row in rows:
                self.db.execute(
                    "UPDATE approvals SET state = ?, claimed_until = ? WHERE event_id = ?",
                    (POSTING, iso(now + lease), row[0]),
                )
        return [_approval_record(row) for row in rows]

    def has_pending_approvals(self) -> bool:
        """Whether claim_approvals could return anything (cheap, for every tick)."""
        row = self.db.one(
            f"SELECT 1 FROM approvals WHERE state IN (?, ?) AND {_OURS} LIMIT 1",
            (PENDING, POSTING, self.agent),
        )
        return row is not None

    def finish_approval(
        self,
        event_id: str,
        state: str,
        now: datetime,
        *,
        error: str | None = None,
        transition: Transition | None = None,
        sinks: Sequence[str] = (),
    ) -> None:
        """Record what became of an approval; with a transition, queue it in the same transaction.

        state PENDING puts it back for the next tick (a failed POST is retried).
        """
        with self.db.transaction():
            self.db.execute(
                "UPDATE approvals SET state = ?, attempts = attempts + 1, last_error = ?, "
                "claimed_until = NULL, done_at = ? WHERE event_id = ?",
                (state, error, None if state == PENDING else iso(now), event_id),
            )
            if transition is not None:
                self._add_transition(transition, sinks, now)


def _approval_record(row: Row) -> ApprovalRecord:
    return ApprovalRecord(
        event_id=row[0],
        actor=row[1],
        via=row[2],
        at=from_iso(row[3]),
        state=row[4],
        attempts=row[5],
        last_error=row[6],
        done_at=from_iso(row[7]) if row[7] else None,
    )

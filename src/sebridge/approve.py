"""The approval use case: record once, then POST StartRequests while it still means something.

`approve()` is what the CLI, Slack, approval links and the policy call: it
refuses unknown, gone and started events (they never reach IMDS) and is
idempotent. `execute()` runs on every tick (and right after a CLI approval):
it claims pending approvals, POSTs only for events in the latest document
and not started, and queues an "approved" transition naming the actor (in
dry run, nothing is POSTed and the transition is "would_approve"). A
failed POST goes back to pending and is retried on the next tick.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta

from sebridge.errors import ApprovalError, ImdsError, ImdsRequestError
from sebridge.imds import ImdsClient
from sebridge.model import Approval, Transition, TransitionKind
from sebridge.store import ApprovalRecord, EventRecord, Store
from sebridge.store.approvals import ABANDONED, DRY_RUN, FAILED, PENDING, POSTED

__all__ = ["Approver"]

log = logging.getLogger(__name__)

# A claimed approval whose process died is taken up again after this.
CLAIM_LEASE = timedelta(seconds=60)


def _utcnow() -> datetime:
    return datetime.now(UTC)


class Approver:
    """Records approvals and carries them out against IMDS.

    Args:
        sinks_for: the sinks an event's transitions go to, by its policy decision.
        dry_run: record and notify, never POST.
    """

    def __init__(
        self,
        store: Store,
        imds: ImdsClient,
        sinks_for: Callable[[str], Sequence[str]],
        *,
        dry_run: bool = False,
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._store = store
        self._imds = imds
        self._sinks_for = sinks_for
        self._dry_run = dry_run
        self._clock = clock

    def approve(self, event_id: str, actor: str, via: str) -> tuple[ApprovalRecord, bool]:
        """Record an approval; returns it and whether it is new (False: approved before).

        Raises:
            ApprovalError: the event is unknown, gone from IMDS, or already started.
        """
        record = self._store.event(event_id.strip())
        if record is None:
            raise ApprovalError(
                f"unknown event {event_id}: sebridge has not seen it in any IMDS document "
                "(see `sebridge events`)"
            )
        event = record.event
        if not record.present:
            raise ApprovalError(
                f"event {event.event_id} ({event.event_type}) is gone from IMDS ({record.state}): "
                "nothing to approve"
            )
        if event.started:
            raise ApprovalError(
                f"event {event.event_id} ({event.event_type}) has already started: "
                "nothing to approve"
            )
        new = self._store.record_approval(Approval(event.event_id, actor, via, self._clock()))
        approval = self._store.approval(event.event_id)
        assert approval is not None  # just written, or there before
        return approval, new

    def execute(self) -> int:
        """Carry out pending approvals; returns how many reached an end state."""
        if not self._store.has_pending_approvals():
            return 0
        done = 0
        for approval in self._store.claim_approvals(self._clock(), CLAIM_LEASE):
            done += self._carry_out(approval)
        return done

    def _finish_with_problem(
        self,
        approval: ApprovalRecord,
        record: EventRecord | None,
        state: str,
        error: str,
        note: str,
    ) -> None:
        """End an approval that did not work, and tell the sinks (the approver hears it)."""
        now = self._clock()
        if record is None:
            self._store.finish_approval(approval.event_id, state, now, error=error)
            return
        problem = Transition(
            TransitionKind.PROBLEM,
            record.event,
            now,
            actor=approval.actor,
            via=approval.via,
            note=note,
        )
        self._store.finish_approval(
            approval.event_id,
            state,
            now,
            error=error,
            transition=problem,
            sinks=self._sinks_for(record.policy),
        )

    def _carry_out(self, approval: ApprovalRecord) -> int:
        now = self._clock()
        record = self._store.event(approval.event_id)
        if record is None or not record.present or record.event.started:
            why = "the event left IMDS" if record is None or not record.present else "it started"
            log.info("approval of %s not sent: %s first", approval.event_id, why)
            note = f"Approval by {approval.actor} not sent to IMDS: {why} first."
            self._finish_with_problem(approval, record, ABANDONED, f"{why} first", note)
            return 1
        transition = Transition(
            kind=TransitionKind.WOULD_APPROVE if self._dry_run else TransitionKind.APPROVED,
            event=record.event,
            at=now,
            actor=approval.actor,
            via=approval.via,
            dry_run=self._dry_run,
        )
        sinks = self._sinks_for(record.policy)
        if self._dry_run:
            self._store.finish_approval(
                approval.event_id, DRY_RUN, now, transition=transition, sinks=sinks
            )
            return 1
        try:
            self._imds.start([record.event.event_id])
        except ImdsRequestError as exc:
            log.error("IMDS refused the approval of %s: %s", approval.event_id, exc)
            note = f"IMDS refused the approval by {approval.actor}: {exc}"
            self._finish_with_problem(approval, record, FAILED, str(exc), note)
            return 1
        except ImdsError as exc:
            log.warning(
                "approval of %s not sent yet (%s); retrying next tick", approval.event_id, exc
            )
            self._store.finish_approval(approval.event_id, PENDING, now, error=str(exc))
            return 0
        log.info(
            "approved %s (%s) for %s via %s",
            record.event.event_id,
            record.event.event_type,
            approval.actor,
            approval.via,
        )
        self._store.finish_approval(
            approval.event_id, POSTED, now, transition=transition, sinks=sinks
        )
        return 1

"""Recording what became of a claimed approval: its state and the transition that announces
it, in one transaction (Store.approvals.finish), under the claim that carried it out.

An outcome the store cannot take now (the store away) is kept in memory and recorded at the
carrier's next round, never carried out again meanwhile. One the store refuses because the
claim passed to another agent (its lease ran out) changes nothing and is said once: the
new holder records its own. An approval whose event started or left before its POST is
closed here too (too_late): as not sent, or as sent when an earlier POST may have gone out.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass

from sebridge.approval.counts import ApprovalCounts
from sebridge.kernel.clock import Clock
from sebridge.kernel.errors import StoreError
from sebridge.model import Transition, TransitionKind
from sebridge.model.approval import ApprovalState
from sebridge.model.decision import Decision
from sebridge.model.records import ApprovalRecord, EventRecord
from sebridge.store import Store

__all__ = ["Outcomes"]

log = logging.getLogger("sebridge.approve")

# States that leave the approval open (not counted as settled by a round).
_OPEN = (ApprovalState.PENDING, ApprovalState.WAITING)


@dataclass(frozen=True)
class _Finish:
    """An outcome to record: kept in memory while the store cannot take it."""

    claim: ApprovalRecord
    state: str
    error: str | None
    transition: Transition | None
    sinks: Sequence[str]
    answered: bool


class Outcomes:
    """Records the carrier's outcomes, and keeps those the store could not take yet.

    Args:
        sinks_for: the sinks an event's transitions go to, by its decision (its
            action and the rule's notify).
        metrics: counts each outcome recorded (once, even in a fleet: only the claim's
            holder records it).
    """

    def __init__(
        self,
        store: Store,
        sinks_for: Callable[[Decision], Sequence[str]],
        clock: Clock,
        metrics: ApprovalCounts,
    ) -> None:
        self._store = store
        self._sinks_for = sinks_for
        self._clock = clock
        self._metrics = metrics
        self._unrecorded: list[_Finish] = []

    @property
    def waiting(self) -> bool:
        """Whether some outcome waits to be recorded."""
        return bool(self._unrecorded)

    def finish(
        self,
        record: EventRecord | None,
        claim: ApprovalRecord,
        state: str,
        *,
        error: str | None = None,
        transition: Transition | None = None,
        problem: str = "",
        kind: str = TransitionKind.PROBLEM,
        answered: bool = False,
    ) -> int:
        """Record the outcome (with `problem`: a transition of `kind` saying it); if the store
        cannot take it now, at the next round. Returns 1 when it settled the approval.
        `answered`: the POST this claim began was answered (Store.approvals.finish)."""
        if problem and record is not None:
            transition = Transition(
                kind,
                record.event,
                self._clock(),
                actor=claim.actor,
                via=claim.via,
                note=problem,
                actor_id=claim.actor_id,
            )
        sinks = self._sinks_for(record.decision) if record is not None and transition else ()
        finish = _Finish(claim, state, error, transition, sinks, answered)
        try:
            self._record(finish)
        except StoreError as exc:
            log.warning("the outcome of %s's approval is recorded later: %s", claim.event_id, exc)
            self._unrecorded.append(finish)
            return 0
        return 0 if state in _OPEN else 1

    def too_late(self, claim: ApprovalRecord, record: EventRecord | None) -> int:
        """The event started or left IMDS before the POST: close the approval as not sent,
        or as sent when an earlier POST went out and IMDS never answered it (a crash in the
        middle, a timeout): that POST may be what started the event."""
        why = "the event left IMDS" if record is None or not record.present else "it started"
        if not claim.maybe_sent:
            log.info("approval of %s not sent: %s first", claim.event_id, why)
            note = f"Approval by {claim.actor} not sent to Azure: {why} first."
            return self.finish(
                record, claim, ApprovalState.ABANDONED, error=f"{why} first", problem=note
            )
        log.info("approval of %s: sent by an unanswered POST; %s since", claim.event_id, why)
        transition = None
        if record is not None:
            transition = Transition(
                kind=TransitionKind.APPROVED,
                event=record.event,
                at=self._clock(),
                actor=claim.actor,
                via=claim.via,
                actor_id=claim.actor_id,
                note=f"StartRequests sent (an earlier attempt may have reached IMDS); {why} since",
            )
        return self.finish(record, claim, ApprovalState.POSTED, transition=transition)

    def record_unrecorded(self) -> int:
        """Record the outcomes kept while the store was away; how many settled an approval.
        A StoreError leaves the rest for the next round."""
        done = 0
        while self._unrecorded:
            finish = self._unrecorded[0]
            self._record(finish)
            self._unrecorded.pop(0)
            done += finish.state not in _OPEN
        return done

    def _record(self, finish: _Finish) -> None:
        taken = self._store.approvals.finish(
            finish.claim,
            finish.state,
            self._clock(),
            error=finish.error,
            transition=finish.transition,
            sinks=finish.sinks,
            answered=finish.answered,
        )
        if not taken:  # the claim's lease ended and another claim took it: that one records
            log.warning(
                "the outcome (%s) of %s's approval is not recorded here: its claim passed to "
                "another agent meanwhile",
                finish.state,
                finish.claim.event_id,
            )
            return
        self._metrics.approval_ended(finish.claim.via, finish.state)

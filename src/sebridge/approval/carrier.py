"""The carrier: the one thread of an agent that carries approvals out.

It claims pending approvals (store/approvals.py: only of events this agent's
IMDS lists), POSTs StartRequests for each event still in IMDS's document and
not started, and records what happened with the transition that announces it
("approved by X", "would_approve" in dry run, or a problem), in one
transaction (outcomes.py). A POST that IMDS did not answer is put back and
tried again at the next tick. Each POST is recorded as begun before it goes
out, under the claim (Store.begin_post), until IMDS answers it: an approval
with a POST IMDS never answered (a crash in the middle, a timeout: `maybe_sent`)
whose event then started or left is announced as sent, since that POST may
well be what started it; never as "not sent".

Channels never POST: they record an approval and wake the carrier (usecase.py).
A running daemon gives the carrier its own thread (start()); `sebridge once`
and the CLI, holding the store alone, run a round on the caller's thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

from sebridge.approval.counts import NOT_COUNTED, ApprovalCounts
from sebridge.approval.gate import GO, Gate, GateAnswer
from sebridge.approval.outcomes import Outcomes
from sebridge.imds import ImdsClient
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import ImdsError, ImdsRequestError, ImdsTimeoutError, StoreError
from sebridge.model import Transition, TransitionKind
from sebridge.model.approval import ApprovalState
from sebridge.store import ApprovalRecord, EventRecord, Store

__all__ = ["CLAIM_LEASE", "Carrier"]

log = logging.getLogger("sebridge.approve")

# A claimant that is alive but stuck (a POST that never returns) loses its claim after
# this; a dead one loses it at once (store/approvals.py).
CLAIM_LEASE = timedelta(seconds=60)


class Carrier:
    """Claims approvals, POSTs StartRequests, records the outcome; one thread per agent.

    Args:
        sinks_for: the sinks an event's transitions go to, by its policy decision.
        dry_run: record and announce, never POST.
        on_recorded: called after a round that claimed or recorded something (wakes the
            dispatcher: an event's messages then show its approval as carried out).
        gate: whether an event's VMs are ready for StartRequests (readiness hooks).
        on_waiting: called when an approval waits for readiness (wakes the hook worker).
        metrics: counts the approvals this carrier settles (default: nothing counts them).
    """

    def __init__(
        self,
        store: Store,
        imds: ImdsClient,
        sinks_for: Callable[[str], Sequence[str]],
        *,
        dry_run: bool = False,
        clock: Clock = utcnow,
        on_recorded: Callable[[], None] = lambda: None,
        gate: Gate = lambda record: GO,
        on_waiting: Callable[[], None] = lambda: None,
        metrics: ApprovalCounts = NOT_COUNTED,
    ) -> None:
        self._store = store
        self._gate = gate
        self._on_waiting = on_waiting
        self._imds = imds
        self._outcomes = Outcomes(store, sinks_for, clock, metrics)
        self._dry_run = dry_run
        self._clock = clock
        self._on_recorded = on_recorded
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._rounds = 0
        self._round_done = threading.Condition()
        self._turn = threading.Lock()
        # Whether approvals may wait (a failed POST is put back): the tick wakes us then.
        self.due = True

    # -- life -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Carry approvals out on a thread of our own from now on (the daemon)."""
        self._thread = threading.Thread(target=self._loop, name="approvals", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop the thread; a POST in flight may finish within `timeout`."""
        self._stopping.set()
        self._wake.set()
        if self._thread is not None:
            self._thread.join(max(0.0, timeout))

    def wake(self) -> int:
        """Carry out what is pending: on our thread once started (returns 0 at once), else
        here, on the caller's (returns how many approvals reached an end state)."""
        if self._thread is not None:
            self._wake.set()
            return 0
        # Without our thread, callers on several threads (the tick, a hook chain ending)
        # take turns: two rounds at once would claim and POST one approval twice.
        with self._turn:
            return self._round()

    # -- waiting for an outcome ------------------------------------------------------------------

    @property
    def rounds(self) -> int:
        """How many rounds have finished (read before looking at the store, then wait_round)."""
        return self._rounds

    def wait_round(self, after: int, timeout: float) -> None:
        """Wait until a round later than `after` finished, at most `timeout` seconds."""
        with self._round_done:
            self._round_done.wait_for(lambda: self._rounds > after, timeout)

    # -- the work ------------------------------------------------------------------------------

    def _loop(self) -> None:
        while not self._stopping.is_set():
            self._wake.wait()
            self._wake.clear()
            if self._stopping.is_set():
                return
            try:
                self._round()
            except StoreError as exc:  # the tick says the store is away; retried when it wakes us
                log.debug("approvals not carried out yet: %s", exc)
                self.due = True
                self._end_round()
            except Exception:  # a bug must not end the carrying out
                log.exception("carrying out approvals failed; tried again at the next tick")
                self.due = True
                self._end_round()

    def _round(self) -> int:
        done = self._outcomes.record_unrecorded()
        now = self._clock()
        claimed = []
        if self._store.has_pending_approvals(now, waiting=True):
            claimed = self._store.claim_approvals(now, CLAIM_LEASE)
            for approval in claimed:
                done += self._carry_out(approval)
        self.due = self._outcomes.waiting or self._store.has_pending_approvals(self._clock())
        if done or claimed:
            self._on_recorded()
        self._end_round()
        return done

    def _end_round(self) -> None:
        with self._round_done:
            self._rounds += 1
            self._round_done.notify_all()

    def _carry_out(self, approval: ApprovalRecord) -> int:
        record = self._store.event(approval.event_id)
        if record is None or not record.present or record.event.started:
            return self._too_late(approval, record)
        # A POST that may have gone out already passed the gate: holding it now would
        # say "nothing was sent to IMDS", which may be false.
        answer = GO if self._dry_run or approval.maybe_sent else self._gate(record)
        if answer.wait or answer.hold:
            return self._not_ready(record, approval, answer)
        transition = Transition(
            kind=TransitionKind.WOULD_APPROVE if self._dry_run else TransitionKind.APPROVED,
            event=record.event,
            at=self._clock(),
            actor=approval.actor,
            via=approval.via,
            dry_run=self._dry_run,
            note=answer.note,
        )
        if self._dry_run:
            return self._outcomes.finish(
                record, approval, ApprovalState.DRY_RUN, transition=transition
            )
        return self._post(record, approval, transition)

    def _post(self, record: EventRecord, approval: ApprovalRecord, transition: Transition) -> int:
        """POST StartRequests under the claim and record what IMDS said."""
        # Committed before the POST: should we die before recording its outcome, the next
        # claim knows it may have reached IMDS.
        if not self._store.begin_post(approval, self._clock() + CLAIM_LEASE):
            log.warning(
                "approval of %s not sent here: its claim passed to another agent meanwhile",
                approval.event_id,
            )
            return 0
        try:
            self._imds.start([record.event.event_id])
        except ImdsRequestError as exc:
            log.error("IMDS refused the approval of %s: %s", approval.event_id, exc)
            note = f"IMDS refused the approval by {approval.actor}: {exc}"
            return self._outcomes.finish(
                record, approval, ApprovalState.FAILED, error=str(exc), problem=note, answered=True
            )
        except ImdsError as exc:
            log.warning(
                "approval of %s not sent yet (%s); retrying next tick", approval.event_id, exc
            )
            # A POST that timed out may have reached IMDS: it stays unanswered.
            answered = not isinstance(exc, ImdsTimeoutError)
            return self._outcomes.finish(
                record, approval, ApprovalState.PENDING, error=str(exc), answered=answered
            )
        log.info(
            "approved %s (%s) for %s via %s",
            record.event.event_id,
            record.event.event_type,
            approval.actor,
            approval.via,
        )
        return self._outcomes.finish(
            record, approval, ApprovalState.POSTED, transition=transition, answered=True
        )

    def _not_ready(self, record: EventRecord, approval: ApprovalRecord, answer: GateAnswer) -> int:
        """The event's VMs are not ready: wait for their prepare hooks, or hold for good."""
        if answer.wait:
            self._outcomes.finish(record, approval, ApprovalState.WAITING, error=answer.wait)
            self._on_waiting()
            return 0
        log.warning("approval of %s held: %s", approval.event_id, answer.hold)
        note = f"Approval by {approval.actor} held: {answer.hold}. Nothing was sent to IMDS."
        return self._outcomes.finish(
            record,
            approval,
            ApprovalState.HELD,
            error=answer.hold,
            problem=note,
            kind=TransitionKind.HELD,
        )

    def _too_late(self, approval: ApprovalRecord, record: EventRecord | None) -> int:
        """The event started or left IMDS: close the approval as not sent, or as sent when
        an earlier POST went out and IMDS never answered it (a crash in the middle, a
        timeout): that POST may be what started the event."""
        why = "the event left IMDS" if record is None or not record.present else "it started"
        if not approval.maybe_sent:
            log.info("approval of %s not sent: %s first", approval.event_id, why)
            note = f"Approval by {approval.actor} not sent to IMDS: {why} first."
            return self._outcomes.finish(
                record, approval, ApprovalState.ABANDONED, error=f"{why} first", problem=note
            )
        log.info("approval of %s: sent by an unanswered POST; %s since", approval.event_id, why)
        transition = None
        if record is not None:
            transition = Transition(
                kind=TransitionKind.APPROVED,
                event=record.event,
                at=self._clock(),
                actor=approval.actor,
                via=approval.via,
                note=f"StartRequests sent (an earlier attempt may have reached IMDS); {why} since",
            )
        return self._outcomes.finish(record, approval, ApprovalState.POSTED, transition=transition)

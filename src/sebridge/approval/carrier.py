"""The carrier: the one thread of an agent that carries approvals out.

It claims pending approvals (store/approvals.py: only of events this agent's
IMDS lists), POSTs StartRequests for each event still in IMDS's document and
not started, and records what happened with the transition that announces it
("approved by X", "would_approve" in dry run, or a problem), in one
transaction. A POST that IMDS did not answer is put back and tried again at
the next tick; one whose outcome could not be recorded (the store away) is
recorded at the next round, never POSTed again meanwhile.

Channels never POST: they record an approval and wake the carrier (usecase.py).
A running daemon gives the carrier its own thread (start()); `sebridge once`
and the CLI, holding the store alone, run a round on the caller's thread.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from sebridge.approval.counts import NOT_COUNTED, ApprovalCounts
from sebridge.approval.gate import GO, Gate, GateAnswer
from sebridge.imds import ImdsClient
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import ImdsError, ImdsRequestError, StoreError
from sebridge.model import Transition, TransitionKind
from sebridge.model.approval import ApprovalState
from sebridge.store import ApprovalRecord, EventRecord, Store

__all__ = ["CLAIM_LEASE", "Carrier"]

log = logging.getLogger("sebridge.approve")

# A claimant that is alive but stuck (a POST that never returns) loses its claim after
# this; a dead one loses it at once (store/approvals.py).
CLAIM_LEASE = timedelta(seconds=60)


@dataclass(frozen=True)
class _Finish:
    """An outcome to record: kept in memory while the store cannot take it."""

    event_id: str
    state: str
    error: str | None
    transition: Transition | None
    sinks: Sequence[str]
    via: str


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
        self._metrics = metrics
        self._sinks_for = sinks_for
        self._dry_run = dry_run
        self._clock = clock
        self._on_recorded = on_recorded
        self._wake = threading.Event()
        self._stopping = threading.Event()
        self._thread: threading.Thread | None = None
        self._rounds = 0
        self._round_done = threading.Condition()
        self._turn = threading.Lock()
        self._unrecorded: list[_Finish] = []
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
        done = self._record_unrecorded()
        now = self._clock()
        claimed = []
        if self._store.has_pending_approvals(now, waiting=True):
            claimed = self._store.claim_approvals(now, CLAIM_LEASE)
            for approval in claimed:
                done += self._carry_out(approval)
        self.due = bool(self._unrecorded) or self._store.has_pending_approvals(self._clock())
        if done or claimed:
            self._on_recorded()
        self._end_round()
        return done

    def _end_round(self) -> None:
        with self._round_done:
            self._rounds += 1
            self._round_done.notify_all()

    def _carry_out(self, approval: ApprovalRecord) -> int:
        now = self._clock()
        record = self._store.event(approval.event_id)
        if record is None or not record.present or record.event.started:
            self._abandon(approval, record)
            return 1
        answer = GO if self._dry_run else self._gate(record)
        if answer.wait or answer.hold:
            return self._not_ready(record, approval, answer)
        transition = Transition(
            kind=TransitionKind.WOULD_APPROVE if self._dry_run else TransitionKind.APPROVED,
            event=record.event,
            at=now,
            actor=approval.actor,
            via=approval.via,
            dry_run=self._dry_run,
            note=answer.note,
        )
        if self._dry_run:
            return self._finish(record, approval, ApprovalState.DRY_RUN, transition=transition)
        try:
            self._imds.start([record.event.event_id])
        except ImdsRequestError as exc:
            log.error("IMDS refused the approval of %s: %s", approval.event_id, exc)
            note = f"IMDS refused the approval by {approval.actor}: {exc}"
            return self._finish(
                record, approval, ApprovalState.FAILED, error=str(exc), problem=note
            )
        except ImdsError as exc:
            log.warning(
                "approval of %s not sent yet (%s); retrying next tick", approval.event_id, exc
            )
            self._finish(record, approval, ApprovalState.PENDING, error=str(exc))
            return 0
        log.info(
            "approved %s (%s) for %s via %s",
            record.event.event_id,
            record.event.event_type,
            approval.actor,
            approval.via,
        )
        return self._finish(record, approval, ApprovalState.POSTED, transition=transition)

    def _not_ready(self, record: EventRecord, approval: ApprovalRecord, answer: GateAnswer) -> int:
        """The event's VMs are not ready: wait for their prepare hooks, or hold for good."""
        if answer.wait:
            self._finish(record, approval, ApprovalState.WAITING, error=answer.wait)
            self._on_waiting()
            return 0
        log.warning("approval of %s held: %s", approval.event_id, answer.hold)
        note = f"Approval by {approval.actor} held: {answer.hold}. Nothing was sent to IMDS."
        return self._finish(
            record,
            approval,
            ApprovalState.HELD,
            error=answer.hold,
            problem=note,
            kind=TransitionKind.HELD,
        )

    def _abandon(self, approval: ApprovalRecord, record: EventRecord | None) -> None:
        why = "the event left IMDS" if record is None or not record.present else "it started"
        log.info("approval of %s not sent: %s first", approval.event_id, why)
        note = f"Approval by {approval.actor} not sent to IMDS: {why} first."
        if approval.state == ApprovalState.POSTING:
            # Claimed before by a process that stopped in the middle: its POST may have landed.
            note = (
                f"Approval by {approval.actor}: {why} before sebridge could confirm "
                "StartRequests (an earlier attempt was cut short and may have reached IMDS)."
            )
        self._finish(record, approval, ApprovalState.ABANDONED, error=f"{why} first", problem=note)

    def _finish(
        self,
        record: EventRecord | None,
        approval: ApprovalRecord,
        state: str,
        *,
        error: str | None = None,
        transition: Transition | None = None,
        problem: str = "",
        kind: str = TransitionKind.PROBLEM,
    ) -> int:
        """Record the outcome; if the store cannot take it now, at the next round."""
        if problem and record is not None:
            transition = Transition(
                kind,
                record.event,
                self._clock(),
                actor=approval.actor,
                via=approval.via,
                note=problem,
            )
        sinks = self._sinks_for(record.policy) if record is not None and transition else ()
        finish = _Finish(approval.event_id, state, error, transition, sinks, approval.via)
        try:
            self._record(finish)
        except StoreError as exc:
            log.warning("the outcome of %s's approval is recorded later: %s", finish.event_id, exc)
            self._unrecorded.append(finish)
            return 0
        return 0 if state in (ApprovalState.PENDING, ApprovalState.WAITING) else 1

    def _record(self, finish: _Finish) -> None:
        taken = self._store.finish_approval(
            finish.event_id,
            finish.state,
            self._clock(),
            error=finish.error,
            transition=finish.transition,
            sinks=finish.sinks,
        )
        if not taken:  # our lease ended and another agent claimed it meanwhile
            log.warning("the approval of %s passed to another agent meanwhile", finish.event_id)
            return
        self._metrics.approval_ended(finish.via, finish.state)  # here: once, even in a fleet

    def _record_unrecorded(self) -> int:
        done = 0
        while self._unrecorded:
            finish = self._unrecorded[0]
            self._record(finish)  # a StoreError ends the round: tried again at the next
            self._unrecorded.pop(0)
            done += finish.state not in (ApprovalState.PENDING, ApprovalState.WAITING)
        return done

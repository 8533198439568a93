"""The carrier: the one thread of an agent that carries approvals out.

It claims pending approvals (store/approvals.py: only of events this agent's
IMDS lists), POSTs StartRequests for each event still in IMDS's document and
not started, and records what happened with the transition that announces it
("approved by X", "would_approve" in dry run, or a problem), in one
transaction (outcomes.py). A POST that IMDS did not answer is put back and
tried again RETRY_DELAY later. Each POST is recorded as begun before it goes
out, under the claim (Store.approvals.begin_post), until IMDS answers it: an approval
with a POST IMDS never answered (a crash in the middle, a timeout: `maybe_sent`)
whose event then started or left is announced as sent, since that POST may
well be what started it; never as "not sent".

A round the store cuts short (an error reading an event, or in the readiness
gate) leaves approvals claimed whose POST never began: the next round puts
them back before it claims again, so they are carried out at once, not after
the claim's lease. One whose POST began is never put back blindly: its
outcome is recorded (outcomes.py keeps it while the store is away), or its
lease runs out and the next claim knows a POST may have reached IMDS.

Channels never POST: they record an approval and wake the carrier (usecase.py).
The carrier runs on its own thread, the kernel's worker named `approvals`
(start()): in the daemon, and in `sebridge approve` holding the store alone;
`sebridge once` and the tests run one round on theirs (run_once()).
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext
from datetime import datetime, timedelta

from sebridge.approval.counts import NOT_COUNTED, ApprovalCounts
from sebridge.approval.gate import GO, Gate, GateAnswer
from sebridge.approval.outcomes import Outcomes
from sebridge.imds import ImdsClient
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import ImdsError, ImdsRequestError, ImdsTimeoutError, StoreError
from sebridge.kernel.worker import Worker
from sebridge.model import Transition, TransitionKind
from sebridge.model.approval import ApprovalState
from sebridge.model.decision import Decision
from sebridge.model.records import ApprovalRecord, EventRecord
from sebridge.model.wording import outlook
from sebridge.store import Store

__all__ = ["CLAIM_LEASE", "RETRY_DELAY", "Carrier", "anyway_note"]

log = logging.getLogger("sebridge.approve")

# A claimant that is alive but stuck (a POST that never returns) loses its claim after
# this; a dead one loses it at once (store/approvals.py).
CLAIM_LEASE = timedelta(seconds=60)
# An approval IMDS did not take (no answer, 5xx) is tried again this much later: the
# default poll interval, well within IMDS's 5 requests a second.
RETRY_DELAY = timedelta(seconds=1)


class Carrier:
    """Claims approvals, POSTs StartRequests, records the outcome; one thread per agent.

    Args:
        sinks_for: the sinks an event's transitions go to, by its decision (its
            action and the rule's notify).
        dry_run: record and announce, never POST.
        on_recorded: called after a round that claimed or recorded something.
        gate: whether an event's VMs are ready for StartRequests (readiness hooks).
        batch: what a round runs within (the daemon's Subscriptions.batch: its commits wake
            other parts once, at its end).
        metrics: counts the approvals this carrier settles (default: nothing counts them).
    """

    def __init__(
        self,
        store: Store,
        imds: ImdsClient,
        sinks_for: Callable[[Decision], Sequence[str]],
        *,
        dry_run: bool = False,
        clock: Clock = utcnow,
        on_recorded: Callable[[], None] = lambda: None,
        gate: Gate = lambda record: GO,
        batch: Callable[[], AbstractContextManager[object]] = nullcontext,
        metrics: ApprovalCounts = NOT_COUNTED,
    ) -> None:
        self._store = store
        self._gate = gate
        self._batch = batch
        self._imds = imds
        self._outcomes = Outcomes(store, sinks_for, clock, metrics)
        self._dry_run = dry_run
        self._clock = clock
        self._on_recorded = on_recorded
        # Our thread and run_once() take turns: two rounds at once would claim and POST
        # one approval twice.
        self._turn = threading.Lock()
        # Claimed by a round, their POST not begun: put back by the next round.
        self._unbegun: dict[str, ApprovalRecord] = {}
        # How many approvals reached an end state here (a tick's `approvals_done`).
        self.settled = 0
        # No round before the first wake: until the first tick recorded IMDS's document,
        # the store's is the one from before a restart (an event may have started since).
        self._woken = threading.Event()
        # The earliest time a waiting approval's readiness changes with no hook ending (a VM
        # whose agent stopped answering stops being waited for): the next round is due then.
        self._recheck: datetime | None = None
        self._worker = Worker(
            "approvals", self.carry_out_due, expected=(StoreError,), logger=log, clock=clock
        )

    # -- life -----------------------------------------------------------------------------------

    def start(self) -> None:
        """Carry approvals out on a thread of our own from now on (the daemon)."""
        self._worker.start()

    def stop(self, timeout: float = 0.0) -> bool:
        """Stop the thread; a POST in flight may finish within `timeout`. True once ended."""
        return self._worker.stop(timeout)

    # Woken by these tables' writes (kernel/subscriptions.py): an approval stored, a VM's
    # readiness changed (a hook ran).
    WAKES_ON = frozenset(("approvals", "hook_runs"))

    def wake(self) -> None:
        """Carry out what is pending: a round on our thread soon (the first tick's wake, a
        person's request: rounds may begin from now on)."""
        self._woken.set()
        self._worker.wake()

    def look(self) -> None:
        """A write to our tables was heard: a round soon, once rounds may begin (a commit
        before the first tick, e.g. claims taken back at start, begins none)."""
        self._worker.wake()

    def on_own_thread(self) -> bool:
        """Whether the caller is our thread (its own writes do not wake it)."""
        return self._worker.on_own_thread()

    def run_once(self) -> int:
        """One round on the caller's thread (`sebridge once`, tests), counted as one of our
        rounds (a request waiting for one sees it end); how many approvals reached an end
        state."""
        self._woken.set()
        settled = self.settled
        self._worker.run_once()
        return self.settled - settled

    # -- waiting for an outcome ------------------------------------------------------------------

    @property
    def rounds(self) -> int:
        """How many rounds our thread finished (read before looking at the store, then
        wait_round)."""
        return self._worker.rounds

    def wait_round(self, after: int, timeout: float) -> bool:
        """Wait until a round later than `after` finished on our thread, at most `timeout`
        seconds; True when one did."""
        return self._worker.wait_round(after, timeout)

    # -- the work ------------------------------------------------------------------------------

    def carry_out_due(self) -> datetime | None:
        """The worker's round: carry out what is due, under the turn lock; when the next is
        due (None: when woken)."""
        if not self._woken.is_set():
            return None
        with self._batch(), self._turn:
            return self._carry()[1]

    def _carry(self) -> tuple[int, datetime | None]:
        """Put back what a cut-short round left claimed, record kept outcomes, claim and
        carry out; how many approvals ended, and when the next round is due."""
        self._put_back()
        done = self._outcomes.record_unrecorded()
        now = self._clock()
        claimed = []
        self._recheck = None
        if self._store.approvals.has_pending(now, waiting=True):
            claimed = self._store.approvals.claim(now, CLAIM_LEASE)
            self._unbegun = {approval.event_id: approval for approval in claimed}
            for approval in claimed:
                if self._worker.stopping:  # the rest go back now, for the next process
                    break
                done += self._carry_out(approval)
            self._put_back()
        self.settled += done
        if done or claimed:
            self._on_recorded()
        now = self._clock()
        retry = self._outcomes.waiting or self._store.approvals.has_pending(now)
        due = [now + RETRY_DELAY] if retry else []
        due += [self._recheck] if self._recheck is not None else []
        return done, min(due, default=None)

    def _put_back(self) -> None:
        """Put back the claims whose POST never began (a StoreError keeps them for the next
        round)."""
        if self._unbegun:
            self._store.approvals.put_back(list(self._unbegun.values()))
            self._unbegun.clear()

    def _settling(self, approval: ApprovalRecord) -> None:
        """The claim is no longer the put-back's: its POST begins, or its outcome is being
        recorded (kept in memory while the store cannot take it)."""
        self._unbegun.pop(approval.event_id, None)

    def _carry_out(self, approval: ApprovalRecord) -> int:
        record = self._store.events.get(approval.event_id)
        if record is None or not record.present or record.event.started:
            self._settling(approval)
            return self._outcomes.too_late(approval, record)
        # A POST that may have gone out already passed the gate: holding it now would
        # say "nothing was sent to IMDS", which may be false.
        answer = GO if self._dry_run or approval.maybe_sent else self._gate(record)
        actor, via, actor_id = approval.actor, approval.via, approval.actor_id
        if (answer.wait or answer.hold) and approval.anyway_by is not None:
            # Approve anyway: someone asked for it despite the unready VMs; say who and which.
            actor, via, actor_id = approval.decider
            answer = GateAnswer(note=anyway_note(actor, answer))
        if answer.wait or answer.hold:
            self._settling(approval)
            return self._not_ready(record, approval, answer)
        transition = Transition(
            kind=TransitionKind.WOULD_APPROVE if self._dry_run else TransitionKind.APPROVED,
            event=record.event,
            at=self._clock(),
            actor=actor,
            via=via,
            dry_run=self._dry_run,
            note=answer.note,
            actor_id=actor_id,
        )
        if self._dry_run:
            self._settling(approval)
            return self._outcomes.finish(
                record, approval, ApprovalState.DRY_RUN, transition=transition
            )
        return self._post(record, approval, transition)

    def _post(self, record: EventRecord, approval: ApprovalRecord, transition: Transition) -> int:
        """POST StartRequests under the claim and record what IMDS said."""
        # Committed before the POST: should we die before recording its outcome, the next
        # claim knows it may have reached IMDS.
        began = self._store.approvals.begin_post(approval, self._clock() + CLAIM_LEASE)
        self._settling(approval)  # from here on, a POST may reach IMDS: never put back blindly
        if not began:
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
                "approval of %s not sent yet (%s); trying again shortly", approval.event_id, exc
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
            # The news (a VM whose agent stopped answering) is keyed by what it says: every
            # round and agent that finds it records it once.
            self._outcomes.finish(
                record, approval, ApprovalState.WAITING, error=answer.wait, problem=answer.news
            )
            if answer.recheck is not None:
                self._recheck = min(answer.recheck, self._recheck or answer.recheck)
            return 0  # its `approvals` write wakes the hook worker
        log.warning("approval of %s held: %s", approval.event_id, answer.hold)
        note = f"Approval by {approval.actor} held: {answer.hold}. Nothing was sent to Azure."
        return self._outcomes.finish(
            record,
            approval,
            ApprovalState.HELD,
            error=answer.hold,
            problem=note,
            kind=TransitionKind.HELD,
        )


def anyway_note(actor: str, answer: GateAnswer) -> str:
    """What an approval carried out anyway says: by whom, and which VMs were not ready and
    why (the gate's wait or hold when it names none)."""
    return outlook.anyway_note(actor, answer.unready or answer.hold or answer.wait)

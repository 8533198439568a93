"""The approval use case: a request from any channel in, one outcome out.

`Approvals.request()` asks the one rule (model/approval.py: blocker) whether an
approval of the event would be carried out now, records it once (a second
request finds the first), wakes the carrier and waits, bounded, until the
approval was carried out or put back, so the person's page or reply says what
really happened: approved now, already approved by whom and when, refused and
why, or held and why. Nothing here POSTs: the carrier does, on its own thread
(carrier.py); the wait counts the carrier's rounds (its worker's).
See docs/ARCHITECTURE.md, "Approve".
"""

from __future__ import annotations

import time
from collections.abc import Callable, Sequence

from sebridge.approval.carrier import Carrier
from sebridge.approval.counts import NOT_COUNTED, ApprovalCounts
from sebridge.kernel.clock import Clock, utcnow
from sebridge.model import Approval, Transition, TransitionKind
from sebridge.model.approval import BY_APPROVAL, ApprovalState, Blocker, OutcomeKind
from sebridge.model.approval_request import ApprovalRequest, Outcome
from sebridge.model.decision import Decision, offers_approval
from sebridge.model.readiness import HOLDING, VmReadiness, VmState
from sebridge.model.records import ApprovalRecord, AuditEntry, EventRecord
from sebridge.model.wording.approvals import (
    already_approved,
    held_note,
    no_reason_for_anyway,
    refusal,
    state_note,
)
from sebridge.model.wording.outlook import ways_out_of
from sebridge.store import Store

__all__ = ["DEFAULT_WAIT", "Approvals"]

# How long a request waits for the carrier (a POST takes milliseconds; IMDS's timeout
# and the client's retries bound a slow one). A person then hears "held" and why.
DEFAULT_WAIT = 10.0
# While no local carrier can say a round ended (another process or agent carries it
# out), the store is looked at this often.
_LOOK_EVERY = 0.05
# How long past its wait a request looks again at an approval a round holds at that instant
# (a POST to IMDS under way takes its timeout at most; a look at the VMs, milliseconds).
_CLAIM_GRACE = 2.0


class Approvals:
    """Approve, take, and read events for the channels (Slack, link page, Jira, CLI, demo).

    Args:
        carrier: this process's carrier; None when another process carries approvals
            out (the CLI beside a running daemon): the request then waits for the store.
        sinks_for: the sinks an event's transitions go to, by its decision (its
            action and the rule's notify).
        on_recorded: called after a transition was queued (wakes the dispatcher).
        metrics: counts the requests answered without the carrier (already approved,
            refused before anything was recorded); the carrier counts the rest.
        readiness_of: an event's listed VMs' readiness: the ways out of a hold name a
            silent agent's coming back, and `hooks retry` only when a hook failed.
    """

    def __init__(
        self,
        store: Store,
        carrier: Carrier | None,
        sinks_for: Callable[[Decision], Sequence[str]],
        *,
        clock: Clock = utcnow,
        on_recorded: Callable[[], None] = lambda: None,
        metrics: ApprovalCounts = NOT_COUNTED,
        readiness_of: Callable[[EventRecord], Sequence[VmReadiness]] = lambda record: (),
    ) -> None:
        self._readiness_of = readiness_of
        self._store = store
        self._carrier = carrier
        self._metrics = metrics
        self._sinks_for = sinks_for
        self._clock = clock
        self._on_recorded = on_recorded

    def request(
        self, req: ApprovalRequest, *, wait: float = DEFAULT_WAIT, through_readiness: bool = False
    ) -> Outcome:
        """Approve `req.event_id` for `req.actor`; the outcome once known (or after `wait`).
        An approval that waits for its VMs' prepare hooks is answered at once ("waiting"),
        unless `through_readiness`: then it is waited for too, until carried out, held, or
        `wait` is over (`sebridge approve --wait`)."""
        record = self._store.events.get(req.event_id.strip())
        if record is None:
            return self._refused(req, _refused(req.event_id, Blocker.UNKNOWN, None))
        event_id = record.event.event_id
        blocked = record.blocker()
        if blocked is not None and blocked not in BY_APPROVAL:
            return self._refused(req, _refused(event_id, blocked, record))
        if blocked is None and req.anyway and not _delayed(self._readiness_of(record)):
            return self._refused(req, _no_reason_for_anyway(event_id, record))
        if blocked is None:
            asked = Approval(event_id, req.actor, req.via, self._clock(), req.actor_id)
            new = self._store.approvals.record(asked, anyway=req.anyway)
        else:  # approve anyway turns one held or waiting for readiness into one carried out
            new = req.anyway and self._store.approvals.anyway(
                event_id, req.actor, req.via, req.actor_id
            )
        if new and self._carrier is not None:
            self._carrier.wake()
        approval = self._settled(event_id, wait, anyway=(req.anyway and new) or through_readiness)
        fresh = self._store.events.get(event_id) or record
        if not new and approval.state in (ApprovalState.HELD, ApprovalState.WAITING):
            # Held too, and told why; the attempt is news (history, every sink).
            self._note_held(req, approval, fresh)
            return Outcome(OutcomeKind.HELD, event_id, state_note(approval), approval, fresh)
        if not new:
            self._metrics.approval_settled(req.via, OutcomeKind.ALREADY)
            self.refuse(req, already_approved(approval))
            note = state_note(approval)
            return Outcome(OutcomeKind.ALREADY, event_id, note, approval, fresh)
        return _outcome(event_id, approval, fresh)

    @property
    def carries(self) -> bool:
        """Whether this process carries approvals out itself (no daemon holds the store: no
        hook runs here, so nothing changes while a request would wait for readiness)."""
        return self._carrier is not None

    def take(self, event_id: str, actor: str, via: str, actor_id: str | None = None) -> bool:
        """ "I'm on it": announce that someone handles the event, without approving it.
        False when the event is unknown or gone (nothing to take)."""
        record = self._store.events.get(event_id.strip())
        if record is None or not record.present:
            return False
        now = self._clock()
        taken = Transition(
            TransitionKind.TAKEN, record.event, now, actor=actor, via=via, actor_id=actor_id
        )
        self._store.transitions.record(taken, self._sinks_for(record.decision), now)
        self._on_recorded()
        return True

    def event(self, event_id: str) -> EventRecord | None:
        """One event as the store holds it (ids match case-insensitively)."""
        return self._store.events.get(event_id.strip())

    def open_events(self) -> list[EventRecord]:
        """Events in IMDS's document whose policy offers an approval (not "inform") and that
        nobody approved yet (an approval would be carried out now, or would be held), those
        that started meanwhile (a person who still tries is told why not), and those whose
        approval is held and that can still start on it (one who approves too is told it is
        held and why: _note_held)."""
        return [
            r
            for r in self._store.events.current()
            if offers_approval(r.policy)
            and (
                r.blocker() in (None, Blocker.STARTED)
                or (r.blocker() == Blocker.HELD and not r.event.started)
            )
        ]

    def refuse(self, req: ApprovalRequest, why: str) -> None:
        """Keep a refusal a channel decided on its own (not an approver, a refused CLI call)
        beside the history: `sebridge history` shows it."""
        self._store.history.audit(
            AuditEntry(self._clock(), req.event_id, req.actor, req.via, "refused", why)
        )

    def _refused(self, req: ApprovalRequest, outcome: Outcome) -> Outcome:
        """A request refused before anything was recorded: counted. The channel keeps it for
        history (refuse()) when a person asked: the Jira search asks again every round."""
        self._metrics.approval_settled(req.via, OutcomeKind.REFUSED)
        return outcome

    def _note_held(
        self, req: ApprovalRequest, approval: ApprovalRecord, record: EventRecord
    ) -> None:
        """Announce an approval asked for and not carried out because the event's approval is
        held or waits for readiness: one note per (event, who, what it came to), so a
        double click says it once; every sink hears it, as a problem."""
        held = approval.state == ApprovalState.HELD
        out = ways_out_of(record.event.event_id, self._readiness_of(record), held=held)
        note = held_note(req.actor, approval, out)
        now = self._clock()
        problem = Transition(
            TransitionKind.PROBLEM,
            record.event,
            now,
            actor=req.actor,
            via=req.via,
            note=note,
            actor_id=req.actor_id,
        )
        self._store.transitions.record(problem, self._sinks_for(record.decision), now)
        self._on_recorded()

    def _settled(self, event_id: str, wait: float, *, anyway: bool = False) -> ApprovalRecord:
        """The approval once the carrier is done with it (carried out, refused, abandoned, or
        put back after a failed POST), or as it stands after `wait` seconds. With `anyway`
        (one turned anyway, or a caller that waits through readiness) one that waits for
        its VMs is not done: the carrier has yet to let it through or hold it."""
        deadline = time.monotonic() + wait
        while True:
            rounds = self._carrier.rounds if self._carrier is not None else 0
            approval = self._store.approvals.get(event_id)
            assert approval is not None  # recorded before we got here; approvals are never deleted
            left = deadline - time.monotonic()
            # Done with: carried out or closed, put back after an attempt (IMDS failed), or
            # waiting for the VMs' prepare hooks (minutes, not seconds: say so now).
            put_back = approval.state == ApprovalState.PENDING and approval.attempts > 0
            waiting = approval.state == ApprovalState.WAITING and not anyway
            if not approval.open or put_back or waiting:
                return approval
            # Past the deadline: as it stands, unless a round holds it this instant (claimed
            # to POST, or to look at its VMs again): its outcome is a moment away, and the
            # claim itself would tell the person nothing ("recorded (posting)").
            claimed = approval.state == ApprovalState.POSTING and left > -_CLAIM_GRACE
            if left <= 0 and not claimed:
                return approval
            pause = min(left, _LOOK_EVERY) if left > 0 else _LOOK_EVERY
            if self._carrier is not None:
                self._carrier.wait_round(rounds, pause)
            else:
                time.sleep(pause)


def _outcome(event_id: str, approval: ApprovalRecord, record: EventRecord) -> Outcome:
    """What this request's own approval came to."""
    if approval.carried_out:
        return Outcome(OutcomeKind.APPROVED, event_id, state_note(approval), approval, record)
    if approval.state in (ApprovalState.FAILED, ApprovalState.ABANDONED):
        return Outcome(OutcomeKind.REFUSED, event_id, state_note(approval), approval, record)
    return Outcome(OutcomeKind.HELD, event_id, state_note(approval), approval, record)


# What readiness says that makes an approval anyway mean something: a VM whose hook failed or
# whose agent is silent (it would hold), or one still preparing (it would wait).
_DELAYING = (*HOLDING, VmState.PREPARING, VmState.SILENT)


def _delayed(readiness: Sequence[VmReadiness]) -> bool:
    """Whether readiness holds or delays an approval of the event now: approve anyway is for
    exactly that. A failed hook due to run again (`retries`) waits too."""
    return any(v.state in _DELAYING or (v.state == VmState.WAITING and v.why) for v in readiness)


def _no_reason_for_anyway(event_id: str, record: EventRecord) -> Outcome:
    """Approve anyway on an event nobody approved and nothing holds or delays: it would send
    StartRequests before its prepare hooks even began. Refused, with the plain command."""
    reason = no_reason_for_anyway(event_id)
    return Outcome(OutcomeKind.REFUSED, event_id, reason, None, record, None)


def _refused(event_id: str, blocked: Blocker, record: EventRecord | None) -> Outcome:
    reason = refusal(event_id, blocked, record)
    return Outcome(OutcomeKind.REFUSED, event_id, reason, None, record, blocked)

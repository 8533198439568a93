"""What the store hands back: read-only records for the daemon, CLI and sinks."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sebridge.model import HookRun, Receipt, ScheduledEvent, Transition
from sebridge.model.approval import CARRIED_OUT, OPEN, ApprovalState, Blocker, blocker
from sebridge.model.decision import ASK, Decision

__all__ = [
    "ApprovalRecord",
    "AuditEntry",
    "Delivery",
    "DeliveryStatus",
    "EventRecord",
    "HistoryEntry",
    "HookRunRecord",
]


@dataclass(frozen=True)
class ApprovalRecord:
    """An approval and what became of it.

    state: an ApprovalState (pending, posting, posted, dry_run, failed, abandoned).
    unanswered counts its POSTs that IMDS never answered (a crash in the middle, a
    timeout): each may have reached IMDS.
    """

    event_id: str
    actor: str
    via: str
    at: datetime
    state: str
    attempts: int
    last_error: str | None
    done_at: datetime | None
    unanswered: int = 0
    # Approve anyway: who asked that it be carried out despite unready VMs (None: nobody).
    # `actor` is then the first, held approver, kept: both are part of the story.
    anyway_by: str | None = None
    anyway_via: str | None = None
    # The channel's own ids of `actor` and `anyway_by` (Slack member ids; None elsewhere).
    # The names above are what people read; an id lets Slack say a mention.
    actor_id: str | None = None
    anyway_id: str | None = None
    token: str = ""  # set by claim_approvals: the claim's (store/claims.py)

    @property
    def decider(self) -> tuple[str, str, str | None]:
        """Who decided that it goes (the one approving anyway, else the one who asked):
        (name, via, channel id)."""
        if self.anyway_by is not None:
            return self.anyway_by, self.anyway_via or self.via, self.anyway_id
        return self.actor, self.via, self.actor_id

    @property
    def maybe_sent(self) -> bool:
        """A POST of it went out and IMDS's answer never came (a crash, a timeout):
        StartRequests may have reached IMDS."""
        return self.unanswered > 0

    @property
    def carried_out(self) -> bool:
        """StartRequests went to IMDS (or would have, in dry run): "approved by" holds."""
        return self.state in CARRIED_OUT

    @property
    def open(self) -> bool:
        """Not carried out yet: the carrier still owes it a POST (or is sending it now)."""
        return self.state in OPEN

    @property
    def waits_for_readiness(self) -> bool:
        """It waits for the listed VMs' prepare hooks: waiting, or claimed (or put back) from
        waiting, never POSTed since (`last_error` is then the gate's wait, not IMDS's
        answer: "IMDS did not answer" would be false)."""
        if self.state == ApprovalState.WAITING:
            return True
        return self.open and self.attempts == 0 and bool(self.last_error)


@dataclass(frozen=True)
class DeliveryStatus:
    """One outbox row as `events` and `history` show it."""

    sink: str
    state: str  # pending, delivered, failed
    attempts: int
    last_error: str | None


@dataclass(frozen=True)
class EventRecord:
    """An event as the store knows it: last seen content plus our bookkeeping."""

    event: ScheduledEvent
    state: str  # the last transition kind
    decision: Decision  # what the policy decided when it was first seen
    present: bool  # in the latest document
    first_seen: datetime
    last_seen: datetime
    gone_at: datetime | None
    approval: ApprovalRecord | None
    deliveries: tuple[DeliveryStatus, ...] = ()

    @property
    def policy(self) -> str:
        """The decision's action: approve, ask, inform or ignore."""
        return self.decision.action

    def blocker(self, *, holding: bool = False) -> Blocker | None:
        """What keeps an approval of this event from being carried out now (None: nothing);
        model/approval.py: blocker(). holding: its readiness would hold one (would_hold)."""
        return blocker(
            approval=self.approval.state if self.approval else None,
            present=self.present,
            started=self.event.started,
            holding=holding,
        )

    def reminded_since(self) -> datetime | None:
        """Since when the event is reminded of (model/leads.py: lead_due); None: not now.
        While a person's approval would be carried out now (an "ask" event nobody approved,
        present, not started: the one answer the buttons and links give too), or while its
        approval is held (a prepare hook failed; Azure starts it at NotBefore all the
        same): not while one is carried out, under way or waiting for hooks."""
        if not self.decision.leads:
            return None
        blocker = self.blocker()
        if blocker is None and self.decision.action == ASK:
            return self.first_seen
        if blocker == Blocker.HELD and self.approval is not None:
            held = self.approval.done_at or self.first_seen
            return max(held, self.first_seen)
        return None


@dataclass(frozen=True)
class Delivery:
    """One outbox row claimed for a sink: deliver `transition` once.

    attempts counts finished attempts (for backoff); begun counts attempts
    that reached the sink, a crashed one included: begun > 0 means an
    earlier attempt may have landed.
    """

    id: int
    sink: str
    transition: Transition
    attempts: int
    receipt: Receipt | None  # what this sink returned earlier for the event
    policy: str
    gone_at: datetime | None  # when the event left the document (bounds retries)
    approved_by: str | None = None  # who approved the event, once IMDS has it (or dry run)
    approved_by_id: str | None = None  # approved_by's channel id (a Slack member id)
    approved_anyway: bool = False  # ... and that approval was carried out anyway
    event_state: str = ""  # the event's lifecycle state at the claim (events.state)
    approval_state: str | None = None  # the event's approval's state as claimed (None: none)
    begun: int = 0
    transition_id: int = 0  # the transition's row id: stable, the JSON lines sink writes it
    begun_by: str | None = None  # the agent that began the latest attempt (None: before v9)
    rule: str = ""  # the name of the rule that decided the event's action (`policy`)
    on_prepare_failure: str = "hold"  # that rule's: whether a failed prepare hook holds
    token: str = ""  # the claim's (store/claims.py): every write after the claim names it


@dataclass(frozen=True)
class HistoryEntry:
    """One transition with where it was delivered."""

    id: int
    at: datetime
    transition: Transition
    deliveries: tuple[DeliveryStatus, ...]


@dataclass(frozen=True)
class AuditEntry:
    """Something refused or noteworthy that is not a transition (a refused click)."""

    at: datetime
    event_id: str
    actor: str
    via: str
    action: str
    detail: str


@dataclass(frozen=True)
class HookRunRecord:
    """One hook's run for an event on one VM: state running, succeeded or failed."""

    event_id: str
    run: HookRun
    state: str
    started_at: datetime
    finished_at: datetime | None
    # A failed run that runs again: when its retries say (None: its failure is final) ...
    retry_at: datetime | None = None
    # ... or at once: a person asked (`sebridge hooks retry`) and it has not run since.
    asked: bool = False

    @property
    def retry_pending(self) -> bool:
        """A failed run that is to run again: not (yet) a final failure."""
        return self.state == "failed" and (self.asked or self.retry_at is not None)

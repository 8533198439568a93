"""The approval states, the answers a person gets, and the one rule that says whether an
event can still be approved.

Pure: the store, the sinks, the pages and the use case all ask here, so
"approved by", "can be approved" and "gone" mean one thing everywhere.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum

from sebridge.model.decision import offers_anyway
from sebridge.model.readiness import HOLDING, VmReadiness

__all__ = [
    "BY_APPROVAL",
    "CARRIED_OUT",
    "OPEN",
    "ApprovalState",
    "Blocker",
    "OutcomeKind",
    "anyway_offered",
    "blocker",
    "would_hold",
]


class ApprovalState(StrEnum):
    """What became of an approval (the approvals table's `state`)."""

    PENDING = "pending"  # recorded, not POSTed yet (or put back after IMDS failed)
    POSTING = "posting"  # claimed by the agent POSTing it now
    POSTED = "posted"  # IMDS took StartRequests
    DRY_RUN = "dry_run"  # policy.dry_run: recorded and announced, never POSTed
    FAILED = "failed"  # IMDS refused it (400)
    ABANDONED = "abandoned"  # the event started or left IMDS first
    # Not POSTed yet: the event's listed VMs are still preparing (readiness hooks).
    # Claimed again when a hook ends (or at the heartbeat), not at every tick.
    WAITING = "waiting"
    # Never POSTed: a prepare hook failed and the rule says hold (on_prepare_failure).
    HELD = "held"


# "Approved by X" means one of these: StartRequests went out (or would have, dry run).
CARRIED_OUT: tuple[str, ...] = (ApprovalState.POSTED, ApprovalState.DRY_RUN)
# Not yet carried out: the carrier still owes it a POST.
OPEN: tuple[str, ...] = (ApprovalState.PENDING, ApprovalState.POSTING, ApprovalState.WAITING)


class OutcomeKind(StrEnum):
    """The four answers a person can get."""

    APPROVED = "approved"  # this request's approval was carried out (dry run: would have been)
    ALREADY = "already"  # someone approved it before: `approval` says who, when, what became of it
    REFUSED = "refused"  # not approved: `reason` says why (unknown, gone, started, IMDS refused)
    HELD = "held"  # recorded, not carried out yet: `reason` says what it waits for


class Blocker(StrEnum):
    """Why an event cannot take an approval now (any more)."""

    UNKNOWN = "unknown"  # never seen in an IMDS document
    # It has an approval already; what became of it:
    APPROVED = "approved"  # carried out: StartRequests went to IMDS (dry run: would have)
    UNDER_WAY = "under_way"  # not sent yet: the carrier owes it a POST (pending, posting)
    WAITING = "waiting"  # not sent yet: the listed VMs' prepare hooks still run
    HELD = "held"  # never sent: a prepare hook failed and the rule says hold
    NOT_SENT = "not_sent"  # never sent: IMDS refused it, or the event started or left first
    # It has none, and cannot take one:
    GONE = "gone"  # no longer in IMDS's document
    STARTED = "started"  # under way: nothing left to approve
    # It has none, and one would only be held: a listed VM's prepare hook failed before
    # anyone approved (the prepare lead) or its agent is silent, and the rule holds. A person
    # may still approve (the approval is recorded and held); no channel offers a plain Approve.
    WOULD_HOLD = "would_hold"


# The blockers that are an approval: a second request hears of the first (who, what became
# of it), never "refused".
BY_APPROVAL: frozenset[Blocker] = frozenset(
    {Blocker.APPROVED, Blocker.UNDER_WAY, Blocker.WAITING, Blocker.HELD, Blocker.NOT_SENT}
)
_BY_STATE: dict[str, Blocker] = {
    ApprovalState.POSTED: Blocker.APPROVED,
    ApprovalState.DRY_RUN: Blocker.APPROVED,
    ApprovalState.PENDING: Blocker.UNDER_WAY,
    ApprovalState.POSTING: Blocker.UNDER_WAY,
    ApprovalState.WAITING: Blocker.WAITING,
    ApprovalState.HELD: Blocker.HELD,
    ApprovalState.FAILED: Blocker.NOT_SENT,
    ApprovalState.ABANDONED: Blocker.NOT_SENT,
}


def would_hold(readiness: Iterable[VmReadiness], on_prepare_failure: str, action: str) -> bool:
    """Whether what readiness says now would hold an approval of an event whose policy
    offers one (`action`: not "inform" nor "ignore", which ask nobody): a listed VM holds
    one (its prepare hook failed for good, or its agent is silent: model/readiness.py
    HOLDING) and the rule holds on a failure (`on_prepare_failure = "hold"`). A failed hook
    that runs again by itself (`retries`) reads as waiting: it holds nothing yet."""
    if on_prepare_failure != "hold" or not offers_anyway(action):
        return False
    return any(v.state in HOLDING for v in readiness)


def blocker(
    *,
    known: bool = True,
    approval: str | None,
    present: bool,
    started: bool,
    holding: bool = False,
) -> Blocker | None:
    """Would an approval of this event be carried out now? None if it would, else what
    stands in the way. The one answer every affordance asks (Approve buttons, links and
    the page, the Jira search, the use case, the demo).

    Args:
        approval: the state of the event's approval (ApprovalState), None when it has none.
        present: the event is in IMDS's latest document.
        started: the event is under way.
        holding: readiness would hold an approval now (`would_hold`); asked by those
            that know the event's readiness (messages, the page, `events`, reminders).

    In this order: an existing approval is named before the event's end, so a person
    who approves twice hears who approved first and what became of it, even after the
    event started. An approval in a state this version does not know stands in the way
    as one under way: never offered twice.
    """
    if not known:
        return Blocker.UNKNOWN
    if approval is not None:
        return _BY_STATE.get(approval, Blocker.UNDER_WAY)
    if not present:
        return Blocker.GONE
    if started:
        return Blocker.STARTED
    if holding:
        return Blocker.WOULD_HOLD
    return None


def anyway_offered(
    *, approval: str | None, present: bool, started: bool, holding: bool = False
) -> bool:
    """Whether "Approve anyway" is offered instead of Approve: the event's approval waits for
    its VMs' prepare hooks or is held by a failed one, or nobody approved it and one would
    only be held (`holding`), and the event can still start on it (present, not started).
    Approve anyway is the use case's (usecase.py) for exactly these."""
    waits = approval in (ApprovalState.WAITING, ApprovalState.HELD)
    return (waits or (approval is None and holding)) and present and not started

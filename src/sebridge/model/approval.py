"""The approval states, the answers a person gets, and the one rule that says whether an
event can still be approved.

Pure: the store, the sinks, the pages and the use case all ask here, so
"approved by", "can be approved" and "gone" mean one thing everywhere.
"""

from __future__ import annotations

from enum import StrEnum

__all__ = ["CARRIED_OUT", "OPEN", "ApprovalState", "Blocker", "OutcomeKind", "blocker"]


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
    """Why an event cannot take an approval (any more)."""

    UNKNOWN = "unknown"  # never seen in an IMDS document
    APPROVED = "approved"  # it has an approval already (whatever became of it)
    GONE = "gone"  # no longer in IMDS's document
    STARTED = "started"  # under way: nothing left to approve


def blocker(*, known: bool = True, approved: bool, present: bool, started: bool) -> Blocker | None:
    """Whether an event can still be approved: None if it can, else what stands in the way.

    In this order: an existing approval is named before the event's end, so a
    person who approves twice hears who approved first, even after it started.
    """
    if not known:
        return Blocker.UNKNOWN
    if approved:
        return Blocker.APPROVED
    if not present:
        return Blocker.GONE
    if started:
        return Blocker.STARTED
    return None

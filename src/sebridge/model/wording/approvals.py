"""What became of an approval, and why one was refused, as a person reads it.

The approval use case (approval/usecase.py) decides; these say it, the same
on every channel: a Slack reply, the approval page, a Jira comment, a CLI
line, history. Waiting for the VMs' readiness (nothing sent) is never said as
IMDS not answering.
"""

from __future__ import annotations

from sebridge.model.approval import ApprovalState, Blocker
from sebridge.model.records import ApprovalRecord, EventRecord
from sebridge.model.wording.outlook import approve_command

__all__ = ["already_approved", "held_note", "no_reason_for_anyway", "refusal", "state_note"]

_NOTES = {
    ApprovalState.POSTED: "StartRequests sent to Azure",
    ApprovalState.DRY_RUN: "dry run (policy.dry_run): nothing sent to Azure",
    ApprovalState.FAILED: "IMDS refused it: {error}",
    ApprovalState.ABANDONED: "not sent to Azure: {error}",
    ApprovalState.HELD: "held: {error}; nothing sent to Azure",
    ApprovalState.WAITING: "{error}; StartRequests goes to Azure once they succeed",
}


def state_note(approval: ApprovalRecord) -> str:
    """What became of an approval, for people: "StartRequests sent to Azure", "held: ...".
    One waiting for the VMs' readiness (nothing sent) is never said as IMDS not answering."""
    if approval.state in _NOTES:
        return _NOTES[ApprovalState(approval.state)].format(error=approval.last_error)
    if approval.waits_for_readiness:  # claimed from waiting, or put back: still the wait
        return _NOTES[ApprovalState.WAITING].format(error=approval.last_error)
    if approval.last_error:
        return f"IMDS did not take it yet ({approval.last_error}); sebridge retries at every poll"
    return "not sent yet: a daemon whose IMDS lists the event sends StartRequests"


def already_approved(approval: ApprovalRecord) -> str:
    """A second request's refusal, as history keeps it: "already approved by alice (posted):
    StartRequests sent to Azure"."""
    return f"already approved by {approval.actor} ({approval.state}): {state_note(approval)}"


def held_note(actor: str, approval: ApprovalRecord, ways_out: str) -> str:
    """An approval asked for while the event's approval is held or waits for readiness: the
    note every sink hears, with the ways out."""
    return f"Approval by {actor} not carried out: {state_note(approval)}. {ways_out}"


_BLOCKED = {
    Blocker.UNKNOWN: "unknown event {id}: sebridge has not seen it in any IMDS document "
    "(see `sebridge events`)",
    Blocker.GONE: "event {id} ({type}) is gone from IMDS ({state}): nothing to approve",
    Blocker.STARTED: "event {id} ({type}) has already started: nothing to approve",
}


def refusal(event_id: str, blocked: Blocker, record: EventRecord | None) -> str:
    """Why nothing was recorded: the event is unknown, gone or started (`blocked`)."""
    return _BLOCKED[blocked].format(
        id=record.event.event_id if record else event_id,
        type=record.event.event_type if record else "",
        state=record.state if record else "",
    )


def no_reason_for_anyway(event_id: str) -> str:
    """Approve anyway asked where nothing holds or delays an approval: the plain command."""
    return (
        f"nothing holds or delays an approval of {event_id}: approve it with"
        f" `{approve_command(event_id)}` (its prepare hooks run first, then StartRequests"
        " goes to Azure); --anyway is for an approval readiness holds or delays"
    )

"""Pure data: what IMDS told us, in our own names.

IMDS's PascalCase fields are mapped onto these in `sebridge.imds` and nowhere
else. Values IMDS may add in the future (a new EventType, a new EventStatus,
extra fields) are kept as they came, never rejected: the enums below name the
documented values for comparison, the fields stay plain strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from types import MappingProxyType
from typing import Any

from sebridge.model.leads import Lead

__all__ = [
    "AGAIN_RESTART",
    "AGAIN_RETRY",
    "Approval",
    "Document",
    "EventSource",
    "EventStatus",
    "EventType",
    "HookRun",
    "Incarnation",
    "Receipt",
    "ScheduledEvent",
    "Transition",
    "TransitionKind",
    "UnreadableEvent",
]


def _no_extra() -> Mapping[str, Any]:
    return MappingProxyType({})


class EventType(StrEnum):
    """The documented impact of an event (others may appear and are kept)."""

    FREEZE = "Freeze"
    REBOOT = "Reboot"
    REDEPLOY = "Redeploy"
    PREEMPT = "Preempt"
    TERMINATE = "Terminate"


class EventStatus(StrEnum):
    """Documented statuses. There is no "Completed": a finished event disappears."""

    SCHEDULED = "Scheduled"
    STARTED = "Started"


class EventSource(StrEnum):
    """Who initiated the event (field present from api-version 2019-08-01)."""

    PLATFORM = "Platform"
    USER = "User"


@dataclass(frozen=True)
class ScheduledEvent:
    """One event of a Scheduled Events document.

    Args:
        not_before: when the event may start, in UTC; None once started ("")
            or when IMDS sent nothing we could read as a time.
        not_before_text: NotBefore exactly as sent (None when absent), so a
            time we could not parse is still shown to people.
        description, source, duration_seconds: None when the api-version in
            use does not carry the field. duration_seconds -1 means unknown.
        extra: fields IMDS sent that this version of sebridge does not know.
    """

    event_id: str
    event_type: str
    status: str
    resources: tuple[str, ...] = ()
    resource_type: str = ""
    not_before: datetime | None = None
    not_before_text: str | None = None
    description: str | None = None
    source: str | None = None
    duration_seconds: int | None = None
    extra: Mapping[str, Any] = field(default_factory=_no_extra, compare=False)

    @property
    def started(self) -> bool:
        """IMDS says the event is under way."""
        return self.status == EventStatus.STARTED

    @property
    def user_initiated(self) -> bool:
        """The VM's owner asked for it (restart, redeploy from portal, API or CLI)."""
        return self.source == EventSource.USER

    def affects(self, vm_name: str) -> bool:
        """Whether `vm_name` is in Resources.

        api-version 2017-03-01 prefixed IaaS VM names with "_"; both spellings match.
        """
        return any(r in (vm_name, f"_{vm_name}") for r in self.resources)


# DocumentIncarnation: a number from IMDS, but any JSON scalar from others' fixtures
# ("abc123", 1.5, true). Only ever compared for equality: an opaque token.
Incarnation = int | float | str | bool


@dataclass(frozen=True)
class UnreadableEvent:
    """An event IMDS lists that sebridge cannot follow: its EventId holds NUL or a lone
    surrogate, so it can be neither stored nor sent back (no approval can reach IMDS). It is
    announced once, as a problem, on a stand-in: the event as read, under an id derived
    from the real one (stable and displayable). See docs/ARCHITECTURE.md, "Hostile text".

    Args:
        stand_in: the event as read, its `event_id` the stand-in's ("unreadable-<hash>").
        why: what makes it unreadable, for people ('its EventId "a\\u0000b" holds NUL').
    """

    stand_in: ScheduledEvent
    why: str

    def note(self) -> str:
        """What every sink is told, once."""
        e = self.stand_in
        if e.started:
            return f"IMDS lists an event sebridge cannot read ({self.why}); it has started"
        when = f", {e.not_before:%Y-%m-%d %H:%M:%S} UTC," if e.not_before else ""
        return (
            f"IMDS lists an event sebridge cannot read ({self.why}); it starts at "
            f"NotBefore{when} without an approval"
        )


@dataclass(frozen=True)
class Document:
    """A whole Scheduled Events document: the incarnation, its events, and those it lists
    that sebridge cannot follow (`unreadable`: never among `events`)."""

    incarnation: Incarnation
    events: tuple[ScheduledEvent, ...] = ()
    extra: Mapping[str, Any] = field(default_factory=_no_extra, compare=False)
    unreadable: tuple[UnreadableEvent, ...] = ()

    def event(self, event_id: str) -> ScheduledEvent | None:
        """The event with this id, or None when the document does not hold it."""
        for event in self.events:
            if event.event_id == event_id:
                return event
        return None


class TransitionKind(StrEnum):
    """What happened to an event between two documents (or through an approval)."""

    SCHEDULED = "scheduled"  # first seen, Scheduled
    UNPLANNED = "unplanned"  # first seen already Started: host failure, nothing to approve
    CHANGED = "changed"  # NotBefore, Resources, Description or Duration moved
    APPROVED = "approved"  # our StartRequests POST succeeded
    # Dry run: an approval that would have been sent, and was not. Its own kind, so
    # nobody reading a JSON line or a Slack thread takes it for a real approval.
    WOULD_APPROVE = "would_approve"
    STARTED = "started"  # EventStatus became Started
    COMPLETED = "completed"  # gone after it started (or after approval / NotBefore)
    CANCELLED = "cancelled"  # gone before NotBefore, never started, never approved
    TAKEN = "taken"  # a person said "I'm on it" (Slack) without approving
    PROBLEM = "problem"  # an approval could not be carried out (IMDS refused it, too late)
    HOOK_STARTED = "hook_started"  # a readiness hook began on a VM (Transition.hook)
    HOOK_SUCCEEDED = "hook_succeeded"  # ... and exited 0
    HOOK_FAILED = "hook_failed"  # ... and exited non-zero, timed out or could not start
    # An approval not carried out because a prepare hook failed (on_prepare_failure hold).
    HELD = "held"
    # An event announced again at a lead: nobody approved it (`ask`), or its approval is held.
    REMINDER = "reminder"
    # An alarm: the event started while a listed VM's prepare hooks had failed or not
    # finished (at NotBefore, or approved anyway). `note` names those VMs. Once per event.
    STARTED_UNREADY = "started_unready"
    # A person asked the failed prepare hooks to run again (`sebridge hooks retry`): `note`.
    HOOKS_RETRY = "hooks_retry"
    # The hook steps folded into one message, for a channel that does not want each step
    # (mail, Teams): every listed VM's prepare hooks succeeded, or one failed for good
    # (`note` says which). Keyed by its note, so a fleet's agents record it once.
    READY = "ready"


@dataclass(frozen=True)
class HookRun:
    """One run of a readiness hook on one VM, as its transitions tell it.

    Args:
        stage: "prepare" (before StartRequests) or "recover" (after the event ended).
        attempt: 1, or more for every run after the first (a restart interrupted one,
            a retry): counts every run of the hook for this event on this VM.
        exit_code, timed_out, seconds, output, why: once it ended (output: its tail).
        again: why this is not the first run: "" (it is), AGAIN_RESTART, AGAIN_RETRY,
            or "asked by X" (`sebridge hooks retry`).
        retry, retries: a prepare hook's try of its budget (0 the first, 1 the first retry)
            and how many retries the hook has ([hooks.<name>] retries).
        retry_at: for a failed run, when it runs again (None: this failure is final).
    """

    hook: str
    stage: str
    vm: str
    attempt: int = 1
    exit_code: int | None = None
    timed_out: bool = False
    seconds: float | None = None
    output: str = ""
    why: str = ""
    again: str = ""
    retry: int = 0
    retries: int = 0
    retry_at: str | None = None  # ISO 8601 UTC (a transition's JSON keeps it as text)


# HookRun.again: a restart interrupted the run before; the hook's retries ran it again.
AGAIN_RESTART, AGAIN_RETRY = "restart", "retry"


@dataclass(frozen=True)
class Transition:
    """One step of an event's life, delivered to every sink once.

    Args:
        event: the event as of this transition; for completed and cancelled,
            as it was last seen.
        changes: for CHANGED, the names of the fields that moved
            ("not_before", "resources", "description", "duration_seconds").
        actor, via: for APPROVED, WOULD_APPROVE (and TAKEN), who and through
            what ("cli", "slack", "link", "policy"); `actor` as people call them (a
            Slack approver's name, not the member id).
        actor_id: the channel's own id of `actor` (a Slack member id: Slack says it as
            a mention); None for everyone else.
        dry_run: for WOULD_APPROVE, nothing was POSTed to IMDS (policy.dry_run).
        note: for PROBLEM and HELD, what went wrong, for people; for STARTED_UNREADY,
            the VMs that were not ready and why.
        hook: for HOOK_STARTED, HOOK_SUCCEEDED and HOOK_FAILED, which run.
        remind_before: for REMINDER, the lead (seconds before NotBefore) it is for.
        remind_after: for REMINDER, the lead (seconds after the event was first
            announced) it is for; a reminder has one of the two.
        while_held: for REMINDER, the event's approval was held when it was recorded
            (else nobody had approved it).
        unreachable: for SCHEDULED, the rule's reminder leads this event's notice can
            never reach (model/leads.py), said once, here.
    """

    kind: str
    event: ScheduledEvent
    at: datetime
    changes: tuple[str, ...] = ()
    actor: str | None = None
    via: str | None = None
    dry_run: bool = False
    note: str = ""
    hook: HookRun | None = None
    remind_before: int | None = None
    remind_after: int | None = None
    while_held: bool = False
    unreachable: tuple[Lead, ...] = ()
    actor_id: str | None = None

    @property
    def event_id(self) -> str:
        """The id of the event this transition belongs to."""
        return self.event.event_id


@dataclass(frozen=True)
class Approval:
    """Someone (or the policy) said an event may start now: `actor` as people call them,
    `actor_id` the channel's own id of that person (a Slack member id; None elsewhere)."""

    event_id: str
    actor: str
    via: str
    at: datetime
    actor_id: str | None = None


@dataclass(frozen=True)
class Receipt:
    """What a sink returned for an event (Slack channel+ts, Jira key), kept so
    later transitions update the same message or ticket."""

    external_id: str
    data: Mapping[str, str] = field(default_factory=dict)

"""One simulated scheduled event and its lifecycle, computed lazily from a clock.

An event stores real wall-clock instants (epoch seconds) fixed when it was
scheduled, so its phase at any instant is a pure function of the clock:

    Pending -> Scheduled -> Started -> Completed
                  \\-> Cancelled (removed before it started)

Unplanned events (host failure) skip Scheduled. Durations given by users are
nominal seconds; the simulator divides them by its time scale before they get
here, so this module knows nothing about scaling.
"""

from __future__ import annotations

import email.utils
import enum
import time
import uuid
from dataclasses import dataclass

__all__ = [
    "DEFAULT_ACTIVE",
    "MIN_NOTICE",
    "Phase",
    "SimEvent",
    "check_terminate_notice",
    "default_active",
    "default_description",
    "default_notice",
    "iso8601",
    "minimum_notice",
    "new_event_id",
    "rfc1123",
]

# Minimum notice per EventType, from the "Event scheduling" table of the
# 2020-07-01 documentation. Terminate is user configurable (5 to 15 minutes),
# so it comes from the simulator's setting instead.
MIN_NOTICE: dict[str, float] = {
    "Freeze": 900.0,
    "Reboot": 900.0,
    "Redeploy": 600.0,
    "Preempt": 30.0,
}
TERMINATE_NOTICE_RANGE = (300.0, 900.0)
UNKNOWN_TYPE_NOTICE = 900.0

# How long an event stays Started when DurationInSeconds is -1 (unknown).
# Not documented: chosen so each type's impact is visible but short.
DEFAULT_ACTIVE: dict[str, float] = {
    "Freeze": 5.0,
    "Reboot": 120.0,
    "Redeploy": 300.0,
    "Preempt": 60.0,
    "Terminate": 60.0,
}
UNKNOWN_TYPE_ACTIVE = 60.0

_DESCRIPTIONS: dict[tuple[str, str], str] = {
    ("Freeze", ""): (
        "Virtual machine is being paused because of a memory-preserving Live Migration operation."
    ),
    ("Reboot", "User"): "Virtual machine is going to be restarted as requested by authorized user.",
    ("Reboot", ""): "Host server is undergoing maintenance.",
    ("Redeploy", "User"): (
        "Virtual machine is going to be redeployed as requested by authorized user."
    ),
    ("Redeploy", ""): "Virtual machine is being moved to another host because of maintenance.",
    ("Preempt", ""): "Spot virtual machine is being evicted because Azure needs the capacity back.",
    (
        "Terminate",
        "User",
    ): "Virtual machine is going to be deleted as requested by authorized user.",
    ("Terminate", ""): "Virtual machine scale set instance is being deleted.",
}
_UNPLANNED_DESCRIPTION = (
    "Virtual machine is being restarted because the host server suffered a hardware failure."
)


class Phase(enum.Enum):
    """Where an event is in its lifecycle at a given instant."""

    PENDING = "Pending"  # scheduled for later by a scenario; not in the document yet
    SCHEDULED = "Scheduled"
    STARTED = "Started"
    COMPLETED = "Completed"
    CANCELLED = "Cancelled"

    @property
    def visible(self) -> bool:
        """Whether IMDS lists an event in this phase."""
        return self in (Phase.SCHEDULED, Phase.STARTED)

    @property
    def rank(self) -> int:
        """Order of phases along the lifecycle (Completed and Cancelled tie)."""
        return _RANK[self]


_RANK = {
    Phase.PENDING: 0,
    Phase.SCHEDULED: 1,
    Phase.STARTED: 2,
    Phase.COMPLETED: 3,
    Phase.CANCELLED: 3,
}


@dataclass
class SimEvent:
    """A simulated event. Instants are real epoch seconds; mutable only under the state lock.

    Args:
        appears_at: when the event enters the document.
        not_before: when it starts at the latest; None for an unplanned event,
            which is Started from the moment it appears.
        active_for: real seconds it stays Started before it disappears.
        notice, active: the nominal (unscaled) values, kept for reporting.
    """

    event_id: str
    event_type: str
    source: str
    resources: tuple[str, ...]
    description: str
    duration: int
    appears_at: float
    not_before: float | None
    active_for: float
    notice: float
    active: float
    approved_at: float | None = None
    approval_starts_at: float | None = None
    forced_start_at: float | None = None
    removed_at: float | None = None

    @property
    def unplanned(self) -> bool:
        """True for an event created already Started (host failure)."""
        return self.not_before is None

    def starts_at(self) -> float:
        """The instant the event starts: NotBefore, or earlier after an approval or a push."""
        candidates = [self.appears_at if self.not_before is None else self.not_before]
        if self.approval_starts_at is not None:
            candidates.append(self.approval_starts_at)
        if self.forced_start_at is not None:
            candidates.append(self.forced_start_at)
        # Never before it appears: a client must be able to see it Started.
        return max(self.appears_at, min(candidates))

    def ends_at(self) -> float:
        """The instant the event leaves the document (on its own, or when removed)."""
        natural = self.starts_at() + self.active_for
        return natural if self.removed_at is None else min(natural, self.removed_at)

    def view(self, now: float) -> dict[str, object]:
        """The event as the control API shows it (snake_case, ISO 8601 instants)."""
        return {
            "id": self.event_id,
            "type": self.event_type,
            "status": self.phase(now).value,
            "source": self.source,
            "resources": list(self.resources),
            "description": self.description,
            "duration": self.duration,
            "notice": self.notice,
            "active": self.active,
            "unplanned": self.unplanned,
            "not_before": None if self.not_before is None else iso8601(self.not_before),
            "appears_at": iso8601(self.appears_at),
            "starts_at": iso8601(self.starts_at()),
            "ends_at": iso8601(self.ends_at()),
            "approved": self.approved_at is not None,
            "approved_at": None if self.approved_at is None else iso8601(self.approved_at),
        }

    def phase(self, now: float) -> Phase:
        """The lifecycle phase at instant `now`."""
        start = self.starts_at()
        if self.removed_at is not None and now >= self.removed_at:
            return Phase.COMPLETED if self.removed_at >= start else Phase.CANCELLED
        if now < self.appears_at:
            return Phase.PENDING
        if now < start:
            return Phase.SCHEDULED
        if now < self.ends_at():
            return Phase.STARTED
        return Phase.COMPLETED


def minimum_notice(event_type: str, terminate_notice: float) -> float:
    """The documented minimum (and default) notice for a type; 0 for unknown types."""
    if event_type == "Terminate":
        return terminate_notice
    return MIN_NOTICE.get(event_type, 0.0)


def default_notice(event_type: str, terminate_notice: float) -> float:
    """The notice used when none is given: the documented minimum, 900 s for unknown types."""
    if event_type == "Terminate" or event_type in MIN_NOTICE:
        return minimum_notice(event_type, terminate_notice)
    return UNKNOWN_TYPE_NOTICE


def check_terminate_notice(seconds: float) -> float:
    """Validate the Terminate notice setting (documented range 5 to 15 minutes)."""
    low, high = TERMINATE_NOTICE_RANGE
    if not low <= seconds <= high:
        raise ValueError(
            f"terminate_notice must be between {low:g} and {high:g} seconds, got {seconds:g}"
        )
    return float(seconds)


def default_active(event_type: str, duration: int) -> float:
    """Nominal seconds an event stays Started: its duration if known, else a per-type default."""
    if duration >= 0:
        return float(duration)
    return DEFAULT_ACTIVE.get(event_type, UNKNOWN_TYPE_ACTIVE)


def default_description(event_type: str, source: str, unplanned: bool = False) -> str:
    """A description in the style of IMDS's for a type and source."""
    if unplanned and event_type == "Reboot":
        return _UNPLANNED_DESCRIPTION
    for key in ((event_type, source), (event_type, "")):
        if key in _DESCRIPTIONS:
            return _DESCRIPTIONS[key]
    return f"Virtual machine is affected by a {event_type} event."


def new_event_id() -> str:
    """A fresh EventId: an uppercase GUID like the documentation's examples."""
    return str(uuid.uuid4()).upper()


def rfc1123(instant: float) -> str:
    """Format an instant as IMDS's NotBefore: `Mon, 11 Apr 2022 22:26:58 GMT`."""
    return email.utils.formatdate(instant, usegmt=True)


def iso8601(instant: float) -> str:
    """Format an instant as ISO 8601 UTC with a Z, like `2016-09-19T18:29:47Z`."""
    return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(instant))

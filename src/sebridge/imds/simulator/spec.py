"""EventSpec: a validated request to create one event, from Python, JSON or a scenario file.

All three entry points (`Simulator.schedule`, `POST /simulator/events`, a
scenario's `[[events]]`) go through `parse_event`, so a bad value gets the
same message naming the key everywhere.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass

from sebridge.imds.simulator.events import minimum_notice

__all__ = ["EVENT_KEYS", "STATUSES", "EventSpec", "check_notice", "parse_event"]

EVENT_KEYS: tuple[str, ...] = (
    "at",
    "type",
    "source",
    "resources",
    "description",
    "duration",
    "notice",
    "status",
    "active",
    "id",
)
STATUSES: tuple[str, ...] = ("Scheduled", "Started")


@dataclass(frozen=True)
class EventSpec:
    """What to create. Durations are nominal seconds (before time scaling).

    Args:
        event_type: EventType; unknown types are allowed.
        at: seconds from now until the event appears.
        resources: affected VM names; None means the simulator's own VM.
        description: None means a default text for the type and source.
        duration: DurationInSeconds, -1 for unknown.
        notice: seconds from appearing to NotBefore; None means the type's minimum.
        status: "Scheduled", or "Started" for an unplanned event (host failure).
        active: seconds it stays Started; None means duration or a per-type default.
        event_id: None means a fresh uppercase GUID.
    """

    event_type: str
    at: float = 0.0
    source: str = "Platform"
    resources: tuple[str, ...] | None = None
    description: str | None = None
    duration: int = -1
    notice: float | None = None
    status: str = "Scheduled"
    active: float | None = None
    event_id: str | None = None


def check_notice(event_type: str, notice: float, terminate_notice: float) -> None:
    """Raise ValueError when a notice is below the documented minimum for its type."""
    low = minimum_notice(event_type, terminate_notice)
    if notice < low:
        # Azure never gives less, so neither does the simulator; the way to wait less is
        # to run its clock faster (the notice stays nominal, as IMDS would say it).
        scale = math.ceil(low / notice) if notice > 0 else 60
        raise ValueError(
            f"{event_type} needs at least {low:g} seconds of notice, got {notice:g}"
            + (" (see terminate_notice)" if event_type == "Terminate" else "")
            + f"; for a shorter wait, run the simulator faster: --time-scale {scale}"
            f" (time_scale = {scale} in a scenario) makes {low:g} s of notice pass in"
            f" {low / scale:.3g} s"
        )


def _text(raw: Mapping[str, object], key: str, default: str | None) -> str | None:
    value = raw.get(key, default)
    if value is None:
        return None
    if not isinstance(value, str) or not value:
        raise ValueError(f"{key}: must be a non-empty string, got {value!r}")
    return value


def _number(raw: Mapping[str, object], key: str, low: float, *, strict: bool) -> float | None:
    value = raw.get(key)
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key}: must be a number, got {value!r}")
    if value < low or (strict and value == low):
        bound = f"greater than {low:g}" if strict else f"at least {low:g}"
        raise ValueError(f"{key}: must be {bound}, got {value!r}")
    return float(value)


def _resources(raw: Mapping[str, object]) -> tuple[str, ...] | None:
    value = raw.get("resources")
    if value is None:
        return None
    if (
        not isinstance(value, list | tuple)
        or not value
        or not all(isinstance(name, str) and name for name in value)
    ):
        raise ValueError(f"resources: must be a non-empty list of VM names, got {value!r}")
    return tuple(str(name) for name in value)


def _duration(raw: Mapping[str, object]) -> int:
    value = raw.get("duration", -1)
    if isinstance(value, bool) or not isinstance(value, int) or value < -1:
        raise ValueError(f"duration: must be an integer >= -1 (-1 = unknown), got {value!r}")
    return value


def _parse(raw: Mapping[str, object], terminate_notice: float) -> EventSpec:
    unknown = sorted(set(raw) - set(EVENT_KEYS))
    if unknown:
        raise ValueError(f"{unknown[0]}: unknown key; expected one of {', '.join(EVENT_KEYS)}")
    event_type = _text(raw, "type", None)
    if event_type is None:
        raise ValueError("type: missing (the EventType, e.g. Reboot)")
    status = _text(raw, "status", "Scheduled")
    if status not in STATUSES:
        raise ValueError(f"status: must be one of {', '.join(STATUSES)}, got {status!r}")
    notice = _number(raw, "notice", 0.0, strict=False)
    if notice is not None:
        if status == "Started":
            raise ValueError("notice: an unplanned (Started) event has no notice")
        try:
            check_notice(event_type, notice, terminate_notice)
        except ValueError as exc:
            raise ValueError(f"notice: {exc}") from None
    return EventSpec(
        event_type=event_type,
        at=_number(raw, "at", 0.0, strict=False) or 0.0,
        source=_text(raw, "source", "Platform") or "Platform",
        resources=_resources(raw),
        description=_text(raw, "description", None),
        duration=_duration(raw),
        notice=notice,
        status=status,
        active=_number(raw, "active", 0.0, strict=True),
        event_id=_text(raw, "id", None),
    )


def parse_event(raw: object, terminate_notice: float, where: str = "") -> EventSpec:
    """Validate one event description (snake_case keys, see EVENT_KEYS).

    Args:
        raw: a mapping as read from JSON or TOML.
        terminate_notice: the minimum notice for Terminate events.
        where: prefix for error messages, e.g. "events[2]".

    Raises:
        ValueError: naming the offending key, prefixed with `where`.
    """
    prefix = f"{where}." if where else ""
    if not isinstance(raw, Mapping):
        raise ValueError(f"{where or 'event'}: must be a table/object, got {type(raw).__name__}")
    if not all(isinstance(key, str) for key in raw):
        raise ValueError(f"{where or 'event'}: keys must be strings")
    try:
        return _parse(raw, terminate_notice)
    except ValueError as exc:
        raise ValueError(f"{prefix}{exc}") from None

"""An event back in IMDS's own names: what a hook reads on stdin.

The inverse of parse.py's mapping, for the fields the event carried: a hook
written against Microsoft's documentation reads the same object IMDS sent.
"""

from __future__ import annotations

from typing import Any

from sebridge.model import ScheduledEvent

__all__ = ["as_imds"]


def as_imds(event: ScheduledEvent) -> dict[str, Any]:
    """The event as IMDS sent it: fields the api-version did not carry stay absent."""
    shown: dict[str, Any] = dict(event.extra)
    shown.update(
        EventId=event.event_id,
        EventType=event.event_type,
        ResourceType=event.resource_type,
        Resources=list(event.resources),
        EventStatus=event.status,
        NotBefore=event.not_before_text if event.not_before_text is not None else "",
    )
    optional = {
        "Description": event.description,
        "EventSource": event.source,
        "DurationInSeconds": event.duration_seconds,
    }
    shown.update({k: v for k, v in optional.items() if v is not None})
    return shown

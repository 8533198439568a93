"""The Scheduled Events wire format: documents by api-version, incarnation, StartRequests.

Field availability follows the version table of the 2020-07-01 documentation:
Description from 2019-04-01, EventSource from 2019-08-01, DurationInSeconds
from 2020-07-01; EventType Preempt from 2017-11-01 and Terminate from
2019-01-01. The 2017-03-01 preview prepended an underscore to resource names
(removed in 2017-08-01) and its documentation shows NotBefore in ISO 8601
(`2016-09-19T18:29:47Z`), so that version renders it that way.
"""

from __future__ import annotations

import json
from collections.abc import Iterable
from typing import Any

from sebridge.imds.simulator.events import Phase, SimEvent, iso8601, rfc1123

__all__ = [
    "API_VERSIONS",
    "NEWEST_VERSIONS",
    "IncarnationCounter",
    "StartRequestError",
    "encode",
    "parse_start_requests",
    "posted_ids",
    "render_event",
    "render_events",
]

API_VERSIONS: tuple[str, ...] = (
    "2017-03-01",
    "2017-08-01",
    "2017-11-01",
    "2019-01-01",
    "2019-04-01",
    "2019-08-01",
    "2020-07-01",
)
NEWEST = API_VERSIONS[-1]
NEWEST_VERSIONS: tuple[str, ...] = tuple(reversed(API_VERSIONS[-3:]))

# api-versions are ISO dates, so string order is release order.
_TYPE_SINCE = {"Preempt": "2017-11-01", "Terminate": "2019-01-01"}
_DESCRIPTION_SINCE = "2019-04-01"
_SOURCE_SINCE = "2019-08-01"
_DURATION_SINCE = "2020-07-01"
_UNDERSCORE_UNTIL = "2017-08-01"  # exclusive: 2017-03-01 only
_ISO_NOT_BEFORE_UNTIL = "2017-08-01"


class StartRequestError(ValueError):
    """A POST body that is not a valid StartRequests document."""


def shown_in(event_type: str, version: str) -> bool:
    """Whether an api-version knows this EventType (newer types are hidden from older clients)."""
    since = _TYPE_SINCE.get(event_type)
    return since is None or version >= since


def render_event(event: SimEvent, phase: Phase, version: str) -> dict[str, Any]:
    """The JSON object IMDS returns for one event, shaped by api-version."""
    resources = list(event.resources)
    if version < _UNDERSCORE_UNTIL:
        resources = ["_" + name for name in resources]
    not_before = ""
    if phase is Phase.SCHEDULED and event.not_before is not None:
        formatter = iso8601 if version < _ISO_NOT_BEFORE_UNTIL else rfc1123
        not_before = formatter(event.not_before)
    rendered: dict[str, Any] = {
        "EventId": event.event_id,
        "EventStatus": phase.value,
        "EventType": event.event_type,
        "ResourceType": "VirtualMachine",
        "Resources": resources,
        "NotBefore": not_before,
    }
    if version >= _DESCRIPTION_SINCE:
        rendered["Description"] = event.description
    if version >= _SOURCE_SINCE:
        rendered["EventSource"] = event.source
    if version >= _DURATION_SINCE:
        rendered["DurationInSeconds"] = event.duration
    return rendered


def render_events(current: Iterable[tuple[SimEvent, Phase]], version: str) -> list[dict[str, Any]]:
    """The Events array for an api-version from (event, phase) pairs of visible events."""
    return [
        render_event(event, phase, version)
        for event, phase in current
        if phase.visible and shown_in(event.event_type, version)
    ]


def encode(document: Any) -> bytes:
    """Serialize deterministically, so an unchanged document is byte-identical on every poll.
    ASCII with JSON escapes: any text an event was given (a lone surrogate included, which
    JSON allows and UTF-8 cannot carry) is served as JSON can say it."""
    return json.dumps(document, separators=(",", ":"), ensure_ascii=True).encode("ascii")


class IncarnationCounter:
    """DocumentIncarnation: an integer that increases only when the events array changes."""

    def __init__(self) -> None:
        """Start at incarnation 1 with no events."""
        self.value = 1
        self._snapshot = encode([])

    def observe(self, events: list[dict[str, Any]]) -> int:
        """Compare the full events array (newest version) with the last one; bump on change."""
        snapshot = encode(events)
        if snapshot != self._snapshot:
            self._snapshot = snapshot
            self.value += 1
        return self.value


def parse_start_requests(body: bytes) -> list[str]:
    """The EventIds of a POST body `{"StartRequests": [{"EventId": ...}], ...}`.

    Raises:
        StartRequestError: for anything IMDS would answer with 400.
    """
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        raise StartRequestError("Bad request. The request body is not valid JSON") from None
    if not isinstance(data, dict):
        raise StartRequestError("Bad request. The request body must be a JSON object")
    incarnation = data.get("DocumentIncarnation")
    # The 2017-03-01 samples send it as a string ("5"), later ones as a number or not at all.
    if incarnation is not None and (
        isinstance(incarnation, bool) or not isinstance(incarnation, int | str)
    ):
        raise StartRequestError("Bad request. DocumentIncarnation must be an integer or a string")
    requests = data.get("StartRequests")
    if not isinstance(requests, list) or not requests:
        raise StartRequestError("Bad request. StartRequests must be a non-empty list")
    ids: list[str] = []
    for index, entry in enumerate(requests):
        event_id = entry.get("EventId") if isinstance(entry, dict) else None
        if not isinstance(event_id, str) or not event_id:
            raise StartRequestError(f"Bad request. StartRequests[{index}] has no string EventId")
        ids.append(event_id)
    return ids


def posted_ids(body: bytes) -> list[str]:
    """Best-effort EventIds of any POST body, for the record of POSTs (never raises)."""
    try:
        data = json.loads(body.decode("utf-8"))
    except (UnicodeDecodeError, json.JSONDecodeError):
        return []
    requests = data.get("StartRequests") if isinstance(data, dict) else None
    if not isinstance(requests, list):
        return []
    return [
        entry["EventId"]
        for entry in requests
        if isinstance(entry, dict) and isinstance(entry.get("EventId"), str)
    ]

"""Reading a Scheduled Events document: IMDS's JSON -> `sebridge.model`.

Tolerant of everything real VMs and older api-versions send (fields missing
by version, DocumentIncarnation as a string or any other JSON scalar, NotBefore
in RFC 1123 with a wrong weekday, in ISO 8601 or in no format at all (kept as
text, its time unknown), unknown types and extra fields); strict about
the shape we depend on. Anything else raises MalformedDocumentError, and
only that.
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from sebridge.errors import MalformedDocumentError
from sebridge.model import Document, Incarnation, ScheduledEvent

__all__ = ["parse_document", "parse_not_before"]

_KNOWN_EVENT_FIELDS = frozenset(
    {
        "EventId",
        "EventType",
        "EventStatus",
        "ResourceType",
        "Resources",
        "NotBefore",
        "Description",
        "EventSource",
        "DurationInSeconds",
    }
)
_KNOWN_DOCUMENT_FIELDS = frozenset({"DocumentIncarnation", "Events"})

_MONTHS = {
    m: i + 1
    for i, m in enumerate(
        ["jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec"]
    )
}
# "Mon, 11 Apr 2022 22:26:58 GMT". The weekday is ignored: it is redundant, and
# a wrong one must not cost us the event.
_RFC1123 = re.compile(
    r"^\s*(?:[A-Za-z]+,\s*)?(\d{1,2})\s+([A-Za-z]{3})[a-z]*\s+(\d{4})\s+"
    r"(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(?:GMT|UTC|UT|Z|\+0000|-0000)?\s*$"
)

_ISO_DATE_TIME = re.compile(r"^\d{4}-\d{2}-\d{2}[T ]\d{2}:\d{2}")


def parse_document(body: bytes | str) -> Document:
    """Parse a Scheduled Events response body.

    Raises:
        MalformedDocumentError: the body is not JSON or not shaped like a document.
    """
    try:
        raw = json.loads(body)
    except (ValueError, RecursionError) as exc:
        raise MalformedDocumentError(f"IMDS answer is not JSON: {_first_line(exc)}") from None
    if not isinstance(raw, dict):
        raise MalformedDocumentError(
            f"IMDS answer is JSON {type(raw).__name__}, not a Scheduled Events document"
        )
    if "DocumentIncarnation" not in raw:
        raise MalformedDocumentError("IMDS document has no DocumentIncarnation")
    incarnation = _incarnation(raw["DocumentIncarnation"])
    events = raw.get("Events")
    if not isinstance(events, list):
        raise MalformedDocumentError(f"IMDS document's Events is {_kind(events)}, expected a list")
    return Document(
        incarnation=incarnation,
        events=tuple(_event(e, i) for i, e in enumerate(events)),
        extra=_extra(raw, _KNOWN_DOCUMENT_FIELDS),
    )


def parse_not_before(text: str) -> datetime | None:
    """NotBefore as an aware UTC datetime; None for "" (started) or text we cannot read."""
    text = text.strip()
    if not text:
        return None
    match = _RFC1123.match(text)
    if match:
        return _rfc1123(match)
    # A date and a time, both spelt out: Python also reads "20170702" (a date
    # alone, compact), which is no moment an event could start at.
    if not _ISO_DATE_TIME.match(text):
        return None
    try:
        parsed = datetime.fromisoformat(text)
    except ValueError:
        return None
    # IMDS times are UTC; an ISO time without an offset is read as UTC too.
    if parsed.tzinfo is None:
        return parsed.replace(tzinfo=UTC)
    return parsed.astimezone(UTC)


def _rfc1123(match: re.Match[str]) -> datetime | None:
    day, month, year, hour, minute, second = match.groups()
    month_number = _MONTHS.get(month.lower())
    if month_number is None:
        return None
    try:
        return datetime(
            int(year), month_number, int(day), int(hour), int(minute), int(second or 0), tzinfo=UTC
        )
    except ValueError:  # 31 Feb, hour 25: not a time
        return None


def _event(raw: Any, index: int) -> ScheduledEvent:
    where = f"Events[{index}]"
    if not isinstance(raw, dict):
        raise MalformedDocumentError(f"IMDS document's {where} is {_kind(raw)}, not an object")
    event_id = _required_text(raw, "EventId", where)
    where = f"event {event_id}"
    not_before_text = _optional_text(raw, "NotBefore", where)
    return ScheduledEvent(
        event_id=event_id,
        event_type=_required_text(raw, "EventType", where),
        status=_required_text(raw, "EventStatus", where),
        resources=_resources(raw.get("Resources"), where),
        resource_type=_optional_text(raw, "ResourceType", where) or "",
        not_before=parse_not_before(not_before_text) if not_before_text is not None else None,
        not_before_text=not_before_text,
        description=_optional_text(raw, "Description", where),
        source=_optional_text(raw, "EventSource", where),
        duration_seconds=_integer(raw.get("DurationInSeconds"), f"{where} DurationInSeconds"),
        extra=_extra(raw, _KNOWN_EVENT_FIELDS),
    )


def _required_text(raw: dict[str, Any], key: str, where: str) -> str:
    value = raw.get(key)
    if not isinstance(value, str) or not value.strip():
        raise MalformedDocumentError(f"IMDS {where} has {key} {_kind(value)}, expected text")
    return value


def _optional_text(raw: dict[str, Any], key: str, where: str) -> str | None:
    value = raw.get(key)
    if value is None or isinstance(value, str):
        return value
    raise MalformedDocumentError(f"IMDS {where} has {key} {_kind(value)}, expected text")


def _resources(value: Any, where: str) -> tuple[str, ...]:
    if value is None:
        return ()
    if not isinstance(value, list) or not all(isinstance(r, str) for r in value):
        raise MalformedDocumentError(
            f"IMDS {where} has Resources {_kind(value)}, expected a list of names"
        )
    return tuple(value)


def _integer(value: Any, what: str) -> int | None:
    """An integer sent as a number or a numeric string (older documents quote them)."""
    if value is None:
        return None
    if isinstance(value, bool):
        raise MalformedDocumentError(f"IMDS {what} is a boolean, expected an integer")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and math.isfinite(value) and value.is_integer():
        return int(value)
    if isinstance(value, str):
        try:
            return int(value.strip())
        except ValueError:
            pass
    raise MalformedDocumentError(f"IMDS {what} is {_kind(value)}, expected an integer")


def _incarnation(value: Any) -> Incarnation:
    """An opaque token: IMDS sends a number (older versions quote it), others' fixtures
    any JSON scalar. Numbers and numeric text become int, so 2, "2" and 2.0 are one token."""
    if value is None:
        raise MalformedDocumentError("IMDS document has a null DocumentIncarnation")
    if isinstance(value, bool):
        return value
    if isinstance(value, int | float | str):
        with contextlib.suppress(MalformedDocumentError):
            number = _integer(value, "DocumentIncarnation")
            if number is not None:
                return number
        if isinstance(value, str) or math.isfinite(value):
            return value
    raise MalformedDocumentError(
        f"IMDS DocumentIncarnation is {_kind(value)}, expected a number or a text"
    )


def _extra(raw: dict[str, Any], known: frozenset[str]) -> MappingProxyType[str, Any]:
    return MappingProxyType({k: v for k, v in raw.items() if k not in known})


def _kind(value: Any) -> str:
    if value is None:
        return "missing or null"
    text = json.dumps(value) if isinstance(value, str | int | float | bool) else ""
    text = f" {text[:40]}" if text else ""
    return f"{type(value).__name__}{text}"


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__

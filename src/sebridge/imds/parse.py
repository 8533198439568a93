"""Reading a Scheduled Events document: IMDS's JSON -> `sebridge.model`.

Tolerant of everything real VMs and older api-versions send (fields missing
by version, DocumentIncarnation as a string or any other JSON scalar, NotBefore
in RFC 1123 with a wrong weekday, in ISO 8601 or in no format at all (kept as
text, its time unknown), unknown types and extra fields); strict about
the document's shape (JSON, an object, a DocumentIncarnation, an Events
list): anything else raises MalformedDocumentError, and only that. An event
that is odd is read as well as it can be (a number where text belongs read
as text, a lone Resources name as a list, a field of the wrong type as
absent), and one that cannot be followed (not an object, no EventId, an
EventId holding a lone surrogate or NUL) is skipped; each is said to `warn`
(the client logs it once per document). One whose EventId holds a lone
surrogate or NUL is also handed on as `Document.unreadable`: its other
fields read as usual under a stand-in id (imds/unreadable.py), so the daemon
announces it (it starts at NotBefore and no approval can reach IMDS). Lone
surrogates and NUL in the other fields we store or hand to hooks become U+FFFD,
said as odd; Description keeps them (only ever stored and sent JSON-escaped).
See docs/ARCHITECTURE.md, "Hostile text".
"""

from __future__ import annotations

import contextlib
import json
import math
import re
from collections.abc import Callable
from datetime import UTC, datetime
from types import MappingProxyType
from typing import Any

from sebridge.imds.unreadable import stand_in_id, why
from sebridge.kernel.errors import MalformedDocumentError
from sebridge.model import Document, Incarnation, ScheduledEvent, UnreadableEvent

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

# Text no store can hold as it is (SQLite and PostgreSQL take UTF-8, which has no lone
# surrogates; PostgreSQL text has no NUL), nor a hook's environment (no NUL).
_UNWRITABLE = re.compile("[\x00\ud800-\udfff]")


Warn = Callable[[str], None]


def _quiet(problem: str) -> None:
    """No one to tell."""


def parse_document(body: bytes | str, warn: Warn = _quiet) -> Document:
    """Parse a Scheduled Events response body; what was odd in its events goes to `warn`.

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
    read = [_event(e, i, warn) for i, e in enumerate(events)]
    return Document(
        incarnation=incarnation,
        events=tuple(e for e in read if isinstance(e, ScheduledEvent)),
        extra=_extra(raw, _KNOWN_DOCUMENT_FIELDS),
        unreadable=tuple(e for e in read if isinstance(e, UnreadableEvent)),
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


def _event(raw: Any, index: int, warn: Warn) -> ScheduledEvent | UnreadableEvent | None:
    where = f"Events[{index}]"
    if not isinstance(raw, dict):
        warn(f"{where} is {_kind(raw)}, not an object: skipped")
        return None
    event_id = _text(raw, "EventId", where, warn, keep=True)
    if not event_id or not event_id.strip():
        warn(f"{where} has EventId {_kind(raw.get('EventId'))}: skipped (no id to follow it by)")
        return None
    if _UNWRITABLE.search(event_id):  # another id would be another event: not ours to send
        stand_in = stand_in_id(event_id)
        warn(
            f"{where} has EventId {_kind(event_id)} holding a lone surrogate or NUL: "
            "not followed (it can be neither stored nor sent back as it is); announced "
            f"as {stand_in}"
        )
        return UnreadableEvent(_fields(raw, stand_in, f"event {stand_in}", warn), why(event_id))
    return _fields(raw, event_id, f"event {event_id[:80]}", warn)  # logs escape it


def _fields(raw: dict[str, Any], event_id: str, where: str, warn: Warn) -> ScheduledEvent:
    """An event's fields, read tolerantly, under `event_id`."""
    not_before_text = _text(raw, "NotBefore", where, warn)
    duration = raw.get("DurationInSeconds")
    try:
        duration_seconds = _integer(duration, f"{where} DurationInSeconds")
    except MalformedDocumentError as exc:
        warn(f"{exc}: read as unknown")
        duration_seconds = None
    return ScheduledEvent(
        event_id=event_id,
        event_type=_required(raw, "EventType", where, warn),
        status=_required(raw, "EventStatus", where, warn),
        resources=_resources(raw.get("Resources"), where, warn),
        resource_type=_text(raw, "ResourceType", where, warn) or "",
        not_before=parse_not_before(not_before_text) if not_before_text is not None else None,
        not_before_text=not_before_text,
        description=_text(raw, "Description", where, warn, keep=True),
        source=_text(raw, "EventSource", where, warn),
        duration_seconds=duration_seconds,
        extra=_extra(raw, _KNOWN_EVENT_FIELDS),
    )


def _text(
    raw: dict[str, Any], key: str, where: str, warn: Warn, *, keep: bool = False
) -> str | None:
    """The field as text: a number read as its text (said), another type as absent (said);
    lone surrogates and NUL as U+FFFD (said) unless `keep`."""
    value = raw.get(key)
    if isinstance(value, str) and not keep:
        return _writable(value, f"{where} has {key} {_kind(value)}", warn)
    if value is None or isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        warn(f"{where} has {key} {_kind(value)}, expected text: read as text")
        return json.dumps(value)
    warn(f"{where} has {key} {_kind(value)}, expected text: read as absent")
    return None


def _required(raw: dict[str, Any], key: str, where: str, warn: Warn) -> str:
    """A field every event has: absent or unreadable, it is "Unknown" (said once)."""
    value = raw.get(key)
    if value is None or (isinstance(value, str | int | float) and not isinstance(value, bool)):
        text = _text(raw, key, where, warn)
        if text and text.strip():
            return text
    warn(f"{where} has {key} {_kind(raw.get(key))}, expected text: read as Unknown")
    return "Unknown"


def _resources(value: Any, where: str, warn: Warn) -> tuple[str, ...]:
    if value is None:
        return ()
    if isinstance(value, str):
        warn(f"{where} has Resources {_kind(value)}, expected a list: read as one name")
        value = [value]
    if not isinstance(value, list):
        warn(f"{where} has Resources {_kind(value)}, expected a list of names: read as none")
        return ()
    names = [r if isinstance(r, str) else json.dumps(r) for r in value if _scalar(r)]
    if len(names) != len(value) or not all(isinstance(r, str) for r in value):
        warn(
            f"{where} has Resources {_kind(value)}, expected names: numbers read as text, "
            "other values left out"
        )
    if any(_UNWRITABLE.search(name) for name in names):
        names = [_UNWRITABLE.sub("\ufffd", name) for name in names]
        warn(
            f"{where} has Resources {_kind(value)} holding a lone surrogate or NUL: "
            "read with U+FFFD in their place"
        )
    return tuple(names)


def _writable(text: str, what: str, warn: Warn) -> str:
    """`text` with each lone surrogate and NUL as U+FFFD (said)."""
    if not _UNWRITABLE.search(text):
        return text
    warn(f"{what} holding a lone surrogate or NUL: read with U+FFFD in their place")
    return _UNWRITABLE.sub("\ufffd", text)


def _scalar(value: Any) -> bool:
    return isinstance(value, str) or (
        isinstance(value, int | float) and not isinstance(value, bool)
    )


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
    if isinstance(value, list | dict):
        text = json.dumps(value, default=str)
    text = f" {text[:40]}" if text else ""
    return f"{type(value).__name__}{text}"


def _first_line(exc: BaseException) -> str:
    return str(exc).splitlines()[0][:200] if str(exc) else type(exc).__name__

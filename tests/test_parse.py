"""Parsing Scheduled Events documents: tolerant of what IMDS sends, one error for the rest."""

from __future__ import annotations

import contextlib
import json
import re
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sebridge.imds import parse_document, parse_not_before
from sebridge.imds.unreadable import stand_in_id
from sebridge.kernel.errors import MalformedDocumentError
from sebridge.model import EventStatus, EventType, ScheduledEvent

# The live-migration sequence from the 2020-07-01 documentation, verbatim.
FREEZE_SCHEDULED = """{
    "DocumentIncarnation":  2,
    "Events":  [
                   {
                       "EventId":  "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
                       "EventStatus":  "Scheduled",
                       "EventType":  "Freeze",
                       "ResourceType":  "VirtualMachine",
                       "Resources":  ["WestNO_0", "WestNO_1"],
                       "NotBefore":  "Mon, 11 Apr 2022 22:26:58 GMT",
                       "Description":  "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
                       "EventSource":  "Platform",
                       "DurationInSeconds":  -1
                   }
               ]
}"""


def test_documented_freeze_parses_field_by_field() -> None:
    doc = parse_document(FREEZE_SCHEDULED)
    assert doc.incarnation == 2
    (event,) = doc.events
    assert event.event_id == "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
    assert event.event_type == EventType.FREEZE
    assert event.status == EventStatus.SCHEDULED
    assert event.resource_type == "VirtualMachine"
    assert event.resources == ("WestNO_0", "WestNO_1")
    assert event.not_before == datetime(2022, 4, 11, 22, 26, 58, tzinfo=UTC)
    assert event.not_before_text == "Mon, 11 Apr 2022 22:26:58 GMT"
    assert event.description is not None and event.description.startswith("Virtual machine")
    assert event.source == "Platform"
    assert event.duration_seconds == -1
    assert not event.started
    assert event.affects("WestNO_1") and not event.affects("WestNO_2")


def test_idle_document() -> None:
    doc = parse_document(b'{"DocumentIncarnation": 1, "Events": []}')
    assert doc.incarnation == 1 and doc.events == ()


def test_started_event_has_empty_not_before() -> None:
    body = FREEZE_SCHEDULED.replace('"Scheduled"', '"Started"').replace(
        "Mon, 11 Apr 2022 22:26:58 GMT", ""
    )
    (event,) = parse_document(body).events
    assert event.started
    assert event.not_before is None and event.not_before_text == ""


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("Mon, 11 Apr 2022 22:26:58 GMT", datetime(2022, 4, 11, 22, 26, 58, tzinfo=UTC)),
        # A wrong weekday (11 Apr 2022 was a Monday) must not cost us the event.
        ("Fri, 11 Apr 2022 22:26:58 GMT", datetime(2022, 4, 11, 22, 26, 58, tzinfo=UTC)),
        ("11 Apr 2022 22:26:58 GMT", datetime(2022, 4, 11, 22, 26, 58, tzinfo=UTC)),
        ("Mon, 19 Sep 2016 18:29:47 GMT", datetime(2016, 9, 19, 18, 29, 47, tzinfo=UTC)),
        ("2016-09-19T18:29:47Z", datetime(2016, 9, 19, 18, 29, 47, tzinfo=UTC)),
        ("2024-01-15T10:00:00Z", datetime(2024, 1, 15, 10, 0, tzinfo=UTC)),
        ("2024-01-15T12:00:00+02:00", datetime(2024, 1, 15, 10, 0, tzinfo=UTC)),
        # Seven fractional digits, as .NET writes them.
        ("2024-01-15T10:00:00.1234567Z", datetime(2024, 1, 15, 10, 0, 0, 123456, tzinfo=UTC)),
        ("2024-01-15T10:00:00", datetime(2024, 1, 15, 10, 0, tzinfo=UTC)),
        ("", None),
        ("   ", None),
        ("soon", None),
        ("Mon, 31 Feb 2022 22:26:58 GMT", None),
        # A date alone, compact or not, is no moment (Python would read it as midnight).
        ("20170702", None),
        ("2017-07-02", None),
        ("2024-01-15 10:00:00Z", datetime(2024, 1, 15, 10, 0, tzinfo=UTC)),
    ],
)
def test_not_before_formats(text: str, expected: datetime | None) -> None:
    assert parse_not_before(text) == expected


def _event(**overrides: Any) -> dict[str, Any]:
    event: dict[str, Any] = {
        "EventId": "602d9444-d2cd-49c7-8624-8643e7171297",
        "EventType": "Reboot",
        "ResourceType": "VirtualMachine",
        "Resources": ["vm0"],
        "EventStatus": "Scheduled",
        "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
    }
    event.update(overrides)
    return {k: v for k, v in event.items() if v is not _ABSENT}


_ABSENT = object()


def _doc(*events: dict[str, Any], incarnation: Any = 1) -> str:
    return json.dumps({"DocumentIncarnation": incarnation, "Events": list(events)})


def test_2017_document_lacks_later_fields() -> None:
    (event,) = parse_document(_doc(_event())).events
    assert event.description is None
    assert event.source is None
    assert event.duration_seconds is None


@pytest.mark.parametrize(("value", "expected"), [(5, 5), ("5", 5), (" 7 ", 7), (3.0, 3)])
def test_incarnation_as_number_or_string(value: Any, expected: int) -> None:
    assert parse_document(_doc(incarnation=value)).incarnation == expected


@pytest.mark.parametrize(
    "value", ["abc123", "", 1.5, True, False, 10**30], ids=lambda v: f"{type(v).__name__}-{v}"
)
def test_any_json_scalar_incarnation_is_an_opaque_token(value: Any) -> None:
    # giantswarm's fixtures send "abc123": the document, and its events, must still count.
    doc = parse_document(_doc(_event(EventType="Terminate"), incarnation=value))
    assert doc.incarnation == value and type(doc.incarnation) is type(value)
    assert [e.event_type for e in doc.events] == ["Terminate"]
    assert doc == parse_document(_doc(_event(EventType="Terminate"), incarnation=value))
    assert doc != parse_document(_doc(_event(EventType="Terminate"), incarnation="other"))


@pytest.mark.parametrize("text", ["20170702", "2017-07-02", "tomorrow", "1650000000"])
def test_not_before_that_is_no_time_keeps_its_text(text: str) -> None:
    (event,) = parse_document(_doc(_event(NotBefore=text))).events
    assert event.not_before is None
    assert event.not_before_text == text


def test_unknown_type_status_and_extra_fields_are_kept() -> None:
    event = _event(EventType="Hibernate", EventStatus="Paused", Priority="High", Tags={"a": 1})
    doc = parse_document(json.dumps({"DocumentIncarnation": 3, "Events": [event], "Etag": "x"}))
    (parsed,) = doc.events
    assert parsed.event_type == "Hibernate" and parsed.status == "Paused"
    assert parsed.extra == {"Priority": "High", "Tags": {"a": 1}}
    assert doc.extra == {"Etag": "x"}


def test_empty_and_missing_resources() -> None:
    (empty,) = parse_document(_doc(_event(Resources=[]))).events
    (missing,) = parse_document(_doc(_event(Resources=_ABSENT))).events
    assert empty.resources == () and missing.resources == ()


def test_absent_not_before_and_numeric_string_duration() -> None:
    (event,) = parse_document(_doc(_event(NotBefore=_ABSENT, DurationInSeconds="9"))).events
    assert event.not_before is None and event.not_before_text is None
    assert event.duration_seconds == 9


def test_2017_03_underscore_names_match_this_vm() -> None:
    (event,) = parse_document(_doc(_event(Resources=["_vm0"]))).events
    assert event.affects("vm0")


def test_several_events_in_one_document_keep_their_order() -> None:
    doc = parse_document(_doc(_event(EventId="A"), _event(EventId="B"), _event(EventId="C")))
    assert [e.event_id for e in doc.events] == ["A", "B", "C"]
    assert doc.event("B") is doc.events[1] and doc.event("Z") is None


@pytest.mark.parametrize(
    ("body", "message"),
    [
        (b"<html><body>Proxy login</body></html>", "not JSON"),
        (b'{"DocumentIncarnation": 3, "Events": [', "not JSON"),
        (b"", "not JSON"),
        (b"\xff\xfe\x00garbage", "not JSON"),
        (b"[]", "not a Scheduled Events document"),
        (b'"text"', "not a Scheduled Events document"),
        (b'{"Events": []}', "no DocumentIncarnation"),
        (b'{"DocumentIncarnation": null, "Events": []}', "null DocumentIncarnation"),
        (b'{"DocumentIncarnation": [1], "Events": []}', "DocumentIncarnation is list"),
        (b'{"DocumentIncarnation": {}, "Events": []}', "DocumentIncarnation is dict"),
        (b'{"DocumentIncarnation": NaN, "Events": []}', "DocumentIncarnation is float NaN"),
        (b'{"DocumentIncarnation": 1}', "Events is missing"),
        (b'{"DocumentIncarnation": 1, "Events": {}}', "expected a list"),
    ],
)
def test_malformed_documents_raise_one_error(body: bytes, message: str) -> None:
    with pytest.raises(MalformedDocumentError, match=message):
        parse_document(body)


def _read(doc: str) -> tuple[tuple[ScheduledEvent, ...], list[str]]:
    said: list[str] = []
    return parse_document(doc, warn=said.append).events, said


@pytest.mark.parametrize(
    ("override", "field", "read", "said"),
    [
        ({"EventId": 42}, "event_id", "42", "has EventId int 42, expected text: read as text"),
        (
            {"EventType": None},
            "event_type",
            "Unknown",
            "has EventType missing or null, expected text: read as Unknown",
        ),
        (
            {"EventStatus": ["Started"]},
            "status",
            "Unknown",
            'has EventStatus list ["Started"], expected text: read as Unknown',
        ),
        ({"Resources": "vm0"}, "resources", ("vm0",), "expected a list: read as one name"),
        ({"Resources": [1, "vm0", None]}, "resources", ("1", "vm0"), "numbers read as text"),
        ({"Resources": {"vm": 1}}, "resources", (), "expected a list of names: read as none"),
        ({"NotBefore": 1650000000}, "not_before_text", "1650000000", "NotBefore int 1650000000"),
        ({"Description": {"text": "x"}}, "description", None, "Description dict"),
        ({"DurationInSeconds": "nine"}, "duration_seconds", None, "read as unknown"),
        ({"DurationInSeconds": False}, "duration_seconds", None, "is a boolean"),
        ({"DurationInSeconds": float("nan")}, "duration_seconds", None, "read as unknown"),
        (
            {"EventType": "Reb\ud800oot"},
            "event_type",
            "Reb\ufffdoot",
            'has EventType str "Reb\\ud800oot" holding a lone surrogate or NUL: read with U+FFFD',
        ),
        ({"EventStatus": "Sch\x00"}, "status", "Sch\ufffd", "EventStatus str"),
        ({"EventSource": "\udc80User"}, "source", "\ufffdUser", "EventSource str"),
        ({"ResourceType": "VM\x00"}, "resource_type", "VM\ufffd", "ResourceType str"),
        ({"NotBefore": "Mon\x00"}, "not_before_text", "Mon\ufffd", "NotBefore str"),
        ({"Resources": ["vm0", "v\x00m1"]}, "resources", ("vm0", "v\ufffdm1"), "U+FFFD"),
        ({"Description": "as \x00 sent \ud800"}, "description", "as \x00 sent \ud800", ""),
    ],
)
def test_an_odd_event_is_read_tolerantly_and_said_once(
    override: dict[str, Any], field: str, read: Any, said: str
) -> None:
    (event, _), problems = _read(_doc(_event(**override), _event(EventId="other")))
    assert getattr(event, field) == read
    if not said:  # Description: stored and sent JSON-escaped, kept as it came
        assert problems == []
        return
    assert len(problems) == 1 and said in problems[0], problems


@pytest.mark.parametrize(
    ("event", "said"),
    [
        ("x", 'Events[0] is str "x", not an object: skipped'),
        ({"EventType": "Reboot"}, "Events[0] has EventId missing or null: skipped"),
        (_event(EventId=""), 'Events[0] has EventId str "": skipped'),
        (_event(EventId=[1]), "Events[0] has EventId list [1]"),
        (_event(EventId="SURR\ud800ID"), 'EventId str "SURR\\ud800ID" holding a lone surrogate'),
        (_event(EventId="ID\x00NUL"), 'EventId str "ID\\u0000NUL" holding a lone surrogate or NUL'),
    ],
)
def test_an_event_that_cannot_be_followed_is_skipped_and_said(event: Any, said: str) -> None:
    events, problems = _read(_doc(event, _event(EventId="kept")))
    assert [e.event_id for e in events] == ["kept"]
    assert said in problems[0], problems


@pytest.mark.parametrize(
    ("event_id", "why"),
    [
        ("ID\x00NUL", 'its EventId "ID\\u0000NUL" holds NUL'),
        ("SURR\ud800ID", 'its EventId "SURR\\ud800ID" holds a lone surrogate'),
        ("\udc80" + "x" * 100, 'its EventId "\\udc80' + "x" * 59 + '..." holds a lone surrogate'),
    ],
)
def test_an_unreadable_event_id_is_handed_on_under_a_stable_stand_in(
    event_id: str, why: str
) -> None:
    """Not among the events, but read under a stand-in id derived from the raw one (the same
    in every reading, ASCII), its other fields as usual, and what makes it unreadable."""
    doc = _doc(_event(EventId=event_id, Resources=["vm0", "vm1"]), _event(EventId="kept"))
    document = parse_document(doc)
    assert [e.event_id for e in document.events] == ["kept"]
    (unreadable,) = document.unreadable
    assert unreadable.why == why
    stand_in = unreadable.stand_in
    assert (
        stand_in.event_id
        == stand_in_id(event_id)
        == parse_document(doc).unreadable[0].stand_in.event_id
    )
    assert stand_in.event_id.startswith("unreadable-") and stand_in.event_id.isascii()
    assert (stand_in.event_type, stand_in.resources) == ("Reboot", ("vm0", "vm1"))
    assert stand_in.not_before == datetime(2016, 9, 19, 18, 29, 47, tzinfo=UTC)
    assert unreadable.note() == (
        f"IMDS lists an event sebridge cannot read ({why}); it starts at NotBefore, "
        "2016-09-19 18:29:47 UTC, without an approval"
    )
    assert stand_in_id(event_id + "2") != stand_in.event_id


def test_a_well_formed_document_says_nothing() -> None:
    assert _read(_doc(_event(), _event(EventId="B")))[1] == []


def test_deeply_nested_json_is_malformed_not_a_crash() -> None:
    with pytest.raises(MalformedDocumentError):
        parse_document("[" * 100_000 + "]" * 100_000)


_json = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=12), inner),
    max_leaves=20,
)
_field_values = st.one_of(
    _json,
    st.sampled_from(["Mon, 11 Apr 2022 22:26:58 GMT", "", "2016-09-19T18:29:47Z", "Started"]),
    st.sampled_from(["x\ud800", "\x00", "\udcff y"]),  # no store or hook environment takes these
)
_events = st.dictionaries(
    st.sampled_from(
        [
            "EventId",
            "EventType",
            "EventStatus",
            "ResourceType",
            "Resources",
            "NotBefore",
            "Description",
            "EventSource",
            "DurationInSeconds",
            "Other",
        ]
    ),
    _field_values,
)
_documents = st.one_of(
    _json,
    st.fixed_dictionaries(
        {"DocumentIncarnation": _field_values, "Events": st.lists(_events, max_size=4) | _json}
    ),
)


@pytest.mark.slow
@settings(max_examples=400, deadline=None)
@given(_documents)
def test_any_json_either_parses_or_raises_the_one_error(value: Any) -> None:
    body = json.dumps(value)
    try:
        doc = parse_document(body)
    except MalformedDocumentError:
        return
    assert isinstance(doc.incarnation, int | float | str | bool)
    assert doc.incarnation == doc.incarnation  # a token equal to itself (no NaN)
    for event in doc.events:
        assert isinstance(event.event_id, str) and event.event_id
        assert all(isinstance(r, str) for r in event.resources)
        written = [event.event_id, event.event_type, event.status, event.resource_type]
        written += [event.source or "", event.not_before_text or "", *event.resources]
        assert not any(re.search("[\x00\ud800-\udfff]", text) for text in written)
        assert event.not_before is None or event.not_before.tzinfo is UTC


@settings(max_examples=300, deadline=None)
@given(st.binary(max_size=200) | st.text(max_size=200))
def test_any_bytes_either_parse_or_raise_the_one_error(body: bytes | str) -> None:
    with contextlib.suppress(MalformedDocumentError):
        parse_document(body)

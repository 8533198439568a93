"""diff(): transitions between two documents, decided by content, never by incarnation."""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Collection
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from sebridge.imds import parse_document
from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.diff import CHANGE_FIELDS, diff

K = TransitionKind

# The live-migration sequence from the 2020-07-01 documentation ("Example
# responses"), verbatim.
DOC_1 = """{
    "DocumentIncarnation":  1,
    "Events":  [
               ]
}"""
DOC_2 = """{
    "DocumentIncarnation":  2,
    "Events":  [
                   {
                       "EventId":  "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
                       "EventStatus":  "Scheduled",
                       "EventType":  "Freeze",
                       "ResourceType":  "VirtualMachine",
                       "Resources":  [
                                         "WestNO_0",
                                         "WestNO_1"
                                     ],
                       "NotBefore":  "Mon, 11 Apr 2022 22:26:58 GMT",
                       "Description":  "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
                       "EventSource":  "Platform",
                       "DurationInSeconds":  -1
                   }
               ]
}"""
DOC_3 = """{
    "DocumentIncarnation":  3,
    "Events":  [
                   {
                       "EventId":  "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
                       "EventStatus":  "Started",
                       "EventType":  "Freeze",
                       "ResourceType":  "VirtualMachine",
                       "Resources":  [
                                         "WestNO_0",
                                         "WestNO_1"
                                     ],
                       "NotBefore":  "",
                       "Description":  "Virtual machine is being paused because of a memory-preserving Live Migration operation.",
                       "EventSource":  "Platform",
                       "DurationInSeconds":  -1
                   }
               ]
}"""
DOC_4 = """{
    "DocumentIncarnation":  4,
    "Events":  [
               ]
}"""
FREEZE = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"

NOT_BEFORE_TEXT = "Mon, 11 Apr 2022 22:26:58 GMT"
NOT_BEFORE = datetime(2022, 4, 11, 22, 26, 58, tzinfo=UTC)
EARLY = NOT_BEFORE - timedelta(minutes=5)  # the usual poll: before NotBefore
LATE = NOT_BEFORE + timedelta(minutes=5)

_ABSENT = object()


def ev(event_id: str, **overrides: Any) -> dict[str, Any]:
    """An IMDS event as JSON fields; `_ABSENT` drops a field."""
    event: dict[str, Any] = {
        "EventId": event_id,
        "EventStatus": "Scheduled",
        "EventType": "Reboot",
        "ResourceType": "VirtualMachine",
        "Resources": ["vm0"],
        "NotBefore": NOT_BEFORE_TEXT,
        "Description": "Virtual machine is going to be restarted as requested by authorized user.",
        "EventSource": "Platform",
        "DurationInSeconds": 900,
    }
    event.update(overrides)
    return {k: v for k, v in event.items() if v is not _ABSENT}


def doc(incarnation: int, *events: dict[str, Any]) -> Document:
    """A Document parsed from IMDS JSON, as the daemon would see it."""
    return parse_document(json.dumps({"DocumentIncarnation": incarnation, "Events": list(events)}))


def started(event_id: str, **overrides: Any) -> dict[str, Any]:
    return ev(event_id, **{"EventStatus": "Started", "NotBefore": "", **overrides})


def summary(transitions: list[Transition]) -> list[tuple[Any, ...]]:
    """(kind, event_id), plus the changed fields for CHANGED."""
    return [
        (t.kind, t.event_id, t.changes) if t.changes else (t.kind, t.event_id) for t in transitions
    ]


def _case(
    previous: Document | None,
    current: Document,
    expected: list[tuple[Any, ...]],
    *,
    id: str,
    now: datetime = EARLY,
    approved: Collection[str] = frozenset(),
) -> Any:
    return pytest.param(previous, current, now, approved, expected, id=id)


LIFECYCLE = [
    # The documented live migration, step by step.
    _case(parse_document(DOC_1), parse_document(DOC_2), [(K.SCHEDULED, FREEZE)], id="doc-1-to-2"),
    # NotBefore "" on start is what Started looks like: STARTED alone, no CHANGED.
    _case(parse_document(DOC_2), parse_document(DOC_3), [(K.STARTED, FREEZE)], id="doc-2-to-3"),
    _case(parse_document(DOC_3), parse_document(DOC_4), [(K.COMPLETED, FREEZE)], id="doc-3-to-4"),
    _case(parse_document(DOC_1), parse_document(DOC_1), [], id="doc-1-twice"),
    _case(parse_document(DOC_2), parse_document(DOC_2), [], id="doc-2-twice"),
    _case(parse_document(DOC_3), parse_document(DOC_3), [], id="doc-3-twice"),
    _case(parse_document(DOC_4), parse_document(DOC_4), [], id="doc-4-twice"),
    # Incarnation jumps by 2: two steps' worth of change at once.
    _case(parse_document(DOC_1), parse_document(DOC_3), [(K.UNPLANNED, FREEZE)], id="jump-1-to-3"),
    _case(
        parse_document(DOC_2),
        parse_document(DOC_4),
        [(K.CANCELLED, FREEZE)],
        now=EARLY,
        id="jump-2-to-4-before-not-before",
    ),
    _case(
        parse_document(DOC_2),
        parse_document(DOC_4),
        [(K.COMPLETED, FREEZE)],
        now=LATE,
        id="jump-2-to-4-after-not-before",
    ),
    _case(doc(1), doc(3), [], id="jump-appeared-and-vanished"),
    # First run ever: nothing known before.
    _case(
        None,
        doc(7, ev("a"), started("b"), ev("c", EventStatus="Pending")),
        [(K.SCHEDULED, "a"), (K.UNPLANNED, "b"), (K.SCHEDULED, "c")],
        id="first-run",
    ),
    _case(None, doc(1), [], id="first-run-idle"),
    _case(None, parse_document(DOC_3), [(K.UNPLANNED, FREEZE)], id="first-run-started"),
    # Same incarnation, different content: still seen.
    _case(
        doc(5, ev("a")),
        doc(5, ev("a", NotBefore="Mon, 11 Apr 2022 23:26:58 GMT")),
        [(K.CHANGED, "a", ("not_before",))],
        id="same-incarnation-changed",
    ),
    _case(
        doc(5, ev("a")),
        doc(5, ev("b")),
        [(K.SCHEDULED, "b"), (K.CANCELLED, "a")],
        id="same-incarnation-replaced",
    ),
    _case(doc(5, ev("a")), doc(5, started("a")), [(K.STARTED, "a")], id="same-incarnation-started"),
    # Incarnation going down (a reset host) is judged by content too.
    _case(doc(9, ev("a")), doc(1, ev("a")), [], id="incarnation-down-same-content"),
    # Several events changing differently at once; output in current order, gone last.
    _case(
        doc(7, ev("a"), ev("b"), ev("c"), ev("d")),
        doc(8, ev("d", Description="other"), ev("e"), started("b"), ev("a")),
        [
            (K.CHANGED, "d", ("description",)),
            (K.SCHEDULED, "e"),
            (K.STARTED, "b"),
            (K.CANCELLED, "c"),
        ],
        id="several-at-once",
    ),
    # Ids are compared exactly.
    _case(
        doc(1, ev("ABC")),
        doc(2, ev("abc")),
        [(K.SCHEDULED, "abc"), (K.CANCELLED, "ABC")],
        id="ids-case-sensitive",
    ),
]

CHANGES = [
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", NotBefore="Mon, 11 Apr 2022 23:00:00 GMT")),
        [(K.CHANGED, "a", ("not_before",))],
        id="not-before-later",
    ),
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", NotBefore="2022-04-11T22:26:58Z")),
        [],
        id="not-before-same-instant-other-spelling",
    ),
    _case(
        doc(1, ev("a", NotBefore="soon")),
        doc(2, ev("a", NotBefore="later")),
        [(K.CHANGED, "a", ("not_before",))],
        id="not-before-unreadable-text-changed",
    ),
    _case(
        doc(1, ev("a", NotBefore="soon")),
        doc(2, ev("a")),
        [(K.CHANGED, "a", ("not_before",))],
        id="not-before-unreadable-to-readable",
    ),
    _case(
        doc(1, ev("a", NotBefore=_ABSENT)),
        doc(2, ev("a", NotBefore="")),
        [],
        id="not-before-absent-to-empty",
    ),
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", Resources=["vm0", "vm1"])),
        [(K.CHANGED, "a", ("resources",))],
        id="resources-added",
    ),
    _case(
        doc(1, ev("a", Resources=["vm0", "vm1"])),
        doc(2, ev("a", Resources=["vm1", "vm0"])),
        [],
        id="resources-reordered",
    ),
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", Description="Host update")),
        [(K.CHANGED, "a", ("description",))],
        id="description",
    ),
    _case(
        doc(1, ev("a", Description=_ABSENT)),
        doc(2, ev("a")),
        [(K.CHANGED, "a", ("description",))],
        id="description-appears",
    ),
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", DurationInSeconds=-1)),
        [(K.CHANGED, "a", ("duration_seconds",))],
        id="duration",
    ),
    _case(
        doc(1, ev("a", EventType="Freeze")),
        doc(2, ev("a", EventType="Redeploy")),
        [(K.CHANGED, "a", ("event_type",))],
        id="event-type",
    ),
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", EventType="Hibernate")),
        [(K.CHANGED, "a", ("event_type",))],
        id="event-type-unknown",
    ),
    _case(
        doc(1, ev("a")),
        doc(
            2,
            ev(
                "a",
                EventType="Redeploy",
                DurationInSeconds=-1,
                Resources=["vm9"],
                NotBefore="Tue, 12 Apr 2022 01:00:00 GMT",
            ),
        ),
        [(K.CHANGED, "a", ("not_before", "resources", "duration_seconds", "event_type"))],
        id="several-fields",
    ),
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", EventSource="User", ResourceType="Other", Extra=1)),
        [],
        id="other-fields-ignored",
    ),
    # Starting.
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", EventStatus="Started")),
        [(K.STARTED, "a")],
        id="started-keeping-not-before",
    ),
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", EventStatus="Started", NotBefore="Tue, 12 Apr 2022 01:00:00 GMT")),
        [(K.STARTED, "a")],
        id="started-with-other-not-before",
    ),
    _case(
        doc(1, ev("a")),
        doc(2, started("a", Description="Now rebooting", DurationInSeconds=60)),
        [(K.CHANGED, "a", ("description", "duration_seconds")), (K.STARTED, "a")],
        id="changed-and-started",
    ),
    _case(
        doc(1, started("a")),
        doc(2, started("a", Resources=["vm0", "vm1"])),
        [(K.CHANGED, "a", ("resources",))],
        id="started-then-changed",
    ),
    _case(
        doc(1, started("a")),
        doc(2, started("a", NotBefore=NOT_BEFORE_TEXT)),
        [],
        id="started-not-before-ignored",
    ),
    # Started -> Scheduled should not happen: no status transition, fields still reported.
    _case(
        doc(1, started("a")),
        doc(2, ev("a", NotBefore="")),
        [],
        id="started-back-to-scheduled",
    ),
    _case(
        doc(1, started("a")),
        doc(2, ev("a")),
        [(K.CHANGED, "a", ("not_before",))],
        id="started-back-to-scheduled-with-not-before",
    ),
    # Unknown statuses count as scheduled.
    _case(None, doc(1, ev("a", EventStatus="Pending")), [(K.SCHEDULED, "a")], id="new-unknown"),
    _case(
        doc(1, ev("a")),
        doc(2, ev("a", EventStatus="Pending")),
        [],
        id="scheduled-to-unknown",
    ),
    _case(
        doc(1, ev("a", EventStatus="Pending")),
        doc(2, started("a")),
        [(K.STARTED, "a")],
        id="unknown-to-started",
    ),
    _case(
        None,
        doc(1, ev("a", EventType="Hibernate", Surprise={"x": 1})),
        [(K.SCHEDULED, "a")],
        id="new-unknown-type",
    ),
]

GONE = [
    _case(doc(1, started("a")), doc(2), [(K.COMPLETED, "a")], id="started"),
    _case(
        doc(1, ev("a")),
        doc(2),
        [(K.COMPLETED, "a")],
        approved={"a"},
        id="approved-before-not-before",
    ),
    _case(doc(1, ev("a")), doc(2), [(K.COMPLETED, "a")], now=NOT_BEFORE, id="not-before-is-now"),
    _case(doc(1, ev("a")), doc(2), [(K.COMPLETED, "a")], now=LATE, id="not-before-passed"),
    _case(doc(1, ev("a")), doc(2), [(K.CANCELLED, "a")], now=EARLY, id="before-not-before"),
    _case(
        doc(1, ev("a")),
        doc(2),
        [(K.CANCELLED, "a")],
        approved={"b", "A"},
        id="other-ids-approved",
    ),
    _case(doc(1, ev("a", NotBefore="")), doc(2), [(K.CANCELLED, "a")], now=LATE, id="nb-empty"),
    _case(doc(1, ev("a", NotBefore=_ABSENT)), doc(2), [(K.CANCELLED, "a")], now=LATE, id="nb-none"),
    _case(
        doc(1, ev("a", NotBefore="whenever")),
        doc(2),
        [(K.CANCELLED, "a")],
        now=LATE,
        id="nb-unreadable",
    ),
    _case(
        doc(1, ev("a", NotBefore="whenever")),
        doc(2),
        [(K.COMPLETED, "a")],
        approved={"a"},
        id="nb-unreadable-approved",
    ),
    _case(
        doc(1, ev("z"), started("y"), ev("x", NotBefore="2022-04-11T22:00:00Z")),
        doc(2),
        [(K.CANCELLED, "z"), (K.COMPLETED, "y"), (K.COMPLETED, "x")],
        id="in-previous-order",
    ),
]


@pytest.mark.parametrize(("previous", "current", "now", "approved", "expected"), LIFECYCLE)
def test_lifecycle(
    previous: Document | None,
    current: Document,
    now: datetime,
    approved: Collection[str],
    expected: list[tuple[Any, ...]],
) -> None:
    assert summary(diff(previous, current, now, approved)) == expected


@pytest.mark.parametrize(("previous", "current", "now", "approved", "expected"), CHANGES)
def test_changes(
    previous: Document | None,
    current: Document,
    now: datetime,
    approved: Collection[str],
    expected: list[tuple[Any, ...]],
) -> None:
    assert summary(diff(previous, current, now, approved)) == expected


@pytest.mark.parametrize(("previous", "current", "now", "approved", "expected"), GONE)
def test_gone(
    previous: Document | None,
    current: Document,
    now: datetime,
    approved: Collection[str],
    expected: list[tuple[Any, ...]],
) -> None:
    assert summary(diff(previous, current, now, approved)) == expected


def test_documented_sequence_end_to_end() -> None:
    docs = [parse_document(d) for d in (DOC_1, DOC_2, DOC_3, DOC_4)]
    seen: list[tuple[Any, ...]] = []
    previous: Document | None = None
    for current in docs:
        seen += summary(diff(previous, current, EARLY))
        seen += summary(diff(current, current, EARLY))  # polled again: nothing new
        previous = current
    assert seen == [(K.SCHEDULED, FREEZE), (K.STARTED, FREEZE), (K.COMPLETED, FREEZE)]


def test_transitions_carry_the_right_event_and_defaults() -> None:
    previous = doc(1, ev("a"), ev("b"), ev("c"))
    current = doc(2, started("a"), ev("b", DurationInSeconds=5), ev("d"))
    out = diff(previous, current, LATE)
    assert [t.kind for t in out] == [K.STARTED, K.CHANGED, K.SCHEDULED, K.COMPLETED]
    for t in out:
        assert t.at == LATE
        assert (t.actor, t.via, t.dry_run) == (None, None, False)
        source = current if t.kind != K.COMPLETED else previous
        assert t.event is source.event(t.event_id)


def test_duplicate_id_in_a_document_counts_once() -> None:
    # IMDS should not repeat an id; if it does, the first one counts (as Document.event).
    out = diff(None, doc(1, ev("a"), started("a")), EARLY)
    assert summary(out) == [(K.SCHEDULED, "a")]


def test_change_fields() -> None:
    assert CHANGE_FIELDS == (
        "not_before",
        "resources",
        "description",
        "duration_seconds",
        "event_type",
    )


# Property: for any two small documents with overlapping ids.
_IDS = ["a", "b", "c", "d"]
_TIMES = [EARLY, NOT_BEFORE, LATE]
_events = st.builds(
    ScheduledEvent,
    event_id=st.sampled_from(_IDS),
    event_type=st.sampled_from(["Freeze", "Reboot", "Hibernate"]),
    status=st.sampled_from(["Scheduled", "Started", "Pending"]),
    resources=st.lists(st.sampled_from(["vm0", "vm1"]), max_size=2).map(tuple),
    not_before=st.none() | st.sampled_from(_TIMES),
    not_before_text=st.sampled_from([None, "", NOT_BEFORE_TEXT, "soon"]),
    description=st.sampled_from([None, "x", "y"]),
    duration_seconds=st.sampled_from([None, -1, 0, 900]),
)
_documents = st.builds(
    Document,
    incarnation=st.integers(0, 4),
    events=st.lists(_events, max_size=5).map(tuple),
)


@settings(max_examples=300, deadline=None)
@given(
    previous=st.none() | _documents,
    current=_documents,
    now=st.sampled_from(_TIMES),
    approved=st.frozensets(st.sampled_from(_IDS)),
)
def test_diff_properties(
    previous: Document | None, current: Document, now: datetime, approved: frozenset[str]
) -> None:
    out = diff(previous, current, now, approved)
    assert out == diff(previous, current, now, approved)  # deterministic
    before = {e.event_id for e in previous.events} if previous else set()
    after = {e.event_id for e in current.events}
    assert all(n == 1 for n in Counter((t.event_id, t.kind) for t in out).values())
    kinds: dict[str, list[str]] = {}
    for t in out:
        kinds.setdefault(t.event_id, []).append(t.kind)
        assert t.at == now
        assert bool(t.changes) == (t.kind == K.CHANGED)
        assert list(t.changes) == [f for f in CHANGE_FIELDS if f in t.changes]
    for event_id in before - after:
        assert kinds.get(event_id) in ([K.COMPLETED], [K.CANCELLED])
    for event_id in after - before:
        assert kinds.get(event_id) in ([K.SCHEDULED], [K.UNPLANNED])
    for event_id in before & after:
        assert kinds.get(event_id, []) in ([], [K.CHANGED], [K.STARTED], [K.CHANGED, K.STARTED])
    assert set(kinds) <= before | after
    assert diff(current, current, now, approved) == []
    if previous is not None:
        assert diff(previous, previous, now, approved) == []

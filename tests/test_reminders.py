"""Reminders (engine/reminders.py): a store error at a reminder's lead loses nothing, for a
`remind` and a `remind_after` lead; a held approval is reminded of, no other. The next
lead and what was said change only once the store answered, so the same lead is tried again:
at the next tick without threads, after the worker's back-off with them.

A real store (both dialects) behind a small class that can fail the next read of the events.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from helpers import wait_until
from sebridge.engine.reminders import Reminders
from sebridge.kernel.errors import StoreError
from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.approval import ApprovalState
from sebridge.model.decision import ASK, Decision
from sebridge.model.leads import REMIND, REMIND_AFTER, Lead, lead_due
from sebridge.model.records import EventRecord
from sebridge.store import Store
from sebridge.store.transitions import Transitions

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
NOT_BEFORE = T0 + timedelta(minutes=15)
LEAD = 300  # seconds before NotBefore
AT_LEAD = NOT_BEFORE - timedelta(seconds=LEAD)


class Flaky:
    """The store, but the next `fail` reads of the events raise StoreError."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.fail = 0
        self.failed = 0

    @property
    def events(self) -> Flaky:
        return self

    @property
    def transitions(self) -> Transitions:
        return self.store.transitions

    def current(self) -> list[EventRecord]:
        if self.fail:
            self.fail -= 1
            self.failed += 1
            raise StoreError("the store went away")
        return self.store.events.current()


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An `ask` event reminded 300 s before its NotBefore, first seen 15 minutes before it."""
    s = Store(store_url, agent="vm0")
    event = ScheduledEvent("E1", "Redeploy", "Scheduled", ("vm0",), not_before=NOT_BEFORE)
    s.documents.apply(
        Document(1, (event,)),
        [(Transition(TransitionKind.SCHEDULED, event, T0), ["list"])],
        T0,
        decisions={"E1": Decision(ASK, "asked", remind=(LEAD,))},
    )
    yield s
    s.close()


def reminders_in(store: Store) -> list[int | None]:
    return [
        h.transition.remind_before
        for h in store.history.entries()
        if h.transition.kind == TransitionKind.REMINDER
    ]


def test_a_store_error_at_the_lead_is_tried_again_at_the_next_tick(store: Store) -> None:
    flaky = Flaky(store)
    reminders = Reminders(flaky, lambda action: ["list"])
    reminders.record_due(T0)
    assert reminders_in(store) == []  # the lead is still to come
    flaky.fail = 1
    for tick in range(3):  # three ticks at the lead; the first one's read fails
        now = AT_LEAD + timedelta(seconds=tick)
        with contextlib.suppress(StoreError):  # the tick says the store is away
            reminders.record_due(now)
    assert flaky.failed == 1
    assert reminders_in(store) == [LEAD]


def test_a_store_error_at_the_lead_is_tried_again_after_the_workers_back_off(
    store: Store,
) -> None:
    """With a thread of its own: the first round (at start, at the lead) fails; the worker
    tries the same lead again after its back-off and records it once."""
    flaky = Flaky(store)
    flaky.fail = 1
    recorded: list[int] = []
    reminders = Reminders(
        flaky,
        lambda action: ["list"],
        clock=lambda: AT_LEAD + timedelta(seconds=1),
        on_recorded=lambda: recorded.append(1),
    )
    reminders.start()
    try:
        wait_until(lambda: reminders_in(store), message="the reminder after the back-off")
        reminders.wake()  # the document changed: looked at again, said once all the same
        wait_until(lambda: reminders.rounds >= 3, message="a round after the wake")
    finally:
        assert reminders.stop(10.0)
    assert flaky.failed == 1
    assert reminders_in(store) == [LEAD]
    assert recorded == [1]  # the dispatcher was woken for it, once


def test_a_store_error_at_a_remind_after_lead_delays_it_once(store: Store) -> None:
    """The same for a `remind_after` lead (seconds after the event was first announced):
    the store fails at the lead, comes back later; the reminder is recorded once, late."""
    event = ScheduledEvent("E2", "Reboot", "Scheduled", ("vm0",), not_before=NOT_BEFORE)
    store.documents.apply(
        Document(2, (event,)),
        [(Transition(TransitionKind.SCHEDULED, event, T0), ["list"])],
        T0,
        decisions={"E2": Decision(ASK, "asked", remind_after=(120,))},
    )
    flaky = Flaky(store)
    reminders = Reminders(flaky, lambda action: ["list"])
    reminders.record_due(T0)
    at_lead = T0 + timedelta(seconds=120)
    flaky.fail = 2
    for now in (at_lead, at_lead + timedelta(seconds=1)):  # the store is away at the lead
        with pytest.raises(StoreError):
            reminders.record_due(now)
    later = at_lead + timedelta(seconds=90)  # back: said late, once
    assert reminders.record_due(later) == 1
    assert reminders.record_due(later + timedelta(seconds=1)) == 0
    said = [
        h.transition
        for h in store.history.entries()
        if h.transition.kind == TransitionKind.REMINDER
    ]
    assert [(t.event_id, t.remind_after, t.remind_before, t.at) for t in said] == [
        ("E2", 120, None, later)
    ]


@pytest.mark.parametrize(
    ("state", "reminded"),
    [
        (ApprovalState.HELD, True),
        (ApprovalState.PENDING, False),
        (ApprovalState.POSTING, False),
        (ApprovalState.WAITING, False),
        (ApprovalState.POSTED, False),
        (ApprovalState.DRY_RUN, False),
        (ApprovalState.FAILED, False),
        (ApprovalState.ABANDONED, False),
    ],
)
def test_only_a_held_approval_is_reminded_of(store: Store, state: str, reminded: bool) -> None:
    """An approved event is reminded of only while its approval is held (Azure starts it at
    NotBefore all the same), from the hold on; not while it is carried out, under way or
    waiting for hooks."""
    store.approvals.record(Approval("E1", "alice", "slack", T0))
    held_at = T0 + timedelta(seconds=5)
    store.db.execute(
        "UPDATE approvals SET state = ?, done_at = ? WHERE event_id = ?",
        (state, held_at.isoformat(), "E1"),
    )
    reminders = Reminders(store, lambda action: ["list"])
    assert reminders.record_due(AT_LEAD) == int(reminded)
    said = [
        h.transition
        for h in store.history.entries()
        if h.transition.kind == TransitionKind.REMINDER
    ]
    assert [(t.remind_before, t.while_held) for t in said] == ([(LEAD, True)] if reminded else [])


_LEADS = (Lead(REMIND, 600), Lead(REMIND, 300), Lead(REMIND_AFTER, 120))


@pytest.mark.parametrize(
    ("since", "now", "due", "coming"),
    [
        # Not reminded of now (approved, carried out): nothing is due, nothing comes.
        (None, T0 + timedelta(minutes=5), None, None),
        # NotBefore came: Azure starts it, reminders end.
        (T0, NOT_BEFORE, None, None),
        # Before any lead: the first to come is remind_after's (T0 + 2 min).
        (T0, T0 + timedelta(minutes=1), None, T0 + timedelta(minutes=2)),
        # Two passed (2 min after, 600 s before): the latest is said, 300 s before comes.
        (T0, T0 + timedelta(minutes=6), Lead(REMIND, 600), AT_LEAD),
        # Held at minute 6: the leads passed before were said by the hold, none is due.
        (T0 + timedelta(minutes=6), T0 + timedelta(minutes=6), None, AT_LEAD),
    ],
)
def test_the_due_lead_is_the_latest_passed_since_reminding_began(
    since: datetime | None, now: datetime, due: Lead | None, coming: datetime | None
) -> None:
    assert lead_due(_LEADS, NOT_BEFORE, T0, since, now) == (due, coming)

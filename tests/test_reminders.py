"""Reminders (engine/reminders.py): a store error at a reminder's lead loses nothing. The next
lead and what was said change only once the store answered, so the same lead is tried again:
at the next tick without threads, after the worker's back-off with them.

A real store (both dialects) behind a small class that can fail the next read of the events.
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator, Sequence
from datetime import UTC, datetime, timedelta

import pytest

from helpers import wait_until
from sebridge.engine.reminders import Reminders
from sebridge.kernel.errors import StoreError
from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.decision import ASK, Decision
from sebridge.store import EventRecord, Store

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

    def events(self) -> list[EventRecord]:
        if self.fail:
            self.fail -= 1
            self.failed += 1
            raise StoreError("the store went away")
        return self.store.events()

    def record_transition(
        self, transition: Transition, sinks: Sequence[str], now: datetime
    ) -> int | None:
        return self.store.record_transition(transition, sinks, now)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    """An `ask` event reminded 300 s before its NotBefore, first seen 15 minutes before it."""
    s = Store(store_url, agent="vm0")
    event = ScheduledEvent("E1", "Redeploy", "Scheduled", ("vm0",), not_before=NOT_BEFORE)
    s.apply(
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
        for h in store.history()
        if h.transition.kind == TransitionKind.REMINDER
    ]


def test_a_store_error_at_the_lead_is_tried_again_at_the_next_tick(store: Store) -> None:
    flaky = Flaky(store)
    reminders = Reminders(flaky, lambda action: ["list"])
    assert reminders.due(T0)  # at start: looks once
    reminders.round(T0)
    assert reminders_in(store) == [] and not reminders.due(T0)  # the lead is still to come
    flaky.fail = 1
    for tick in range(3):  # three ticks at the lead; the first one's read fails
        now = AT_LEAD + timedelta(seconds=tick)
        if reminders.due(now):
            with contextlib.suppress(StoreError):  # the tick says the store is away
                reminders.round(now)
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

"""When a sink's worker looks at the outbox next: the earliest moment a claim could take a
row, never a row it cannot take ("a due time comes only from work it can take").

The incident: an event's first row backed off (503) while its second waited behind it
(rows of one event go in order). next_due() counted the waiting row as due now, the claim
could not take it, and the worker looked again every 10 ms for as long as the back-off
lasted: 434 claims in 5 s instead of 6, on PostgreSQL about 160 statements a second.

On both dialects: the store's answer, flush()'s own question, and a dispatcher on the
worker's fake clock running a handful of rounds over ten minutes of back-off.
"""

from __future__ import annotations

import threading
from datetime import UTC, datetime, timedelta

from sebridge.engine.dispatch import Dispatcher
from sebridge.kernel.errors import RetryableDeliveryError
from sebridge.model import Document, Receipt, ScheduledEvent, Transition
from sebridge.model.message import Message
from sebridge.store import Store

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
LEASE = timedelta(minutes=2)
BACKING_OFF = timedelta(seconds=300)
BOUND = 10.0  # real seconds a test waits for what takes a moment


def event(event_id: str = "E1", status: str = "Scheduled") -> ScheduledEvent:
    return ScheduledEvent(event_id, "Freeze", status, ("vm0",), "VirtualMachine")


def two_rows(store: Store, at: datetime, event_id: str = "E1") -> None:
    """The event's `scheduled` row and its `started` row behind it, both due at `at`."""
    scheduled, started = event(event_id), event(event_id, "Started")
    store.documents.apply(
        Document(1, (scheduled,)), [(Transition("scheduled", scheduled, at), ["s"])], at
    )
    store.documents.apply(
        Document(2, (started,)), [(Transition("started", started, at), ["s"])], at
    )


# -- the store's answer ---------------------------------------------------------------------


def test_a_row_waiting_behind_its_events_back_off_is_not_due(store: Store) -> None:
    two_rows(store, T0)
    (first,) = store.outbox.claim("s", T0, T0 + LEASE)
    assert store.outbox.begin(first, T0 + LEASE)
    assert store.outbox.retry(first, "503", T0 + BACKING_OFF)  # r1: again at T+300 s
    # r2 is due now but waits behind r1: the claim takes nothing before T+300 s...
    assert store.outbox.claim("s", T0, T0 + LEASE) == []
    # ... so that is when the sink's worker looks next.
    assert store.outbox.next_due("s") == T0 + BACKING_OFF


def test_the_earliest_head_of_any_event_counts(store: Store) -> None:
    two_rows(store, T0, "E1")
    (first,) = store.outbox.claim("s", T0, T0 + LEASE)
    assert store.outbox.begin(first, T0 + LEASE)
    assert store.outbox.retry(first, "503", T0 + BACKING_OFF)
    later = T0 + timedelta(seconds=40)
    two_rows(store, later, "E2")  # another event's rows, due at T+40 s
    assert store.outbox.next_due("s") == later


def test_a_head_under_a_live_claim_is_due_when_the_claim_ends(store: Store) -> None:
    """This agent's own claim too: its worker sends the row; nothing is to be claimed before
    the lease ends (flush() asks its own question: busy())."""
    two_rows(store, T0)
    store.outbox.claim("s", T0, T0 + LEASE)
    assert store.outbox.next_due("s") == T0 + LEASE
    assert store.outbox.next_due("other") is None


def test_a_claim_ending_before_the_rows_retry_leaves_the_retry_time(store: Store) -> None:
    two_rows(store, T0)
    (first,) = store.outbox.claim("s", T0, T0 + LEASE)
    assert store.outbox.begin(first, T0 + LEASE)
    assert store.outbox.retry(first, "503", T0 + BACKING_OFF)
    # Claimed again at T+300 s with a short lease: due at the later of the two.
    at = T0 + BACKING_OFF
    (again,) = store.outbox.claim("s", at, at + timedelta(seconds=5))
    assert store.outbox.next_due("s") == at + timedelta(seconds=5)
    assert store.outbox.retry(again, "503", at + BACKING_OFF)
    assert store.outbox.next_due("s") == at + BACKING_OFF


def test_the_heartbeat_wakes_nobody_for_a_row_behind_its_events_back_off(store: Store) -> None:
    two_rows(store, T0)
    assert store.agents.heartbeat(T0)  # r1 due and claimed by nobody: the workers are woken
    (first,) = store.outbox.claim("s", T0, T0 + LEASE)
    assert store.outbox.retry(first, "503", T0 + BACKING_OFF)
    assert not store.agents.heartbeat(T0)  # r2 is due, but no claim can take it
    assert store.agents.heartbeat(T0 + BACKING_OFF)


# -- flush()'s question ---------------------------------------------------------------------


def test_busy_means_a_row_claimable_now_or_one_this_agent_is_sending(store: Store) -> None:
    assert not store.outbox.busy("s", T0)
    two_rows(store, T0)
    assert store.outbox.busy("s", T0)  # r1 due now
    (first,) = store.outbox.claim("s", T0, T0 + LEASE)
    assert store.outbox.busy("s", T0)  # r1 being sent by this agent
    assert store.outbox.retry(first, "503", T0 + BACKING_OFF)
    assert not store.outbox.busy("s", T0)  # r2 waits behind r1: nothing to flush
    assert store.outbox.busy("s", T0 + BACKING_OFF)
    (again,) = store.outbox.claim("s", T0 + BACKING_OFF, T0 + BACKING_OFF + LEASE)
    assert store.outbox.ack(again, None, T0 + BACKING_OFF)
    assert store.outbox.busy("s", T0 + BACKING_OFF)  # r2 is the head now, and due


# -- the dispatcher on the worker's fake clock ----------------------------------------------


class FakeTime:
    """A clock that moves only when a worker pauses, by the pause's seconds; a pause that
    would pass `end` waits instead (for real) until its worker is woken or stopped."""

    def __init__(self, end: datetime) -> None:
        self.now = T0
        self.end = end
        self.pauses: list[float | None] = []
        self.reached = threading.Event()
        self._lock = threading.Lock()

    def clock(self) -> datetime:
        with self._lock:
            return self.now

    def pause(self, event: threading.Event, seconds: float | None) -> None:
        with self._lock:
            self.pauses.append(seconds)
            if seconds is not None and self.now + timedelta(seconds=seconds) <= self.end:
                self.now += timedelta(seconds=seconds)
                return
            self.reached.set()
        event.wait()


class Down:
    """A sink whose API answers 503 to everything; keeps what it was asked to send, when."""

    def __init__(self, time: FakeTime) -> None:
        self.time = time
        self.asked: list[tuple[str, float]] = []

    def send(self, message: Message) -> Receipt | None:
        at = (self.time.clock() - T0).total_seconds()
        self.asked.append((message.transition.kind, at))
        raise RetryableDeliveryError("503 Service Unavailable")

    def close(self) -> None:
        pass


def test_a_dispatcher_backing_off_runs_a_handful_of_rounds_not_thousands(store: Store) -> None:
    time = FakeTime(end=T0 + timedelta(minutes=10))
    sink = Down(time)
    two_rows(store, T0)
    dispatcher = Dispatcher(
        store,
        {"s": sink},
        vm_name=lambda: "vm0",
        clock=time.clock,
        pause=time.pause,
        jitter=lambda: 0.5,
        max_backoff=300.0,
    )
    dispatcher.start()
    try:
        assert time.reached.wait(BOUND), (
            f"the fake clock never reached ten minutes: the worker waited {len(time.pauses)} times"
        )
    finally:
        dispatcher.stop(1.0)
    # The first row, retried as its back-off says (1, 2, 4 ... s, doubling); the second
    # never overtakes it.
    assert sink.asked == [
        ("scheduled", at) for at in (0.0, 1.0, 3.0, 7.0, 15.0, 31.0, 63.0, 127.0, 255.0, 511.0)
    ]
    # One round per attempt, and the idle look every minute during the long waits.
    assert len(time.pauses) < 30, time.pauses
    assert all(p is None or p > 0 for p in time.pauses), time.pauses


def test_flush_does_not_wait_for_a_row_behind_its_events_back_off(store: Store) -> None:
    now = datetime.now(UTC)
    two_rows(store, now)
    (first,) = store.outbox.claim("s", now, now + LEASE)
    assert store.outbox.retry(first, "503", now + BACKING_OFF)
    dispatcher = Dispatcher(store, {"s": Down(FakeTime(T0))}, vm_name=lambda: "vm0")
    dispatcher.start()
    try:
        assert dispatcher.flush(2.0), "flush waited for a row no claim can take"
    finally:
        dispatcher.stop(1.0)

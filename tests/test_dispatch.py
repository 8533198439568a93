"""The dispatcher: every sink on its own, backoff, permanent failures, bounded retries."""

from __future__ import annotations

import threading
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sebridge.engine.dispatch import Dispatcher
from sebridge.kernel.errors import PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import Document, Receipt, ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message
from sebridge.store import Store

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


class RecordingSink:
    """A sink that keeps what it was sent, and fails or hangs when told to."""

    def __init__(self, name: str) -> None:
        self.name = name
        self.sent: list[Message] = []
        self.failures: list[Exception] = []
        self.hang = threading.Event()  # set = hang until released
        self.release = threading.Event()
        self.receipt: Receipt | None = None

    def send(self, message: Message) -> Receipt | None:
        if self.hang.is_set():
            self.release.wait(10)
        if self.failures:
            raise self.failures.pop(0)
        self.sent.append(message)
        return self.receipt

    def close(self) -> None:
        pass


def event(event_id: str = "E1", status: str = "Scheduled") -> ScheduledEvent:
    return ScheduledEvent(event_id=event_id, event_type="Reboot", status=status, resources=("vm0",))


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def store(make_store: Callable[..., Store]) -> Store:
    # Not conftest's (the daemon's, on each dialect): the dispatcher's own logic, for which a
    # SQLite file is enough; the dialects' claims are test_store's and test_outbox_claim's.
    return make_store()


def dispatcher(store: Store, sinks: list[RecordingSink], clock: Clock) -> Dispatcher:
    return Dispatcher(
        store, {s.name: s for s in sinks}, vm_name=lambda: "vm0", clock=clock, jitter=lambda: 0.5
    )


def schedule(store: Store, sinks: list[str], event_id: str = "E1", at: datetime = T0) -> None:
    e = event(event_id)
    store.documents.apply(
        Document(1, (e,)), [(Transition(TransitionKind.SCHEDULED, e, at), sinks)], at
    )


def test_each_row_is_delivered_once_with_the_message_data(store: Store, clock: Clock) -> None:
    sink = RecordingSink("console")
    schedule(store, ["console"])
    d = dispatcher(store, [sink], clock)
    assert d.deliver_due(sink.name) == 1
    assert d.deliver_due(sink.name) == 0
    (message,) = sink.sent
    assert message.transition.kind == "scheduled" and message.vm_name == "vm0"
    assert store.outbox.pending_count() == 0


def test_retryable_failure_backs_off_then_delivers(store: Store, clock: Clock) -> None:
    sink = RecordingSink("slack")
    sink.failures = [RetryableDeliveryError("503"), RetryableDeliveryError("503")]
    schedule(store, ["slack"])
    d = dispatcher(store, [sink], clock)
    d.deliver_due(sink.name)
    assert sink.sent == [] and store.outbox.next_due("slack") == T0 + timedelta(seconds=1)
    clock.now += timedelta(seconds=1)
    d.deliver_due(sink.name)
    assert store.outbox.next_due("slack") == clock.now + timedelta(seconds=2)  # doubled
    clock.now += timedelta(seconds=2)
    d.deliver_due(sink.name)
    assert len(sink.sent) == 1


def test_retry_after_is_honoured(store: Store, clock: Clock) -> None:
    sink = RecordingSink("slack")
    sink.failures = [RetryableDeliveryError("ratelimited", retry_after=30)]
    schedule(store, ["slack"])
    dispatcher(store, [sink], clock).deliver_due(sink.name)
    assert store.outbox.next_due("slack") == T0 + timedelta(seconds=30)


def test_permanent_failure_is_recorded_and_not_retried(store: Store, clock: Clock) -> None:
    sink = RecordingSink("slack")
    sink.failures = [PermanentDeliveryError("channel_not_found: invite the bot to the channel")]
    schedule(store, ["slack"])
    d = dispatcher(store, [sink], clock)
    d.deliver_due(sink.name)
    clock.now += timedelta(hours=1)
    assert d.deliver_due(sink.name) == 0
    record = store.events.get("E1")
    assert record is not None
    assert record.deliveries[0].state == "failed"
    assert "invite the bot" in (record.deliveries[0].last_error or "")


def test_a_sink_bug_is_retried_not_fatal(store: Store, clock: Clock) -> None:
    sink = RecordingSink("console")
    sink.failures = [KeyError("oops")]
    schedule(store, ["console"])
    d = dispatcher(store, [sink], clock)
    d.deliver_due(sink.name)
    clock.now += timedelta(seconds=2)
    d.deliver_due(sink.name)
    assert len(sink.sent) == 1


def test_retries_stop_an_hour_after_the_event_is_gone(store: Store, clock: Clock) -> None:
    sink = RecordingSink("jira")
    schedule(store, ["jira"])
    store.documents.apply(Document(2, ()), [], T0)  # gone at T0
    sink.failures = [RetryableDeliveryError("down")] * 2
    clock.now = T0 + timedelta(minutes=59)
    d = dispatcher(store, [sink], clock)
    d.deliver_due(sink.name)
    assert store.outbox.pending_count() == 1
    clock.now = T0 + timedelta(hours=2)
    d.deliver_due(sink.name)
    assert store.outbox.pending_count() == 0
    record = store.events.get("E1")
    assert record is not None and "gave up" in (record.deliveries[0].last_error or "")


def test_the_receipt_reaches_later_transitions(store: Store, clock: Clock) -> None:
    sink = RecordingSink("slack")
    sink.receipt = Receipt("C1:1.2", {"channel": "C1", "ts": "1.2"})
    schedule(store, ["slack"])
    d = dispatcher(store, [sink], clock)
    d.deliver_due(sink.name)
    started = event(status="Started")
    store.documents.apply(
        Document(2, (started,)), [(Transition("started", started, T0), ["slack"])], T0
    )
    d.deliver_due(sink.name)
    assert sink.sent[0].receipt is None
    assert sink.sent[1].receipt == Receipt("C1:1.2", {"channel": "C1", "ts": "1.2"})


def test_a_hanging_sink_does_not_delay_another(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/state.db")
    stuck, fine = RecordingSink("jira"), RecordingSink("slack")
    stuck.hang.set()
    schedule(store, ["jira", "slack"], at=datetime.now(UTC))
    d = Dispatcher(store, {"jira": stuck, "slack": fine}, vm_name=lambda: "vm0")
    d.start()
    try:
        d.wake()
        deadline = datetime.now(UTC) + timedelta(seconds=5)
        while not fine.sent and datetime.now(UTC) < deadline:
            threading.Event().wait(0.01)
        assert len(fine.sent) == 1 and stuck.sent == []
    finally:
        stuck.release.set()
        d.stop(timeout=2)
        store.close()
    assert len(stuck.sent) == 1


def test_flush_delivers_what_is_due_and_reports_when_it_cannot(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/state.db")
    sink = RecordingSink("console")
    schedule(store, ["console"], at=datetime.now(UTC))
    d = Dispatcher(store, {sink.name: sink}, vm_name=lambda: "vm0")
    d.start()
    try:
        assert d.flush(5.0) is True
        assert len(sink.sent) == 1
        sink.hang.set()
        schedule(store, ["console"], event_id="E2", at=datetime.now(UTC))
        assert d.flush(0.3) is False
    finally:
        sink.release.set()
        d.stop(timeout=2)
        store.close()


def test_messages_carry_the_approval_link_only_while_approvable(store: Store, clock: Clock) -> None:
    sink = RecordingSink("teams")
    d = Dispatcher(
        store,
        {sink.name: sink},
        vm_name=lambda: "vm0",
        clock=clock,
        jitter=lambda: 0.5,
        approve_url=lambda e: f"https://vm0.example.net/approve/{e.event_id}-token",
    )
    schedule(store, ["teams"])
    started = event(status="Started")
    store.transitions.record(
        Transition(TransitionKind.APPROVED, event(), T0, actor="x"), ["teams"], T0
    )
    store.transitions.record(Transition(TransitionKind.STARTED, started, T0), ["teams"], T0)
    d.deliver_due(sink.name)
    assert [(m.transition.kind, m.approve_url) for m in sink.sent] == [
        ("scheduled", "https://vm0.example.net/approve/E1-token"),
        ("approved", None),
        ("started", None),
    ]


def test_without_links_no_message_carries_one(store: Store, clock: Clock) -> None:
    sink = RecordingSink("teams")
    schedule(store, ["teams"])
    dispatcher(store, [sink], clock).deliver_due(sink.name)
    assert [m.approve_url for m in sink.sent] == [None]

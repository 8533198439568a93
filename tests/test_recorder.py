"""The recorder (engine/record.py): the tick's second half on a worker of its own.

Polls are acted on in the order read; one the store refused stays first in line and is
tried again (the store away loses no document); a stop acts on what still waits, unless
the store is away, and then it returns at once and drops it (IMDS shows its events again at
the next start). `act` here is a function keeping what it was given, as Daemon.act would
record it.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from helpers import wait_until
from sebridge.engine.poll import Polled, TickResult
from sebridge.engine.record import Recorder
from sebridge.kernel.errors import StoreError
from sebridge.kernel.outage import StoreOutage
from sebridge.model import Document

BOUND = 10.0
T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)


def poll(incarnation: int) -> Polled:
    return Polled(Document(incarnation, ()), T0, TickResult())


class Store:
    """What the acts recorded, in order; refuses while `away` is set; may hold an act."""

    def __init__(self) -> None:
        self.recorded: list[int] = []
        self.refused: list[int] = []
        self.away = threading.Event()
        self.hold = threading.Event()  # set: an act waits until released
        self.release = threading.Event()
        self.inside = threading.Event()

    def act(self, polled: Polled) -> None:
        assert polled.document is not None
        incarnation = polled.document.incarnation
        self.inside.set()
        if self.hold.is_set():
            self.release.wait(BOUND)
        if self.away.is_set():
            self.refused.append(incarnation)
            raise StoreError("the store does not answer")
        self.recorded.append(incarnation)


@pytest.fixture
def store() -> Store:
    # Not conftest's: this module's stand-in Store above, whose act() the test holds.
    return Store()


@pytest.fixture
def recorder(store: Store) -> Iterator[Recorder]:
    made = Recorder(store.act, StoreOutage())
    yield made
    store.release.set()
    store.away.clear()
    made.stop(BOUND)


def test_polls_are_recorded_in_the_order_read(store: Store, recorder: Recorder) -> None:
    recorder.start()
    for n in range(1, 6):
        recorder.offer(poll(n))
    wait_until(lambda: store.recorded == [1, 2, 3, 4, 5], BOUND, message=str(store.recorded))


def test_a_poll_the_store_refused_stays_first_and_is_recorded_when_it_answers(
    store: Store, recorder: Recorder
) -> None:
    store.away.set()
    recorder.start()
    recorder.offer(poll(1))
    wait_until(lambda: store.refused, BOUND, message="the store to refuse the first poll")
    recorder.offer(poll(2))
    store.away.clear()  # the store is back: both, in order, after a back-off
    wait_until(lambda: store.recorded == [1, 2], BOUND, message=str(store.recorded))
    assert set(store.refused) == {1}


def test_a_stop_records_what_still_waits(store: Store, recorder: Recorder) -> None:
    store.hold.set()
    recorder.start()
    recorder.offer(poll(1))
    assert store.inside.wait(BOUND)
    recorder.offer(poll(2))
    recorder.offer(poll(3))
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(recorder.stop(BOUND)))
    stopper.start()
    store.release.set()
    stopper.join(BOUND)
    assert stopped == [True]
    assert store.recorded == [1, 2, 3]


def test_a_stop_while_the_store_is_away_drops_what_waits(store: Store, recorder: Recorder) -> None:
    store.away.set()
    recorder.start()
    recorder.offer(poll(1))
    recorder.offer(poll(2))
    wait_until(lambda: store.refused, BOUND, message="the store to refuse the first poll")
    # The worker backs off (a second at most); the stop cuts the back-off short and tries
    # nothing again.
    assert recorder.stop(BOUND)
    assert set(store.refused) == {1} and store.recorded == []

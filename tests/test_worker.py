"""The one worker shape (kernel/worker.py) every long-running loop of the daemon uses.

Wake-ups are never lost, a due time in the past runs at once, stop is safe before start,
during a round and twice, a failing round backs off (never a tight loop) and is logged
without secrets. Races are made deterministic by rounds that wait on events the test sets;
time is a fake clock that moves only when the worker pauses, so back-off is counted over
ten minutes without waiting for them.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

from helpers import wait_until
from sebridge.kernel.redact import scrub
from sebridge.kernel.worker import AT_ONCE, Supervisor, Worker

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
SECRET = "pw-S3CRET-4711"
BOUND = 10.0  # generous: how long a test waits for what must happen at once


class FakeTime:
    """A clock that moves only when the worker pauses: each pause is recorded and moves the
    clock by its seconds. A pause without a limit (waiting to be woken) waits for real."""

    def __init__(self) -> None:
        self.now = T0
        self.pauses: list[float | None] = []

    def clock(self) -> datetime:
        return self.now

    def pause(self, event: threading.Event, seconds: float | None) -> None:
        self.pauses.append(seconds)
        if seconds is None:
            event.wait()
        else:
            self.now += timedelta(seconds=seconds)


@pytest.fixture
def workers() -> Iterator[list[Worker]]:
    """Workers a test made: stopped after it, whatever happened."""
    made: list[Worker] = []
    yield made
    for worker in made:
        worker.stop(BOUND)


def kept(workers: list[Worker], worker: Worker) -> Worker:
    """`worker`, stopped after the test."""
    workers.append(worker)
    return worker


# -- wake-ups ---------------------------------------------------------------------------------


def test_work_that_comes_after_the_round_looked_and_before_it_sleeps_is_not_lost(
    workers: list[Worker],
) -> None:
    """The classic lost wake-up: the round finds nothing, then work comes and its producer
    wakes the worker before the worker waits. No idle timer hides the loss here."""
    queue: list[str] = []
    taken: list[str] = []

    def round() -> None:
        taken.extend(queue)
        queue.clear()
        if not taken and "late" not in queue:  # after looking, before sleeping
            queue.append("late")
            worker.wake()

    worker = kept(workers, Worker("test-worker", round, idle=None))
    worker.start()
    wait_until(lambda: taken == ["late"], BOUND, message="the late work to be taken")


def test_a_wake_during_a_round_makes_another_round_follow(workers: list[Worker]) -> None:
    inside, release = threading.Event(), threading.Event()

    def round() -> None:
        inside.set()
        release.wait(BOUND)

    worker = kept(workers, Worker("test-worker", round, idle=None))
    worker.start()
    assert inside.wait(BOUND)
    worker.wake()  # while the first round runs
    release.set()
    assert worker.wait_round(1, BOUND), "no round followed the wake"


def test_many_producers_waking_at_any_moment_lose_nothing(workers: list[Worker]) -> None:
    lock = threading.Lock()
    queue: list[int] = []
    taken: list[int] = []

    def round() -> None:
        with lock:
            batch = list(queue)
            queue.clear()
        taken.extend(batch)

    worker = kept(workers, Worker("test-worker", round, idle=None))
    worker.start()

    def produce(first: int) -> None:
        for item in range(first, first + 500):
            with lock:
                queue.append(item)
            worker.wake()

    producers = [threading.Thread(target=produce, args=(n * 500,)) for n in range(4)]
    for p in producers:
        p.start()
    for p in producers:
        p.join()
    wait_until(lambda: len(taken) == 2000, BOUND, message=lambda: f"{len(taken)} of 2000")
    assert sorted(taken) == list(range(2000))


def test_a_wake_from_another_thread_ends_a_wait_for_a_far_due_time(
    workers: list[Worker],
) -> None:
    worker = kept(
        workers, Worker("test-worker", lambda: datetime.now(UTC) + timedelta(hours=1), idle=None)
    )
    worker.start()
    assert worker.wait_round(0, BOUND)
    waker = threading.Thread(target=worker.wake)
    waker.start()
    waker.join()
    assert worker.wait_round(1, BOUND), "the wake did not end the hour's wait"


# -- due times ----------------------------------------------------------------------------------


def test_a_due_time_in_the_past_runs_the_next_round_at_once(workers: list[Worker]) -> None:
    time = FakeTime()
    dues = iter([T0 - timedelta(hours=1), AT_ONCE, None])
    worker = kept(
        workers, Worker("test-worker", lambda: next(dues), clock=time.clock, pause=time.pause)
    )
    worker.start()
    assert worker.wait_round(2, BOUND)
    assert worker.stop(BOUND)
    assert time.pauses == [None], "the worker waited before a round that was due"


@pytest.mark.parametrize(
    ("due_in", "idle", "paused"),
    [
        (5.0, 60.0, 5.0),  # due before the idle check: at its time
        (600.0, 60.0, 60.0),  # due later: the idle check comes first
        (600.0, None, 600.0),  # no idle check: at its time
        (None, 60.0, 60.0),  # nothing due: the idle check
    ],
)
def test_the_worker_waits_until_the_due_time_or_the_idle_check(
    workers: list[Worker], due_in: float | None, idle: float | None, paused: float
) -> None:
    time = FakeTime()

    def round() -> datetime | None:
        if worker.rounds:
            worker.stop()
        return None if due_in is None else time.now + timedelta(seconds=due_in)

    worker = kept(
        workers, Worker("test-worker", round, idle=idle, clock=time.clock, pause=time.pause)
    )
    worker.start()
    assert worker.wait_round(1, BOUND)
    assert worker.join(BOUND)
    assert time.pauses[0] == paused


# -- stop -------------------------------------------------------------------------------------


def test_stop_before_start_is_safe_and_the_worker_then_never_runs() -> None:
    ran: list[int] = []

    def round() -> None:
        ran.append(1)

    worker = Worker("never", round)
    assert worker.stop(1.0)
    assert worker.stop(1.0)  # twice
    worker.start()
    assert not worker.started and worker.join(1.0)
    assert ran == [] and worker.rounds == 0
    assert not [t for t in threading.enumerate() if t.name == "never"]


def test_stop_during_a_round_returns_after_that_round_and_no_round_follows(
    workers: list[Worker],
) -> None:
    inside, release = threading.Event(), threading.Event()
    seen_stopping: list[bool] = []

    def round() -> datetime:
        inside.set()
        release.wait(BOUND)
        seen_stopping.append(worker.stopping)
        due: datetime = AT_ONCE
        return due  # more work: only stopping prevents the next round

    worker = kept(workers, Worker("test-worker", round))
    worker.start()
    assert inside.wait(BOUND)
    stopped: list[bool] = []
    stopper = threading.Thread(target=lambda: stopped.append(worker.stop(BOUND)))
    stopper.start()
    stopper.join(0.2)
    assert stopper.is_alive(), "stop() returned while the round was still running"
    release.set()
    stopper.join(BOUND)
    assert stopped == [True]
    assert seen_stopping == [True] and worker.rounds == 1
    assert worker.stop(BOUND)  # twice


def test_stop_without_waiting_then_join(workers: list[Worker]) -> None:
    inside, release = threading.Event(), threading.Event()

    def round() -> None:
        inside.set()
        release.wait(BOUND)

    worker = kept(workers, Worker("test-worker", round))
    worker.start()
    assert inside.wait(BOUND)
    assert not worker.stop(0.0)  # told, not waited for: the round still runs
    release.set()
    assert worker.join(BOUND)


def test_a_round_may_stop_its_own_worker(workers: list[Worker]) -> None:
    def round() -> None:
        worker.stop(BOUND)

    worker = kept(workers, Worker("test-worker", round))
    worker.start()
    wait_until(lambda: worker.rounds == 1 and worker.join(0.1), BOUND, message="the end")


def test_start_twice_runs_one_thread(workers: list[Worker]) -> None:
    worker = kept(workers, Worker("once-only", lambda: None, idle=None))
    worker.start()
    worker.start()
    assert worker.wait_round(0, BOUND)
    assert len([t for t in threading.enumerate() if t.name == "once-only"]) == 1


# -- errors -----------------------------------------------------------------------------------


def test_a_round_that_keeps_raising_backs_off_and_never_spins(workers: list[Worker]) -> None:
    """Ten minutes of a round that always fails, on the fake clock: the waits double from a
    second to the cap (jitter at its middle), so 25 rounds, not 60,000 at 10 ms."""
    time = FakeTime()

    def round() -> None:
        if time.now >= T0 + timedelta(minutes=10):
            worker.stop()
            return
        raise OSError("the store is away")

    worker = Worker(
        "test-worker",
        round,
        clock=time.clock,
        pause=time.pause,
        jitter=lambda: 0.5,
        backoff_base=1.0,
        backoff_cap=30.0,
    )
    kept(workers, worker)
    worker.start()
    assert wait_until(lambda: worker.join(0.1), BOUND, message="ten fake minutes")
    assert worker.rounds == 25
    assert time.pauses[:7] == [1.0, 2.0, 4.0, 8.0, 16.0, 30.0, 30.0]
    assert all(p is not None and p >= 1.0 for p in time.pauses)


def test_a_success_ends_the_back_off(workers: list[Worker]) -> None:
    time = FakeTime()
    outcomes = iter(["raise", "raise", "ok", "raise", "stop"])

    def round() -> None:
        outcome = next(outcomes)
        if outcome == "raise":
            raise RuntimeError("bug")
        if outcome == "stop":
            worker.stop()

    worker = kept(
        workers,
        Worker(
            "test-worker", round, idle=5.0, clock=time.clock, pause=time.pause, jitter=lambda: 0.5
        ),
    )
    worker.start()
    assert wait_until(lambda: worker.join(0.1), BOUND, message="the last round")
    assert time.pauses[:4] == [1.0, 2.0, 5.0, 1.0]


def test_a_wake_does_not_cut_the_back_off_short_but_stop_does(workers: list[Worker]) -> None:
    def round() -> None:
        raise RuntimeError("bug")

    worker = kept(workers, Worker("test-worker", round, backoff_base=3600.0, backoff_cap=3600.0))
    worker.start()
    assert worker.wait_round(0, BOUND)
    for _ in range(10):  # a part woken at every commit would otherwise retry at that pace
        worker.wake()
    assert not worker.wait_round(1, 0.3), "a wake ended the back-off"
    assert worker.stop(BOUND), "stop did not end the back-off"
    assert worker.rounds == 1


def test_a_failed_round_is_logged_with_its_stack_and_without_secrets(
    workers: list[Worker], caplog: pytest.LogCaptureFixture
) -> None:
    def round_that_fails() -> None:
        raise RuntimeError(f"cannot connect to postgresql://u:{SECRET}@db/x")

    worker = Worker(
        "store-listen",
        round_that_fails,
        describe=lambda exc: scrub(str(exc), [SECRET]),
        backoff_base=3600.0,
    )
    kept(workers, worker)
    with caplog.at_level(logging.DEBUG):
        worker.start()
        assert worker.wait_round(0, BOUND)
    (record,) = [r for r in caplog.records if r.name == "sebridge.kernel.worker"]
    text = record.getMessage()
    assert record.levelno == logging.ERROR
    assert "store-listen" in text and "postgresql://u:***@db/x" in text
    assert "round_that_fails" in text  # where it failed: the stack
    assert SECRET not in caplog.text


def test_an_expected_error_is_logged_at_debug_only(
    workers: list[Worker], caplog: pytest.LogCaptureFixture
) -> None:
    def round() -> None:
        raise ConnectionError("away")

    worker = kept(
        workers, Worker("test-worker", round, expected=(ConnectionError,), backoff_base=3600.0)
    )
    with caplog.at_level(logging.DEBUG):
        worker.start()
        assert worker.wait_round(0, BOUND)
    levels = {r.levelno for r in caplog.records if r.name == "sebridge.kernel.worker"}
    assert levels == {logging.DEBUG}


# -- names and the supervisor -----------------------------------------------------------------


def test_the_round_runs_on_a_thread_of_the_workers_name(workers: list[Worker]) -> None:
    names: list[str] = []
    worker = kept(
        workers, Worker("sink-slack", lambda: names.append(threading.current_thread().name))
    )
    worker.start()
    assert worker.wait_round(0, BOUND)
    assert names == ["sink-slack"] and worker.name == "sink-slack"


class Part:
    """A part that says what it was told, in the order told, and how long it was given."""

    def __init__(self, name: str, said: list[str]) -> None:
        self.name, self.said = name, said

    def start(self) -> None:
        self.said.append(f"start {self.name}")

    def stop(self, timeout: float = 0.0) -> bool:
        self.said.append(f"stop {self.name}")
        return True

    def run_once(self) -> None:
        self.said.append(f"round {self.name}")


def test_the_supervisor_starts_in_order_and_stops_in_reverse() -> None:
    said: list[str] = []
    supervisor = Supervisor([("a", Part("a", said)), ("b", Part("b", said))])
    supervisor.add("c", Part("c", said))
    supervisor.start()
    assert supervisor.stop(1.0) == []
    assert said == ["start a", "start b", "start c", "stop c", "stop b", "stop a"]
    assert supervisor.names == ["a", "b", "c"]


def test_the_supervisor_tells_every_worker_even_after_one_used_up_the_deadline(
    workers: list[Worker],
) -> None:
    release = threading.Event()
    first = kept(workers, Worker("first", lambda: None, idle=None))

    def stuck_round() -> None:
        release.wait(BOUND)

    stuck = kept(workers, Worker("stuck", stuck_round))
    supervisor = Supervisor([(w.name, w) for w in (first, stuck)])
    supervisor.start()
    assert first.wait_round(0, BOUND) and stuck.rounds == 0
    left = supervisor.stop(0.1)  # the stuck one, stopped first, uses up the 0.1 s
    assert left[0] == "stuck"
    assert first.stopping, "the worker met after the deadline was not told to stop"
    assert first.join(BOUND)
    release.set()
    assert stuck.join(BOUND)


def test_run_once_runs_each_parts_round_on_the_callers_thread_last_started_first() -> None:
    """`sebridge once` and the tests: the parts that feed others act first (the dispatcher,
    started first, delivers last); nothing is started."""
    said: list[str] = []
    supervisor = Supervisor([("a", Part("a", said)), ("b", Part("b", said))])
    supervisor.run_once()
    assert said == ["round b", "round a"]


def test_a_round_run_once_never_runs_beside_the_threads_round(workers: list[Worker]) -> None:
    inside = threading.Event()
    release = threading.Event()
    entered = threading.Event()
    rounds: list[str] = []
    active: list[int] = [0]
    beside: list[str] = []

    def round() -> None:
        active[0] += 1
        if active[0] > 1:
            beside.append(threading.current_thread().name)
        rounds.append(threading.current_thread().name)
        if len(rounds) == 2:  # the thread's round, woken: it holds the turn until released
            inside.set()
            release.wait(BOUND)
        active[0] -= 1

    def call() -> None:
        entered.set()
        worker.run_once()

    worker = kept(workers, Worker("part", round))
    worker.start()
    assert worker.wait_round(0, BOUND)
    worker.wake()
    assert inside.wait(BOUND)
    caller = threading.Thread(target=call, name="caller")
    caller.start()
    assert entered.wait(BOUND)
    release.set()
    caller.join(BOUND)
    assert rounds == ["part", "part", "caller"] and beside == []

"""The scheduler (engine/schedule.py): the poll loop and the jobs' workers.

The first poll runs at once and polls follow, one at a time, a failing one included; a job
runs on its own thread, first one interval after the start; stop() cuts a poll waiting
for IMDS short (the interrupt) and ends every thread.
"""

from __future__ import annotations

import threading

from helpers import wait_until
from sebridge.engine.schedule import Schedule
from sebridge.engine.services import Job

BOUND = 10.0


def test_polls_follow_one_at_a_time_and_a_failure_does_not_stop_them() -> None:
    inside = 0
    most_inside = 0
    polls = 0
    lock = threading.Lock()

    def poll() -> None:
        nonlocal inside, most_inside, polls
        with lock:
            inside += 1
            most_inside = max(most_inside, inside)
            polls += 1
            n = polls
        try:
            if n == 2:
                raise RuntimeError("a bug in one poll")
        finally:
            with lock:
                inside -= 1

    schedule = Schedule(poll, 0.001, lambda: None)
    schedule.start()
    try:
        wait_until(lambda: polls >= 20, BOUND)
    finally:
        assert schedule.stop(BOUND)
    assert most_inside == 1


def test_a_job_runs_on_a_thread_of_its_own_one_interval_after_the_start() -> None:
    ran: list[str] = []
    polled = threading.Event()
    hourly: list[str] = []
    schedule = Schedule(polled.set, 3600.0, lambda: None)
    schedule.every(Job("often", 0.001, lambda: ran.append(threading.current_thread().name)))
    schedule.every(Job("hourly", 3600.0, lambda: hourly.append("ran")))
    schedule.start()
    try:
        wait_until(lambda: len(ran) >= 3 and polled.is_set(), BOUND)
    finally:
        assert schedule.stop(BOUND)
    assert set(ran) == {"job-often"}
    assert hourly == []  # its first turn is an hour after the start


def test_a_failing_job_runs_again() -> None:
    runs = 0

    def fails() -> None:
        nonlocal runs
        runs += 1
        raise RuntimeError("the Jira search failed")

    schedule = Schedule(lambda: None, 3600.0, lambda: None)
    schedule.every(Job("fails", 0.001, fails))
    schedule.start()
    try:
        wait_until(lambda: runs >= 3, BOUND)
    finally:
        assert schedule.stop(BOUND)


def test_stop_cuts_a_poll_waiting_for_imds_short() -> None:
    interrupted = threading.Event()
    waiting = threading.Event()

    def poll() -> None:  # waits for IMDS until interrupted
        waiting.set()
        interrupted.wait(BOUND * 3)

    schedule = Schedule(poll, 1.0, interrupted.set)
    schedule.start()
    assert waiting.wait(BOUND)
    assert schedule.stop(BOUND)
    assert interrupted.is_set()
    assert not [t for t in threading.enumerate() if t.name in ("poll", "job-often")]

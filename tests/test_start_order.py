"""What `run` does once its parts have started, in order: the first poll goes alone, then
the warm-up (the built-in templates), then the jobs' scheduler (engine/runner.py, issue
26). The first GET is then never slowed by an import or a compile of ours, and the
scheduler's import reuses what compiling the templates freed."""

from __future__ import annotations

import threading
from pathlib import Path

from helpers import RunnerThread, event_gets, wait_until, write_config
from sebridge.cli.runtime import build_runner
from sebridge.engine.runner import FIRST_POLL_WAIT
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import load_config


def _scheduler_running() -> bool:
    return any(t.name == "APScheduler" for t in threading.enumerate())


def test_the_warm_up_comes_after_the_first_poll_and_before_the_jobs(
    sim: Simulator, tmp_path: Path
) -> None:
    cfg = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "s.db",
        vm_name="vm0",
        poll_interval=30.0,  # one GET in all, however late this thread gets a CPU
    )
    runner = build_runner(load_config(cfg))
    seen: list[tuple[int, bool]] = []
    runner.after_start(lambda: seen.append((event_gets(sim), _scheduler_running())))
    run = RunnerThread(runner)
    run.start()
    try:
        wait_until(lambda: bool(seen), 15, message="the work after start")
        wait_until(_scheduler_running, 15, message="the jobs' scheduler")
    finally:
        run.stop()
    assert seen == [(1, False)]  # the first poll was over; no scheduler yet


def test_a_first_poll_that_hangs_holds_the_warm_up_back_a_second_at_most(
    sim: Simulator, tmp_path: Path
) -> None:
    sim.inject("hang", seconds=600)  # the first GET waits (IMDS turning Scheduled Events on)
    cfg = write_config(
        tmp_path / "sebridge.toml", endpoint=sim.url, db=tmp_path / "s.db", vm_name="vm0"
    )
    runner = build_runner(load_config(cfg))
    warmed = threading.Event()
    runner.after_start(warmed.set)
    run = RunnerThread(runner)
    run.start()
    try:
        wait_until(lambda: not sim.faults, 15, message="the hanging GET")
        assert not warmed.wait(FIRST_POLL_WAIT / 2)  # the first poll's turn
        wait_until(warmed.is_set, 15, message="the warm-up, the first poll still waiting")
        wait_until(_scheduler_running, 15, message="the jobs' scheduler")
        assert event_gets(sim) == 0  # the first GET still waits (counted once answered)
    finally:
        run.stop()

"""A pytest plugin (loaded by conftest.py): with `--unmarked-slow-limit SECONDS` (scripts/check
gives 3), the run fails when a test not marked `slow` spent longer than that in its call,
naming each such test, so that `pytest -m "not slow"` stays quick.

Tests are marked `slow` from 2 s on a quiet machine; the limit is 3 s. On a busy machine
every test takes longer for want of a CPU, not because it waits on more, so what counts is
the call's time less the time its thread waited for a CPU (the kernel's run-queue wait,
/proc/thread-self/schedstat), and the limit grows with the load average beyond the
machine's cores (load 6 on 2 cores: 9 s) for what the test's other threads and processes
waited: a crowded machine does not fail a run that a quiet one passes (two suites side by
side took a 1.5 s hypothesis test to 7.7 s). Setup and teardown are not counted: a
module's first test would pay for the module's database.

Reports are read where they are gathered (the xdist controller, or the only process), so
the check sees every worker's tests.
"""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

__all__ = ["SlowCheck"]


def pytest_addoption(parser: pytest.Parser) -> None:
    parser.addoption(
        "--unmarked-slow-limit",
        type=float,
        default=None,
        metavar="SECONDS",
        help="fail the run when a test not marked `slow` takes longer than SECONDS (on a "
        "machine whose load average is within its cores; more on a busier one)",
    )


def pytest_configure(config: pytest.Config) -> None:
    limit = config.getoption("--unmarked-slow-limit")
    if limit is not None and not hasattr(config, "workerinput"):  # not on xdist's workers
        config.pluginmanager.register(SlowCheck(limit), "slow_check_session")


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item: pytest.Item) -> Iterator[None]:
    """Where the test runs (a worker, or the only process): how long its thread waited for
    a CPU, carried to the check in the report's user properties."""
    before = cpu_wait()
    yield
    item.user_properties.append((CPU_WAIT, cpu_wait() - before))


CPU_WAIT = "cpu_wait_seconds"


def cpu_wait() -> float:
    """Seconds this thread has waited on a run queue for a CPU (0 where Linux does not say)."""
    try:
        with open("/proc/thread-self/schedstat", encoding="ascii") as f:
            return int(f.read().split()[1]) / 1e9
    except (OSError, IndexError, ValueError):
        return 0.0


def busy_factor() -> float:
    """How much slower than on a quiet machine a test may run now: the load average per
    core, when above 1."""
    return max(1.0, os.getloadavg()[0] / (os.cpu_count() or 1))


class SlowCheck:
    """Collects the unmarked tests over the limit; fails the session at its end."""

    def __init__(self, limit: float) -> None:
        self.limit = limit
        self.over: list[tuple[str, float, float]] = []  # (test id, seconds, limit then)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        if report.when != "call" or not report.passed or "slow" in report.keywords:
            return
        limit = self.limit * busy_factor()
        waited = dict(report.user_properties).get(CPU_WAIT, 0.0)
        if report.duration - waited > limit:
            self.over.append((report.nodeid, report.duration - waited, limit))

    @pytest.hookimpl(trylast=True)
    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if self.over and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.over:
            return
        terminalreporter.section("tests over the time limit, not marked slow", red=True)
        for nodeid, seconds, limit in self.over:
            terminalreporter.line(f"{seconds:.2f}s, less CPU waits (limit {limit:.1f}s) {nodeid}")
        terminalreporter.line(
            "mark each `@pytest.mark.slow` (or make it quicker): `-m 'not slow'` is the quick run"
        )

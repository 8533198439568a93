"""The check scripts/check runs: a test over the limit that is not marked `slow` fails the
run, by name; a marked one, or a quick one, does not. Each case is a pytest run of its own
(pytester) on a small test file whose tests sleep."""

from __future__ import annotations

import os

import pytest

import slow_check

pytest_plugins = ["pytester"]

TESTS = """
import time
import pytest

def test_sleeps_unmarked():
    time.sleep(0.3)

@pytest.mark.slow
def test_sleeps_marked():
    time.sleep(0.3)

def test_quick():
    pass
"""


@pytest.fixture
def quiet(monkeypatch: pytest.MonkeyPatch) -> None:
    """The machine as a quiet one: whatever else runs on it, the limit stays as given."""
    monkeypatch.setattr(slow_check, "busy_factor", lambda: 1.0)


# The inner runs need none of the plugins installed for the suite (xdist, hypothesis...).
BARE = ("-p", "no:cacheprovider", "-p", "no:xdist", "-p", "no:hypothesispytest")


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(
        'pytest_plugins = ["slow_check"]\n\n'
        "def pytest_configure(config):\n"
        '    config.addinivalue_line("markers", "slow: takes seconds")\n'
    )
    pytester.makepyfile(test_sleepy=TESTS)
    return pytester


@pytest.mark.usefixtures("quiet")
def test_an_unmarked_test_over_the_limit_fails_the_run_and_is_named(
    suite: pytest.Pytester,
) -> None:
    result = suite.runpytest("--unmarked-slow-limit", "0.1", *BARE)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.assert_outcomes(passed=3)  # every test passed: the run failed for the time alone
    named = [line for line in result.outlines if "test_sleepy.py::" in line]
    assert len(named) == 1 and named[0].endswith("test_sleepy.py::test_sleeps_unmarked")
    assert "(limit 0.1s)" in named[0]


@pytest.mark.usefixtures("quiet")
def test_within_the_limit_or_without_the_option_the_run_passes(suite: pytest.Pytester) -> None:
    assert suite.runpytest("--unmarked-slow-limit", "5", *BARE).ret == 0
    assert suite.runpytest(*BARE).ret == 0


def test_the_limit_grows_with_the_load_beyond_the_cores(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(os, "cpu_count", lambda: 2)
    monkeypatch.setattr(os, "getloadavg", lambda: (6.0, 1.0, 1.0))
    assert slow_check.busy_factor() == 3.0
    monkeypatch.setattr(os, "getloadavg", lambda: (1.5, 9.0, 9.0))  # within the cores
    assert slow_check.busy_factor() == 1.0


def _call_report(seconds: float, waited: float) -> pytest.TestReport:
    return pytest.TestReport(
        "t.py::test_x",
        ("t.py", 0, "test_x"),
        {},
        "passed",
        None,
        "call",
        duration=seconds,
        user_properties=[(slow_check.CPU_WAIT, waited)],
    )


@pytest.mark.usefixtures("quiet")
def test_time_spent_waiting_for_a_cpu_is_not_the_tests_own() -> None:
    check = slow_check.SlowCheck(3.0)
    check.pytest_runtest_logreport(_call_report(5.0, 2.5))  # 2.5 s of its own: within
    assert check.over == []
    check.pytest_runtest_logreport(_call_report(5.0, 1.0))  # 4 s of its own: over
    assert check.over == [("t.py::test_x", 4.0, 3.0)]


def test_a_threads_cpu_wait_is_read_and_only_grows() -> None:
    first = slow_check.cpu_wait()
    sum(range(200_000))
    assert 0.0 <= first <= slow_check.cpu_wait()

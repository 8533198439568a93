"""kill -9 at random and right after a sink wrote, with IMDS faults: nothing lost, nothing twice.

The quick variant of bench/kill_test.py (the harness is tests/killer.py): a real `sebridge run`
against the IMDS simulator, the JSON-lines sink and the fake Slack, killed 15 times.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from killer import run_kill_test

# kill -9 of a real `sebridge run`, 15 times: about 15 s
pytestmark = pytest.mark.slow


@pytest.mark.timeout(240)
def test_kill_9_loses_nothing_and_repeats_nothing(tmp_path: Path) -> None:
    report = run_kill_test(tmp_path, kills=15, min_events=24, interval=0.5, seed=10)
    print("\n".join(report.lines()))  # shown when the test fails
    assert report.total_kills == 15
    # Some kills must have landed right after each sink wrote, or the test proved little.
    assert report.kills["jsonl"] >= 1 and report.kills["slack"] >= 1
    assert report.events >= 24 and report.transitions >= report.events
    assert report.undelivered == 0
    for name in ("jsonl", "slack"):
        count = report.sinks[name]
        assert count.transitions == report.transitions, name
        assert (name, count.lost, count.duplicated) == (name, 0, 0)

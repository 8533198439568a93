"""`sebridge demo` as a new user meets it (issue 10, item 8): bad settings refused cleanly,
a prompt on its own line that says when it gives up, --yes that does not ask, and an
approve command that works without an activated venv."""

from __future__ import annotations

import os
import pty
import shlex
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from helpers import cli_env, event_gets, run_cli, wait_until
from sebridge.cli import demo
from sebridge.imds.simulator import Simulator
from sebridge.imds.simulator.scenario import Scenario

# real `sebridge demo` runs: about 30 s for the module, up to 10 s a test
pytestmark = pytest.mark.slow

FAST = "240"  # the script plays out in about 5 s; the Redeploy waits 2.5 s for its answer
BLIND = "600"  # nothing to answer: as fast as the script goes


@pytest.mark.parametrize("scale", ["0", "-5", "nan"])
def test_a_time_scale_that_is_not_positive_is_refused(scale: str) -> None:
    done = run_cli("demo", "--time-scale", scale)
    assert done.returncode == 2
    assert "sebridge demo: time_scale must be positive" in done.stderr
    assert "Traceback" not in done.stderr


def test_yes_approves_without_sending_anyone_elsewhere() -> None:
    done = run_cli("demo", "--yes", "--time-scale", FAST)
    assert done.returncode == 0, done.stderr
    assert "approving it (--yes)" in done.stdout
    assert "another terminal" not in done.stdout
    assert "approved by you (posted)" in done.stdout


def printed_command(stdout: str) -> list[str]:
    (line,) = [ln for ln in stdout.splitlines() if "SEBRIDGE_CONFIG=" in ln]
    return shlex.split(line)[1:]  # without the variable


def test_the_printed_approve_command_runs_without_an_activated_venv() -> None:
    script = Path(sys.executable).parent / "sebridge"  # the venv's console script
    assert script.is_file()
    bare_path = "/usr/bin:/bin"  # no venv on PATH: a fresh terminal
    for argv in ([str(script)], [sys.executable, "-m", "sebridge"]):
        done = subprocess.run(
            [*argv, "demo", "--time-scale", FAST],
            capture_output=True,
            text=True,
            timeout=120,
            env=cli_env(PATH=bare_path),
            stdin=subprocess.DEVNULL,
            check=False,
        )
        assert done.returncode == 0, done.stderr
        command = printed_command(done.stdout)
        assert command[-2] == "approve"
        assert Path(command[0]).is_absolute()
        version = subprocess.run(
            [*command[:-2], "--version"],
            capture_output=True,
            text=True,
            env=cli_env(PATH=bare_path),
            check=False,
        )
        assert version.returncode == 0 and version.stdout.startswith("sebridge "), command


@pytest.fixture
def terminal(monkeypatch: pytest.MonkeyPatch) -> Iterator[int]:
    """stdin is a terminal nobody types into; yields the keyboard's end."""
    keyboard, screen = pty.openpty()
    stdin = os.fdopen(screen, "r")
    monkeypatch.setattr(sys, "stdin", stdin)
    yield keyboard
    stdin.close()
    os.close(keyboard)


def test_the_prompt_has_its_own_line_and_says_when_it_gives_up(
    terminal: int, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "ANSWER_SECONDS", 0.5)
    assert demo.run_demo(time_scale=float(FAST)) == 0
    lines = capsys.readouterr().out.splitlines()
    assert ">>> ...or here: type y and Enter within 0.5 s to approve it now" in lines
    assert any(ln.startswith(">>> no answer in 0.5 s: not approved here") for ln in lines)


def test_an_answer_at_the_prompt_approves(
    terminal: int, capsys: pytest.CaptureFixture[str]
) -> None:
    os.write(terminal, b"y\n")
    assert demo.run_demo(time_scale=float(FAST)) == 0
    out = capsys.readouterr().out
    assert "approved by you (posted)" in out


class BlindAtFirst(Simulator):
    """A simulator that stops answering the daemon's polls (once it polled first, having
    learned its VM's name) before the scenario begins: what a busy machine does to a fast
    demo at worst, every event coming and going between two polls."""

    def load_scenario(self, scenario: Scenario | str | os.PathLike[str]) -> list[str]:
        wait_until(lambda: event_gets(self) >= 1, 30, message="the daemon's first poll")
        self.inject("hang", count=1000)
        return super().load_scenario(scenario)


def test_events_that_came_and_went_unseen_end_the_demo_and_are_named(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(demo, "Simulator", BlindAtFirst)
    assert demo.run_demo(time_scale=float(BLIND), assume_yes=True) == 0
    summary = capsys.readouterr().out.split("\nsummary\n", 1)[1].splitlines()
    assert len(summary) == 4
    assert all(ln.endswith("never seen: it came and went between two polls") for ln in summary), (
        summary
    )

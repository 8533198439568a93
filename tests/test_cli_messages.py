"""What a new user reads from `events`, `history` and a refused `approve` (issue 10, item 8)."""

from __future__ import annotations

from pathlib import Path

import pytest

from helpers import run_cli, write_config
from sebridge.imds.simulator import Simulator


@pytest.fixture
def cfg(tmp_path: Path, sim: Simulator) -> str:
    return str(write_config(tmp_path / "sebridge.toml", endpoint=sim.url, db=tmp_path / "s.db"))


def test_events_before_any_poll_says_so(cfg: str) -> None:
    done = run_cli("events", "--config", cfg)
    assert done.returncode == 0
    assert "has not polled IMDS yet" in done.stdout
    assert "latest document is empty" not in done.stdout


@pytest.mark.slow
def test_events_after_an_empty_document_says_it_is_empty(cfg: str) -> None:
    assert run_cli("once", "--config", cfg).returncode == 0
    done = run_cli("events", "--config", cfg)
    assert done.stdout.strip() == "no events (IMDS's latest document is empty)"


def test_history_of_an_unknown_event_is_an_error(cfg: str) -> None:
    assert run_cli("once", "--config", cfg).returncode == 0
    for extra in ([], ["--json"]):
        done = run_cli("history", "NOT-AN-EVENT", *extra, "--config", cfg)
        assert done.returncode == 1
        assert "unknown event NOT-AN-EVENT" in done.stderr
        assert "no history yet" not in done.stdout


@pytest.mark.slow
def test_refused_cli_approvals_are_in_history(cfg: str, sim: Simulator) -> None:
    event_id = sim.schedule("Reboot")
    assert run_cli("once", "--config", cfg).returncode == 0
    sim.start_event(event_id)
    assert run_cli("once", "--config", cfg).returncode == 0
    refused = run_cli("approve", event_id, "--as", "mallory", "--config", cfg)
    assert refused.returncode == 3
    unknown = run_cli("approve", "NO-SUCH-ID", "--as", "mallory", "--config", cfg)
    assert unknown.returncode == 3

    everything = run_cli("history", "--config", cfg).stdout.splitlines()
    (line,) = [ln for ln in everything if "refused" in ln and event_id in ln]
    assert "by mallory via cli" in line and "already started" in line
    assert any("refused" in ln and "NO-SUCH-ID" in ln for ln in everything)
    # And in the event's own history, matched case-insensitively.
    own = run_cli("history", event_id.lower(), "--config", cfg)
    assert own.returncode == 0
    assert any("refused" in ln and "by mallory via cli" in ln for ln in own.stdout.splitlines())


@pytest.mark.slow
def test_history_is_in_time_order_and_late_refusals_are_one_line(cfg: str, sim: Simulator) -> None:
    event_id = sim.schedule("Reboot")
    assert run_cli("once", "--config", cfg).returncode == 0
    sim.start_event(event_id)
    assert run_cli("once", "--config", cfg).returncode == 0
    assert run_cli("approve", event_id, "--as", "mallory", "--config", cfg).returncode == 3
    sim.complete(event_id)
    assert run_cli("once", "--config", cfg).returncode == 0
    for who in ("bob", "bob", "eve"):  # clicks on an old message, after the end
        assert run_cli("approve", event_id, "--as", who, "--config", cfg).returncode == 3

    lines = run_cli("history", "--config", cfg).stdout.splitlines()
    kinds = [line.split()[2] for line in lines]
    assert kinds == ["scheduled", "started", "refused", "completed", "late"], lines
    assert "by mallory via cli: " in lines[2] and "already started" in lines[2]
    assert lines[4].endswith(
        f"{event_id} 3 refused after the event ended (bob via cli, eve via cli): nothing was done"
    )
    stamps = [line[:19] for line in lines]
    assert stamps == sorted(stamps)

"""The console sink: what a person reads, and a broken template stopping start-up."""

from __future__ import annotations

import io
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sebridge.cli import main as cli
from sebridge.integrations.console.sink import ConsoleSink
from sebridge.integrations.render import Renderer
from sebridge.kernel.errors import PermanentDeliveryError
from sebridge.model import ScheduledEvent, Transition, TransitionKind
from sebridge.model.leads import REMIND, REMIND_AFTER, Lead
from sebridge.model.message import Message

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
EVENT = ScheduledEvent(
    "5DD55B64-45AD-49D3-BBC9-F57D4EA97BD7",
    "Reboot",
    "Scheduled",
    ("web-1", "web-2"),
    not_before=NOW + timedelta(minutes=15),
    not_before_text="Mon, 23 Nov 2026 12:15:00 GMT",
    description="Host server is undergoing maintenance.",
    source="Platform",
    duration_seconds=-1,
)


def line(transition: Transition, **message: object) -> str:
    out = io.StringIO()
    sink = ConsoleSink(Renderer(), stream=out, clock=lambda: NOW)
    sink.send(Message(transition, "web-1", str(message.pop("policy", "ask")), **message))  # type: ignore[arg-type]
    return out.getvalue()


def test_scheduled_line_has_what_a_person_needs() -> None:
    text = line(Transition(TransitionKind.SCHEDULED, EVENT, NOW))
    assert text.endswith("\n") and text.count("\n") == 1
    for part in (
        "SCHEDULED",
        "Reboot",
        EVENT.event_id,
        "2026-11-23 12:15:00 UTC (in 15 min)",
        "source=Platform",
        "web-1 (this VM),web-2",
        "policy=ask",
        "Host server is undergoing maintenance.",
    ):
        assert part in text


def test_approved_problem_and_dry_run_lines() -> None:
    approved = Transition(TransitionKind.APPROVED, EVENT, NOW, actor="alice", via="cli")
    assert "APPROVED" in line(approved) and "by alice via cli" in line(approved)
    problem = Transition(TransitionKind.PROBLEM, EVENT, NOW, note="IMDS refused it")
    assert "IMDS refused it" in line(problem)
    assert "[DRY RUN]" in line(Transition(TransitionKind.SCHEDULED, EVENT, NOW), dry_run=True)


def test_a_broken_template_fails_the_check(tmp_path: Path) -> None:
    (tmp_path / "console").mkdir()
    (tmp_path / "console" / "line.j2").write_text("{{ t.kind ")
    sink = ConsoleSink(Renderer(tmp_path))
    with pytest.raises(PermanentDeliveryError, match=r"line.j2, line 1"):
        sink.check_templates()


def test_a_broken_template_stops_start_up_with_exit_2(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "console").mkdir()
    (tmp_path / "console" / "line.j2").write_text("{% if %}")
    config = tmp_path / "sebridge.toml"
    config.write_text(
        f'[imds]\nendpoint = "http://127.0.0.1:9"\n[store]\nurl = "sqlite:///{tmp_path}/s.db"\n'
        f'[templates]\ndir = "{tmp_path}"\n'
    )
    assert cli.main(["once", "--config", str(config)]) == 2
    assert "configuration error: console: template" in capsys.readouterr().err


def test_the_first_line_names_the_reminders_its_notice_can_never_reach() -> None:
    """15 minutes' notice: a 1200 s `remind` and an 1800 s `remind_after` can never come;
    the scheduled line says so, once (later lines do not)."""
    missed = (Lead(REMIND, 1200), Lead(REMIND_AFTER, 1800))
    text = line(Transition(TransitionKind.SCHEDULED, EVENT, NOW, unreachable=missed))
    assert (
        "; Reminders that can never come (NotBefore is 900 s after it was first announced): "
        "1200 s before NotBefore; 1800 s after it was first announced"
    ) in text
    assert text.count("\n") == 1
    assert "can never come" not in line(Transition(TransitionKind.SCHEDULED, EVENT, NOW))

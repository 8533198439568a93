"""`sebridge run` tries built-in templates after its first poll, a user's at start.

integrations/render.py: Renderer(defer_builtin=True) holds back a sink's check of a
folder no override touches (`later`) until `warm`; every other check runs at once,
where a broken template stops start-up with its name (tests/test_check_all_problems.py
runs that through `run`).
"""

from __future__ import annotations

import io
import logging
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sebridge.integrations.base import tried
from sebridge.integrations.console.sink import ConsoleSink
from sebridge.integrations.render import Renderer
from sebridge.integrations.samples import sample_messages
from sebridge.kernel.errors import PermanentDeliveryError

NOW = datetime(2026, 11, 27, 13, 0, tzinfo=UTC)


def test_a_built_in_folder_is_tried_at_warm_not_before() -> None:
    renderer = Renderer(defer_builtin=True)
    tried_at: list[str] = []
    assert renderer.later("console", lambda: tried_at.append("console"))
    assert tried_at == []
    renderer.warm()
    assert tried_at == ["console"]
    renderer.warm()  # each held-back check runs once
    assert tried_at == ["console"]


def test_without_defer_builtin_every_check_runs_at_once() -> None:
    renderer = Renderer()
    assert not renderer.later("console", lambda: None)


def test_an_overridden_folder_is_tried_at_once(tmp_path: Path) -> None:
    (tmp_path / "console").mkdir()
    (tmp_path / "console" / "line.j2").write_text("{{ t.kind }}")
    (tmp_path / "slack").mkdir()  # a folder with nothing in it overrides nothing
    renderer = Renderer(tmp_path, defer_builtin=True)
    assert renderer.overridden("console") and not renderer.overridden("slack")
    assert not renderer.later("console", lambda: None)
    assert renderer.later("slack", lambda: None)
    assert renderer.later("teams", lambda: None)


def test_a_broken_override_still_stops_the_sink_at_start(tmp_path: Path) -> None:
    (tmp_path / "console").mkdir()
    (tmp_path / "console" / "line.j2").write_text("{{ t.kind ")
    renderer = Renderer(tmp_path, defer_builtin=True)
    with pytest.raises(PermanentDeliveryError, match=r"console/line\.j2 is broken"):
        tried(ConsoleSink(renderer, stream=io.StringIO()), renderer, "console")


def test_a_failing_held_back_check_is_logged_and_does_not_raise(
    caplog: pytest.LogCaptureFixture,
) -> None:
    renderer = Renderer(defer_builtin=True)

    def broken() -> None:
        raise PermanentDeliveryError("console: template console/line.j2 failed: boom")

    ran: list[str] = []
    renderer.later("console", broken)
    renderer.later("slack", lambda: ran.append("slack"))
    with caplog.at_level(logging.ERROR, logger="sebridge.integrations"):
        renderer.warm()
    assert ran == ["slack"]  # the next sink's check still runs
    [record] = [r for r in caplog.records if r.levelno == logging.ERROR]
    assert record.getMessage() == (
        "the built-in console templates failed their check: "
        "console: template console/line.j2 failed: boom"
    )


def test_a_sink_held_back_renders_its_first_line_and_warm_after_it_changes_nothing() -> None:
    renderer = Renderer(defer_builtin=True)
    out = io.StringIO()
    sink = tried(ConsoleSink(renderer, stream=out, clock=lambda: NOW), renderer, "console")
    first = sample_messages()[0]
    sink.send(first)  # the environment is built by the first render
    renderer.warm()
    sink.send(first)
    lines = out.getvalue().splitlines()
    assert len(lines) == 2 and lines[0] == lines[1] and first.transition.event.event_id in lines[0]

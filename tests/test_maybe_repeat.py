"""Host-local sinks mark a line they cannot check: a retry on the console or JSON lines on
stdout, or a JSON lines delivery another agent began (it died; its line, if any, is in its
own host's file). A retry of this agent's own attempt looks in its file and stays unmarked.
The fleet case with real processes: tests/test_fleet_host_local.py.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from sebridge.integrations.console.sink import MAYBE_REPEAT, ConsoleSink
from sebridge.integrations.jsonl.sink import JsonlSink
from sebridge.integrations.render import Renderer
from sebridge.model import ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message

NOW = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
MESSAGE = Message(
    Transition(TransitionKind.SCHEDULED, ScheduledEvent("E1", "Reboot", "Scheduled"), NOW),
    "vm0",
    "ask",
    transition_id=7,
)


def console_line(message: Message) -> str:
    out = io.StringIO()
    ConsoleSink(Renderer(), stream=out, clock=lambda: NOW).send(message)
    return out.getvalue().rstrip("\n")


@pytest.mark.parametrize(("attempt", "marked"), [(0, False), (1, True), (3, True)])
def test_the_console_says_a_retry_may_repeat(attempt: int, marked: bool) -> None:
    assert console_line(replace(MESSAGE, attempt=attempt)).endswith(MAYBE_REPEAT) is marked


@pytest.mark.parametrize(("attempt", "marked"), [(0, False), (1, True)])
def test_jsonl_on_stdout_marks_a_retry(attempt: int, marked: bool) -> None:
    out = io.StringIO()
    JsonlSink("-", stream=out).send(replace(MESSAGE, attempt=attempt))
    assert json.loads(out.getvalue())["maybe_repeat"] is marked


@pytest.mark.parametrize(
    ("begun_elsewhere", "earlier_line", "lines", "marked"),
    [
        (False, False, 1, False),  # our own attempt left nothing: written, unmarked
        (False, True, 1, False),  # our own attempt's line is there: nothing written
        (True, False, 1, True),  # another agent's attempt: written, marked
    ],
)
def test_jsonl_file_marks_only_what_it_could_not_look_for(
    tmp_path: Path, begun_elsewhere: bool, earlier_line: bool, lines: int, marked: bool
) -> None:
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(str(path))
    if earlier_line:
        sink.send(MESSAGE)
    sink.send(replace(MESSAGE, attempt=1, begun_elsewhere=begun_elsewhere))
    written = [json.loads(line) for line in path.read_text().splitlines()]
    assert len(written) == lines
    assert written[-1]["maybe_repeat"] is marked

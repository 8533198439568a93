"""Any text IMDS can send reaches every sink, shown safely, and never fails a delivery.

A property test: hypothesis throws arbitrary Unicode (lone surrogates, controls, bidi
overrides, very long fields) in every string field of an event and its transition at
each sink's real send path (console, JSON lines, Slack, Teams and Jira over their fakes
on 127.0.0.1) and checks that it renders, encodes, keeps each API's limits, and shows
nothing a terminal or a reader would act on.
"""

from __future__ import annotations

import io
import json
import logging
import re
import tempfile
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from fakes.jira import FakeJira
from fakes.smtp import FakeSmtp
from fakes.teams import FakeTeams
from sebridge.config.secrets import Secret
from sebridge.integrations.console.sink import ConsoleSink
from sebridge.integrations.email.settings import EmailSettings
from sebridge.integrations.email.sink import EmailSink
from sebridge.integrations.jira.client import JiraApi
from sebridge.integrations.jira.settings import JiraSettings
from sebridge.integrations.jira.sink import JiraSink
from sebridge.integrations.jsonl.sink import JsonlSink, record
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack import limits
from sebridge.integrations.teams.card import MAX_PAYLOAD
from sebridge.integrations.teams.sink import TeamsSink
from sebridge.kernel.text import VisibleFormatter, displayable, visible
from sebridge.model import ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message
from test_slack_sink import _FakeWebApi
from test_slack_sink import make_sink as slack_sink

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
# What a terminal or a reader would act on rather than show.
ACTING = re.compile(
    "[\x00-\x1f\x7f-\x9f\u2028\u2029\u061c\u200b-\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff]"
)
SURROGATE = re.compile("[\ud800-\udfff]")

HOSTILE = [
    "\ud800",
    "\udfff",
    "\x1b[2J\x1b[31m",
    "\x07\x00",
    "E1\n2026 forged INFO line",
    "\u202eexe.txt",
    "\u2028",
]
# Any code point, surrogates and controls included; sometimes a known nasty; sometimes long.
any_char = st.characters(codec=None, exclude_categories=())
text = st.one_of(
    st.text(any_char, max_size=40),
    st.sampled_from(HOSTILE),
    st.builds(lambda n, c: c * n, st.integers(3000, 12_000), st.sampled_from(["x", "\u202e", "é"])),
)
optional = st.none() | text
KINDS = [k for k in TransitionKind if k not in ("hook_started", "hook_succeeded", "hook_failed")]


@st.composite
def messages(draw: st.DrawFn) -> Message:
    resources = draw(
        st.lists(text, max_size=4)
        | st.builds(lambda n: [f"vm{i}" for i in range(n)], st.integers(0, 500))
    )
    event = ScheduledEvent(
        event_id=draw(text),
        event_type=draw(st.sampled_from(["Reboot", "Freeze"]) | text),
        status=draw(st.sampled_from(["Scheduled", "Started"]) | text),
        resources=tuple(resources),
        resource_type=draw(text),
        not_before=draw(st.none() | st.just(NOW + timedelta(minutes=5))),
        not_before_text=draw(optional),
        description=draw(optional),
        source=draw(optional),
        duration_seconds=draw(st.none() | st.integers(-1, 10**6)),
    )
    t = Transition(
        draw(st.sampled_from(KINDS)),
        event,
        NOW,
        changes=tuple(draw(st.lists(text, max_size=2))),
        actor=draw(optional),
        via=draw(optional),
        note=draw(optional),
    )
    return Message(
        t,
        draw(st.sampled_from(["vm0", "\u202evm0"])),
        draw(st.sampled_from(["ask", "approve", "inform"])),
        approve_url="https://vm0.example.net/approve/abc.def",
        transition_id=draw(st.integers(0, 9)),
    )


PROPERTY = settings(
    max_examples=30,
    database=None,  # nothing written outside the test's own folders
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)


@PROPERTY
@given(messages())
def test_the_console_prints_one_visible_line(message: Message) -> None:
    out = io.StringIO()
    ConsoleSink(Renderer(), stream=out, clock=lambda: NOW).send(message)
    line = out.getvalue()
    assert line.endswith("\n") and line.count("\n") == 1
    assert not ACTING.search(line[:-1])
    line.encode("utf-8")  # what a terminal's stream does


@PROPERTY
@given(messages())
def test_json_lines_stay_valid_and_read_back_as_sent(message: Message) -> None:
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "events.jsonl"
        JsonlSink(str(path)).send(message)
        raw = path.read_bytes()
    assert raw.endswith(b"\n") and raw.count(b"\n") == 1
    assert json.loads(raw.decode("ascii")) == json.loads(json.dumps(record(message)))
    assert json.loads(raw)["description"] == message.transition.event.description  # surrogates too


@pytest.fixture(scope="module")
def slack() -> Iterator[_FakeWebApi]:
    server = _FakeWebApi()
    yield server
    server.close()


def _texts(node: Any) -> Iterator[tuple[str, str]]:
    """(key, string) of every string in a JSON value."""
    if isinstance(node, dict):
        for key, value in node.items():
            if isinstance(value, str):
                yield key, value
            else:
                yield from _texts(value)
    elif isinstance(node, list):
        for value in node:
            yield from _texts(value)


@pytest.mark.slow
@PROPERTY
@given(messages())
def test_slack_gets_blocks_within_its_limits(slack: _FakeWebApi, message: Message) -> None:
    slack.calls.clear()
    slack_sink(slack).send(message)
    ((method, body, _),) = slack.calls
    assert method == "chat.postMessage"
    assert len(body["text"]) <= limits.MAX_TEXT
    blocks = body["blocks"]
    assert len(blocks) <= limits.MAX_BLOCKS
    for block in blocks:
        if block["type"] == "section":
            assert len(block.get("text", {}).get("text", "")) <= limits.SECTION_TEXT
            assert all(len(f["text"]) <= limits.FIELD_TEXT for f in block.get("fields", []))
        if block["type"] == "context":
            assert all(len(e["text"]) <= limits.CONTEXT_TEXT for e in block["elements"])
    for _, value in _texts(body):
        assert not SURROGATE.search(value)
        assert "\u202e" not in value and "\x1b" not in value


@pytest.fixture(scope="module")
def teams() -> Iterator[FakeTeams]:
    with FakeTeams() as fake:
        yield fake


@pytest.mark.slow
@PROPERTY
@given(messages())
def test_teams_gets_a_card_within_its_size(teams: FakeTeams, message: Message) -> None:
    before = len(teams.posts)
    TeamsSink(
        teams.workflows_url, Renderer(), format="adaptive", timeout=5, clock=lambda: NOW
    ).send(message)
    post = teams.posts[before]
    assert post.status == 202
    assert len(json.dumps(post.body, ensure_ascii=False).encode("utf-8")) <= MAX_PAYLOAD
    for _, value in _texts(post.body):
        assert not SURROGATE.search(value)
        assert "\u202e" not in value and "\x1b" not in value


@pytest.fixture(scope="module")
def jira() -> Iterator[tuple[FakeJira, JiraSink]]:
    with FakeJira("cloud") as fake:
        settings = JiraSettings(
            url=fake.url, email=fake.email, api_token=Secret(fake.token), project="OPS"
        )
        yield fake, JiraSink(JiraApi(settings), Renderer(), lag_waits=(0.0,), clock=lambda: NOW)


@pytest.mark.slow
@PROPERTY
@given(messages())
def test_jira_gets_an_issue_it_takes(jira: tuple[FakeJira, JiraSink], message: Message) -> None:
    fake, sink = jira
    receipt = sink.send(message)
    assert receipt is not None
    issue = fake.issues[receipt.external_id]
    assert len(issue["summary"]) <= 255
    for value in (issue["summary"], issue["description"]):
        assert not SURROGATE.search(value)
        assert "\u202e" not in value and "\x1b" not in value


@pytest.fixture(scope="module")
def smtp() -> Iterator[tuple[FakeSmtp, EmailSink]]:
    with FakeSmtp() as fake:
        settings = EmailSettings(
            host="127.0.0.1",
            port=fake.port,
            ca_file=str(fake.cert.cert),
            sender="sebridge@example.com",
            to=("ops@example.com",),
        )
        yield fake, EmailSink(settings, Renderer(), "email", clock=lambda: NOW)


@pytest.mark.slow
@PROPERTY
@given(messages())
def test_a_mail_has_a_one_line_subject_and_parts_that_show_the_text(
    smtp: tuple[FakeSmtp, EmailSink], message: Message
) -> None:
    fake, sink = smtp
    before = len(fake.mails)
    sink.send(message)
    mail = fake.mails[before]
    subject = str(mail.message["Subject"])
    assert "\n" not in subject and "\r" not in subject
    for value in (subject, mail.part("plain"), mail.part("html")):
        assert not SURROGATE.search(value)
        assert "\u202e" not in value and "\x1b" not in value


@pytest.mark.parametrize("hostile", HOSTILE)
def test_a_log_line_stays_one_line_and_shows_what_was_sent(hostile: str) -> None:
    formatter = VisibleFormatter("%(levelname)s %(message)s")
    record = logging.LogRecord(
        "sebridge", logging.INFO, __file__, 1, "scheduled Reboot %s", (hostile,), None
    )
    line = formatter.format(record)
    assert "\n" not in line and not ACTING.search(line)
    assert line == f"INFO scheduled Reboot {visible(hostile)}"
    line.encode("utf-8")


@pytest.mark.parametrize(
    ("sent", "terminal", "card"),
    [
        ("E1\nforged", "E1\\nforged", "E1\nforged"),
        ("\x1b[2J", "\\x1b[2J", "\\x1b[2J"),
        ("a\ud800b", "a\\ud800b", "a\ufffdb"),
        ("\u202eexe.txt", "\\u202eexe.txt", "\\u202eexe.txt"),
        ("tab\there é", "tab\\there é", "tab\there é"),
    ],
)
def test_visible_and_displayable(sent: str, terminal: str, card: str) -> None:
    assert visible(sent) == terminal
    assert displayable(sent) == card

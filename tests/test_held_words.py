"""What a person reads when the drain fails (issue 22, findings 2, 7 and 8), in every channel.

The daemon against the IMDS simulator, a prepare hook that fails as a real process, and
every sink as production builds it against the project's fakes (Slack, Teams, Jira), the
console on a stream and JSON lines in a file; on both store dialects (store_url). The
first message names the action and the rule that chose it; the console's and JSON lines'
first line carry the approval link and the `sebridge approve` command; the held event
says when Azure starts it anyway, which VM is not ready and why, and the two ways out,
and offers no approval; `sebridge events` says the same.
"""

from __future__ import annotations

import io
import json
import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fakes.jira import FakeJira
from fakes.slack import FakeSlack
from fakes.teams import FakeTeams
from helpers import carried, cli_main, write_config
from sebridge.cli.assembly import compose_daemon
from sebridge.config.loader import from_mapping
from sebridge.config.secrets import Secret
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.integrations.console.sink import ConsoleSink
from sebridge.integrations.jira.client import JiraApi
from sebridge.integrations.jira.settings import JiraSettings
from sebridge.integrations.jira.sink import JiraSink
from sebridge.integrations.jsonl.sink import JsonlSink
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack.sink import SlackSink, build_slack_client
from sebridge.integrations.teams.sink import TeamsSink
from sebridge.kernel.clock import utcnow
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from sebridge.policy.compile import build_policy
from sebridge.store import Store
from sebridge.web.links import LinkSigner, approval_link

pytestmark = pytest.mark.usefixtures("no_proxy")

CHANNEL = "C0123456789"
PUBLIC = "https://vm0.example.net"
KEY = "sebridge-words-test-link-key-0123456789"
RULE = "drain first"


class Channels:
    """Every sink of one daemon, and what each of them showed."""

    def __init__(self, tmp_path: Path, slack: FakeSlack, teams: FakeTeams, jira: FakeJira):
        self.console = io.StringIO()
        self.jsonl = tmp_path / "events.jsonl"
        self.slack, self.teams, self.jira = slack, teams, jira
        settings = JiraSettings(url=jira.url, project="OPS", pat=Secret(jira.pat))
        self.sinks = {
            "console": ConsoleSink(Renderer(), self.console),
            "jsonl": JsonlSink(str(self.jsonl)),
            "slack": SlackSink(build_slack_client(slack.bot_token, slack.url), CHANNEL, Renderer()),
            "teams": TeamsSink(teams.workflows_url, Renderer(), timeout=5),
            "jira": JiraSink(JiraApi(settings), Renderer(), lag_waits=(0.1,)),
        }

    def lines(self) -> list[str]:
        return self.console.getvalue().splitlines()

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.jsonl.read_text().splitlines()]

    def slack_said(self) -> tuple[str, list[str]]:
        """The parent message's blocks as text, and its thread's replies."""
        ((channel, ts), parent) = next(
            (k, m) for k, m in self.slack.messages.items() if m.thread_ts is None
        )
        blocks = json.dumps(parent.blocks, ensure_ascii=False)
        return blocks, [r.text for r in self.slack.replies(channel, ts)]

    def cards(self) -> list[str]:
        return [json.dumps(s.card, ensure_ascii=False) for s in self.teams.shown]

    def jira_said(self, event_id: str) -> tuple[str, list[str]]:
        (issue,) = self.jira.issues_of(event_id)
        return issue["description"], self.jira.comments(issue["key"])


@pytest.fixture
def fakes() -> Iterator[tuple[FakeSlack, FakeTeams, FakeJira]]:
    with FakeSlack() as slack, FakeTeams() as teams, FakeJira("datacenter") as jira:
        yield slack, teams, jira


@pytest.fixture
def daemon(
    sim: Simulator,
    store_url: str,
    tmp_path: Path,
    fakes: tuple[FakeSlack, FakeTeams, FakeJira],
) -> Iterator[tuple[Daemon, Channels]]:
    fails = tmp_path / "fails.py"
    fails.write_text("import sys\nprint('lb refused web1')\nsys.exit(1)\n")
    config = from_mapping(
        {
            "policy": {
                "rules": [{"name": RULE, "action": "ask", "prepare": ["drain"]}],
                "prepare_lead_seconds": 60,
            },
            "hooks": {"drain": {"command": [sys.executable, str(fails)]}},
        }
    )
    channels = Channels(tmp_path, *fakes)
    d = compose_daemon(
        ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
        Store(store_url, agent="vm0"),
        channels.sinks,
        policy=build_policy(config.policy),
        vm_name="vm0",
        hooks=config.hooks,
        approve_url=approval_link(PUBLIC, LinkSigner(KEY)),
    )
    yield d, channels
    d.imds.close()
    d.store.close()


def tick(d: Daemon) -> None:
    d.tick()
    for name in d.parts.dispatcher.sinks:
        d.parts.dispatcher.deliver_due(name)


def test_the_decision_the_link_and_a_hold_are_said_in_every_channel(
    sim: Simulator, daemon: tuple[Daemon, Channels]
) -> None:
    d, said = daemon
    event_id = sim.schedule("Redeploy", notice=900)
    tick(d)

    # The first message names the action and the rule that chose it, everywhere.
    (first,) = said.lines()
    assert f'policy=ask: rule "{RULE}"' in first
    # Finding 7: the console's ask line carries the approval link and the command.
    assert f"| approve: {PUBLIC}/approve/" in first
    assert f"or sebridge approve {event_id}" in first
    (line,) = said.records()
    assert line["action"] == "ask" and line["rule"] == RULE
    assert line["approve_url"].startswith(f"{PUBLIC}/approve/")
    assert line["approve_command"] == f"sebridge approve {event_id}"
    parent, _ = said.slack_said()
    assert f'Policy (ask: rule \\"{RULE}\\"): waiting for a person to approve' in parent
    assert f'Policy (ask: rule \\"{RULE}\\")' in said.cards()[0]
    description, _ = said.jira_said(event_id)
    assert f'Decided: ask: rule "{RULE}"' in description

    # A person approves; the drain fails; the approval is held.
    outcome = carried(d, ApprovalRequest(event_id, "alice", "cli"), wait=1.0)
    assert outcome.kind == OutcomeKind.HELD
    tick(d)
    assert sim.start_requests == []
    not_ready = "vm0: failed: drain exit 1: lb refused web1"
    retry = f"sebridge hooks retry {event_id}"
    anyway = f"sebridge approve {event_id} --anyway"

    # Finding 2: the console's held line says when Azure starts it anyway, what is not
    # ready, and the two ways out.
    (held,) = [x for x in said.lines() if " HELD " in x]
    assert "Nothing was sent to Azure." in held
    assert "Azure starts it anyway at " in held and "(in 15 min), ready or not." in held
    assert f"Not ready: {not_ready}." in held
    assert f"Ways out: {retry} (runs the failed prepare hooks again" in held
    assert f"; or {anyway} (starts it now, the VMs not ready)." in held
    assert "approve:" not in held

    (hold,) = [r for r in said.records() if r["transition"] == "held"]
    assert hold["approval"] == "held" and hold["rule"] == RULE
    assert hold["azure_starts_at"] == hold["not_before"]
    assert hold["not_ready"] == [{"vm": "vm0", "state": "failed", "hook": "drain", "why": "exit 1"}]
    assert hold["ways_out"] == [retry, anyway]
    assert "approve_url" not in hold and "approve_command" not in hold

    parent, replies = said.slack_said()
    assert "*State:* :no_entry: Held: Approval by alice held: drain failed (exit 1)" in parent
    assert "*What happens next*" in parent
    assert ":hourglass: Azure starts it anyway at " in parent
    assert '"action_id": "approve"' not in parent  # no Approve button on a held event
    (reply,) = [r for r in replies if r.startswith(":no_entry:")]
    assert "Azure starts it anyway at " in reply and f"not ready: {not_ready}" in reply
    assert f"• {retry}: runs the failed prepare hooks again" in reply
    assert f"• {anyway}: starts it now, the VMs not ready" in reply

    (card,) = [c for c in said.cards() if "⛔ **Held**" in c]
    assert "Azure starts it anyway at " in card
    # A paragraph of its own: markdown would run it into the not-ready list above.
    assert "\\n\\n**Ways out:**\\n\\n- " in card  # (the card as JSON: escaped line breaks)
    assert retry in card and anyway in card and "Approve…" not in card

    _, comments = said.jira_said(event_id)
    (comment,) = [c for c in comments if c.startswith("Held:")]
    assert "Azure starts it anyway at " in comment and f"Not ready: {not_ready}" in comment
    assert f"- {retry}: " in comment and f"- {anyway}: " in comment


def test_sebridge_events_says_what_happens_next_to_a_held_event(
    sim: Simulator, daemon: tuple[Daemon, Channels], store_url: str, tmp_path: Path
) -> None:
    d, _ = daemon
    asked = sim.schedule("Reboot", notice=900)
    held = sim.schedule("Redeploy", notice=900)
    tick(d)
    carried(d, ApprovalRequest(held, "alice", "cli"), wait=1.0)
    tick(d)
    cfg = write_config(
        tmp_path / "c.toml",
        endpoint=sim.url,
        store_url=store_url,
        vm_name="vm0",
        extra=f'[http]\npublic_url = "{PUBLIC}"\nlink_secret = "{KEY}"\n',
    )
    code, out, err = cli_main("events", "--config", str(cfg))
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith(f"! {held} held, not approved: "))
    assert lines[at + 1].startswith("    Azure starts it anyway at ")
    assert lines[at + 2] == "    Not ready: vm0: failed: drain exit 1: lb refused web1"
    assert lines[at + 3].startswith(f"    Ways out: sebridge hooks retry {held} (")
    assert not any(x.startswith(f"! {asked} held") for x in lines)

    code, out, err = cli_main("events", "--config", str(cfg), "--json")
    assert code == 0, err
    by_id = {e["event_id"]: e for e in json.loads(out)}
    # Finding 7: the link where scripts look, only while an approval would be carried out.
    assert by_id[asked]["approve_url"].startswith(f"{PUBLIC}/approve/")
    assert by_id[asked]["approve_command"] == f"sebridge approve {asked}"
    assert "approve_url" not in by_id[held] and "approve_command" not in by_id[held]
    assert by_id[held]["ways_out"] == [
        f"sebridge hooks retry {held}",
        f"sebridge approve {held} --anyway",
    ]
    assert by_id[held]["azure_starts_at"] == by_id[held]["not_before"]
    assert by_id[held]["not_ready"][0]["state"] == "failed"


def test_an_unanswered_reminder_says_when_azure_starts_it_and_how_to_approve(
    sim: Simulator, store_url: str, tmp_path: Path
) -> None:
    shift = [timedelta(0)]

    def clock() -> datetime:
        return utcnow() + shift[0]

    console = io.StringIO()
    config = from_mapping(
        {"policy": {"rules": [{"name": "ask me", "action": "ask", "remind": [300]}]}}
    )
    d = compose_daemon(
        ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
        Store(store_url, agent="vm0"),
        {"console": ConsoleSink(Renderer(), console, clock=clock)},
        policy=build_policy(config.policy),
        vm_name="vm0",
        approve_url=approval_link(PUBLIC, LinkSigner(KEY)),
        clock=clock,
    )
    try:
        event_id = sim.schedule("Redeploy", notice=600)
        tick(d)
        shift[0] = timedelta(seconds=310)
        tick(d)
    finally:
        d.imds.close()
        d.store.close()
    (reminder,) = [x for x in console.getvalue().splitlines() if " REMINDER " in x]
    assert "nobody has approved it yet. Azure starts it anyway at " in reminder
    assert "ready or not." in reminder and "Ways out" not in reminder
    assert f"| approve: {PUBLIC}/approve/" in reminder
    assert reminder.endswith(f" or sebridge approve {event_id}")

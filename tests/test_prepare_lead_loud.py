"""A prepare hook that fails at the prepare lead, before anyone approved, is as loud as a held
approval (issue 34, findings 2 and 3, and two slips of finding 12), in every channel.

The daemon `sebridge run` builds (cli/runtime.py: build_runner) against the IMDS simulator
and the project's fakes (Slack, Teams, Jira, an SMTP server, a webhook receiver), the
console on a stream, JSON lines in a file and the approval page on its own HTTP server; on
both store dialects (store_url). A 15-minute Reboot nobody answered; its rule's drain starts
at the prepare lead and fails. Every channel then says when Azure starts it anyway, which
VM is not ready and why, and the two ways out, and none offers a plain Approve; the
reminder says held; `sebridge events` shows its `!` block. Moving the Jira issue of a held
event gives one comment and one note in `history`.
"""

from __future__ import annotations

import io
import json
import re
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from fakes.jira import FakeJira
from fakes.slack import FakeSlack
from fakes.smtp import FakeSmtp
from fakes.teams import FakeTeams
from fakes.webhook import FakeWebhook
from helpers import carried, cli_main, wait_until, write_config
from rigs.webhook import new_key
from sebridge.cli.runtime import build_runner
from sebridge.engine.daemon import Daemon
from sebridge.imds.simulator import Simulator
from sebridge.integrations.jira.watcher import StatusWatcher
from sebridge.integrations.registry import config_from_mapping
from sebridge.model.approval import OutcomeKind, would_hold
from sebridge.model.approval_request import ApprovalRequest
from sebridge.model.readiness import VmReadiness, VmState
from sebridge.web.links import LinkSigner, approval_link
from sebridge.web.server import HttpServer

pytestmark = pytest.mark.usefixtures("no_proxy")

CHANNEL = "C0123456789"
PUBLIC = "https://vm0.example.net"
LINK_KEY = "sebridge-loud-test-link-key-0123456789"
HOOK_KEY = new_key()
SMTP_USER, SMTP_PASSWORD = "sebridge@example.com", "loud-Password-34"
NOT_READY = "vm0: failed: drain exit 1: lb refused web1"


class Bridge:
    """The daemon as `sebridge run` builds it, ticked by the test, and its HTTP server."""

    def __init__(self, data: dict[str, Any], jsonl: Path) -> None:
        self.console = io.StringIO()
        self.jsonl = jsonl
        runner = build_runner(config_from_mapping(data, environ={}), self.console)
        self.daemon: Daemon = runner.daemon
        (self.server,) = (s for s in runner.services if isinstance(s, HttpServer))
        (self.watcher,) = (s for s in runner.services if isinstance(s, StatusWatcher))
        self.server.start()
        self.http = requests.Session()
        self.http.trust_env = False

    def deliver(self) -> None:
        for name in self.daemon.parts.dispatcher.sinks:
            self.daemon.parts.dispatcher.deliver_due(name)

    def tick(self) -> None:
        self.daemon.tick()
        self.deliver()

    def lines(self) -> list[str]:
        return self.console.getvalue().splitlines()

    def records(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.jsonl.read_text().splitlines()]

    def page(self, event_id: str) -> tuple[int, str]:
        """The approval page's GET for the event's signed link, on this server."""
        record = self.daemon.store.events.get(event_id)
        assert record is not None
        url = approval_link(PUBLIC, LinkSigner(LINK_KEY))(record.event)
        got = self.http.get(f"http://127.0.0.1:{self.server.port}{url[len(PUBLIC) :]}")
        return got.status_code, got.text

    def close(self) -> None:
        self.http.close()
        self.server.stop()
        self.watcher.stop()
        self.daemon.parts.dispatcher.stop(0.0)
        self.daemon.imds.close()
        self.daemon.store.close()


@pytest.fixture
def fakes() -> Iterator[tuple[FakeSlack, FakeTeams, FakeJira, FakeSmtp, FakeWebhook]]:
    with (
        FakeSlack() as slack,
        FakeTeams() as teams,
        FakeJira("datacenter") as jira,
        FakeSmtp(users={SMTP_USER: SMTP_PASSWORD}) as smtp,
        FakeWebhook(keys=[HOOK_KEY]) as hook,
    ):
        yield slack, teams, jira, smtp, hook


@pytest.fixture
def bridge(
    sim: Simulator,
    store_url: str,
    tmp_path: Path,
    fakes: tuple[FakeSlack, FakeTeams, FakeJira, FakeSmtp, FakeWebhook],
) -> Iterator[Bridge]:
    slack, teams, jira, smtp, hook = fakes
    fails = tmp_path / "fails.py"
    fails.write_text("import sys\nprint('lb refused web1')\nsys.exit(1)\n")
    data = {
        "imds": {"endpoint": sim.url, "vm_name": "vm0"},
        "store": {"url": store_url},
        "http": {"listen": "127.0.0.1:0", "public_url": PUBLIC, "link_secret": LINK_KEY},
        "jsonl": {"path": str(tmp_path / "events.jsonl")},
        "slack": {
            "bot_token": slack.bot_token,
            "app_token": slack.app_token,
            "channel": CHANNEL,
            "api_url": slack.url,
        },
        "teams": {"webhook_url": teams.workflows_url},
        "jira": {
            "url": jira.url,
            "project": "OPS",
            "pat": jira.pat,
            "approve_status": "Approved",
        },
        "email": {
            "host": "127.0.0.1",
            "port": smtp.port,
            "ca_file": str(smtp.cert.cert),
            "username": SMTP_USER,
            "password": SMTP_PASSWORD,
            "from": "sebridge <sebridge@example.com>",
            "to": ["ops@example.com"],
        },
        "webhook": {"url": hook.url, "secret": HOOK_KEY},
        # The drain starts at the prepare lead: at once, for a 15-minute notice.
        "policy": {
            "prepare_lead_seconds": 1200,
            "rules": [
                {
                    "name": "drain first",
                    "action": "ask",
                    "prepare": ["drain"],
                    "remind_after": ["1s"],
                }
            ],
        },
        "hooks": {"drain": {"command": [sys.executable, str(fails)]}},
    }
    running = Bridge(data, tmp_path / "events.jsonl")
    yield running
    running.close()


@pytest.mark.slow  # waits for the rule's reminder, 1 s after the first message
def test_a_drain_failed_before_anyone_approved_is_as_loud_as_a_hold_everywhere(
    sim: Simulator,
    bridge: Bridge,
    fakes: tuple[FakeSlack, FakeTeams, FakeJira, FakeSmtp, FakeWebhook],
    store_url: str,
    tmp_path: Path,
) -> None:
    slack, teams, jira, smtp, hook = fakes
    event_id = sim.schedule("Reboot", notice=900)
    bridge.tick()  # scheduled; the drain starts at the prepare lead and fails
    bridge.tick()
    assert sim.start_requests == []
    retry = f"sebridge hooks retry {event_id}"
    anyway = f"sebridge approve {event_id} --anyway"

    # The console: the failure, what happens next, the ways out; no approve command.
    (failed,) = [x for x in bridge.lines() if " HOOK FAILED " in x]
    assert "drain failed (exit 1) on vm0: lb refused web1" in failed
    held = "Nobody approved it yet, and an approval would be held until a way out is taken."
    assert held in failed
    assert "Azure starts it anyway at " in failed and "(in 15 min), ready or not." in failed
    assert f"Not ready: {NOT_READY}." in failed
    assert f"Ways out: {retry} (runs the failed prepare hooks again" in failed
    assert f"; or {anyway} (starts it now, the VMs not ready)." in failed
    assert "approve:" not in failed

    # JSON lines and the webhook: when Azure starts it, the ways out, no approval offered.
    (line,) = [r for r in bridge.records() if r["transition"] == "hook_failed"]
    assert line["approval"] is None
    assert line["azure_starts_at"] == line["not_before"] is not None
    assert line["ways_out"] == [retry, anyway]
    assert line["not_ready"] == [{"vm": "vm0", "state": "failed", "hook": "drain", "why": "exit 1"}]
    assert "approve_url" not in line and "approve_command" not in line
    bodies = [json.loads(p.raw) for p in hook.posts]
    (body,) = [b for b in bodies if b["transition"] == "hook_failed"]
    assert body["azure_starts_at"] == line["azure_starts_at"]
    assert body["ways_out"] == [retry, anyway] and "approve_url" not in body

    # Slack: the event's message has no Approve button; Approve anyway and the ways out.
    ((channel, ts), parent) = next((k, m) for k, m in slack.messages.items() if m.thread_ts is None)
    blocks = json.dumps(parent.blocks, ensure_ascii=False)
    assert '"action_id": "approve"' not in blocks
    assert '"action_id": "approve_anyway"' in blocks
    assert "*What happens next*" in blocks and "Azure starts it anyway at " in blocks
    assert retry in blocks and anyway in blocks
    (reply,) = [r.text for r in slack.replies(channel, ts) if "drain failed" in r.text]
    assert held in reply and "Azure starts it anyway at " in reply and f"• {retry}: " in reply

    # Teams and the mail: what happens next and the ways out; no plain Approve link.
    cards = [json.dumps(s.card, ensure_ascii=False) for s in teams.shown]
    # They hear the hook steps folded into one readiness message (finding 15), as loud.
    (card,) = [c for c in cards if "**Readiness**: not ready: vm0" in c]
    assert held in card and "Azure starts it anyway at " in card
    assert retry in card and anyway in card
    assert "Approve…" not in card
    mails = [m.part("plain") for m in smtp.mails]
    (mail,) = [m for m in mails if "Readiness: not ready: vm0" in m]
    assert held in mail and "Azure starts it anyway at " in mail
    assert f"Not ready: {NOT_READY}" in mail
    assert retry in mail and anyway in mail and "Approve: " not in mail
    # The page's link, not a plain Approve one: the page offers the ways out (finding 10).
    assert "Approval page: http" in mail

    # Jira: the comment says what happens next and the ways out.
    (issue,) = jira.issues_of(event_id)
    (comment,) = [c for c in jira.comments(issue["key"]) if "drain failed" in c]
    assert held in comment and "Azure starts it anyway at " in comment
    assert f"Not ready: {NOT_READY}" in comment
    assert f"- {retry}: " in comment and f"- {anyway}: " in comment

    # The approval page: no Approve button; what is not ready, the ways out, Approve anyway.
    status, page = bridge.page(event_id)
    assert status == 200
    assert "Approve: let it start now" not in page
    assert "an approval would be held" in page and "Azure starts it anyway at " in page
    assert retry in page and '<input type="hidden" name="anyway" value="1">' in page

    # The reminder says held, not "nobody has approved it", and offers no approval.
    def reminded() -> list[dict[str, Any]]:
        bridge.tick()
        return [r for r in bridge.records() if r["transition"] == "reminder"]

    (reminder,) = wait_until(reminded, 5, message="the reminder 1 s after the first message")
    assert reminder["while_held"] is True and reminder["ways_out"] == [retry, anyway]
    assert reminder["approval"] is None  # nobody approved it: held by what readiness says
    assert "approve_url" not in reminder and "approve_command" not in reminder
    (said,) = [x for x in bridge.lines() if " REMINDER " in x]
    assert "still held" in said and "nobody has approved" not in said

    # `sebridge events`: the `!` block, and one wording of a span ("in 15 min" twice).
    cfg = write_config(
        tmp_path / "c.toml",
        endpoint=sim.url,
        store_url=store_url,
        vm_name="vm0",
        # The event's decision (its rule, hooks) is the store's: the daemon's config decided.
        extra=f'[http]\npublic_url = "{PUBLIC}"\nlink_secret = "{LINK_KEY}"\n',
    )
    code, out, err = cli_main("events", "--config", str(cfg))
    assert code == 0, err
    lines = out.splitlines()
    at = next(i for i, x in enumerate(lines) if x.startswith(f"! {event_id} "))
    assert "an approval would be held" in lines[at]
    assert lines[at + 1].startswith("    Azure starts it anyway at ")
    assert lines[at + 2] == f"    Not ready: {NOT_READY}"
    assert lines[at + 3].startswith(f"    Ways out: {retry} (")
    assert not re.search(r"in \d+m\d\ds", out)  # never "in 14m57s" beside "(in 15 min)"
    code, out, err = cli_main("events", "--config", str(cfg), "--json")
    assert code == 0, err
    (shown,) = json.loads(out)
    assert "approve_url" not in shown and "approve_command" not in shown
    assert shown["ways_out"] == [retry, anyway]
    assert shown["azure_starts_at"] == shown["not_before"]
    # `sebridge history`: the reminder says held, and never that an approval is held.
    code, out, err = cli_main("history", event_id, "--config", str(cfg))
    assert code == 0, err
    (line,) = [x for x in out.splitlines() if " reminder " in x]
    assert "s after it was first announced, held: a listed VM is not ready  [" in line


def test_moving_the_jira_issue_of_a_held_event_is_told_once_and_kept_in_history(
    sim: Simulator,
    bridge: Bridge,
    fakes: tuple[FakeSlack, FakeTeams, FakeJira, FakeSmtp, FakeWebhook],
) -> None:
    _, _, jira, _, _ = fakes
    event_id = sim.schedule("Reboot", notice=900)
    bridge.tick()
    bridge.tick()
    # bob approves from the CLI: held, the drain failed.
    held = carried(bridge.daemon, ApprovalRequest(event_id, "bob", "cli"), wait=2.0)
    assert held.kind == OutcomeKind.HELD
    bridge.deliver()
    # Finding 12: a held line says it was said while held.
    (line,) = [r for r in bridge.records() if r["transition"] == "held"]
    assert line["while_held"] is True and line["approval"] == "held"
    (issue,) = jira.issues_of(event_id)
    key = issue["key"]
    before = len(jira.comments(key))

    # Alice moves the issue to "Approved": the watcher's rounds tell it once.
    jira.move(key, "Approved", by="Alice Example")
    for _ in range(3):
        bridge.watcher.run()
        bridge.deliver()
    assert sim.start_requests == []
    # (The rule's reminder, 1 s after the first message, may come meanwhile: not counted.)
    new = [c for c in jira.comments(key)[before:] if not c.startswith("Reminder")]
    assert len(new) == 1, new
    (comment,) = new
    assert "Approval by Alice Example not carried out: held: drain failed (exit 1)" in comment
    assert "Azure starts it anyway at " in comment
    assert f"sebridge hooks retry {event_id}" in comment
    assert f"sebridge approve {event_id} --anyway" in comment

    # history keeps the attempt: who moved it, held, and why.
    notes = [
        e.transition
        for e in bridge.daemon.store.history.entries(event_id=event_id, limit=100)
        if e.transition.actor == "Alice Example"
    ]
    assert [(t.kind, t.via) for t in notes] == [("problem", "jira")]
    assert "held: drain failed (exit 1) on vm0" in str(notes[0].note)


def _watched(bridge: Bridge) -> None:
    """The Jira watcher's run, on a thread of its own as the scheduler's job runs it, the
    daemon's carrier taking the approval it asks for one round at a time on this thread
    (as its own thread would once woken): the request waits for no thread that is not there."""
    watcher = threading.Thread(target=bridge.watcher.run)
    watcher.start()
    while watcher.is_alive():
        bridge.daemon.carrier.run_once()
        watcher.join(0.01)


def test_moving_the_jira_issue_of_an_event_that_would_be_held_holds_it_once(
    sim: Simulator,
    bridge: Bridge,
    fakes: tuple[FakeSlack, FakeTeams, FakeJira, FakeSmtp, FakeWebhook],
) -> None:
    _, _, jira, _, _ = fakes
    event_id = sim.schedule("Reboot", notice=900)
    bridge.tick()
    bridge.tick()  # the drain failed: nobody approved, an approval would be held
    (issue,) = jira.issues_of(event_id)
    key = issue["key"]
    before = len(jira.comments(key))
    jira.move(key, "Approved", by="Alice Example")
    for _ in range(3):
        _watched(bridge)
        bridge.tick()
    assert sim.start_requests == []
    new = [c for c in jira.comments(key)[before:] if not c.startswith("Reminder")]
    assert len(new) == 1, new
    assert new[0].startswith("Held: Approval by Alice Example held: drain failed (exit 1)")
    assert "Azure starts it anyway at " in new[0]
    held = [
        e.transition
        for e in bridge.daemon.store.history.entries(event_id=event_id, limit=100)
        if e.transition.kind == "held"
    ]
    assert [(t.actor, t.via) for t in held] == [("Alice Example", "jira")]


@pytest.mark.parametrize(
    ("vm", "on_failure", "held"),
    [
        (VmReadiness("web2", VmState.FAILED, "drain", "exit 1"), "hold", True),
        (VmReadiness("web2", VmState.AGENT_SILENT), "hold", True),
        # A failure its retries run again reads as waiting: not held yet.
        (
            VmReadiness("web2", VmState.WAITING, "drain", "failed (exit 1), runs again"),
            "hold",
            False,
        ),
        (VmReadiness("web2", VmState.FAILED, "drain", "exit 1"), "approve", False),
        (VmReadiness("web2", VmState.NO_AGENT), "hold", False),
    ],
)
def test_what_readiness_says_holds_an_approval(
    vm: VmReadiness, on_failure: str, held: bool
) -> None:
    ready = VmReadiness("web1", VmState.READY)
    assert would_hold((ready, vm), on_failure, "ask") is held
    assert would_hold((ready, vm), on_failure, "inform") is False  # asks nobody

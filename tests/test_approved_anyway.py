"""Issue 34, finding 6: "anyway" is a fact of its own. After bob's approval was held and
alice ran `sebridge approve ID --anyway`, `events` and `events --json` named bob, and Slack
showed a green "Approved by alice" without "anyway" though the VM started un-drained.

Replayed on both store dialects (conftest.py: store_url) with the daemon of
test_hooks_daemon.py (ticks, hooks as real processes): every message the dispatcher builds
from the store, rendered by the real sinks, and the CLI's `events` and `history`, say who
approved anyway, via what, and which VM was not ready; bob, the first approver, stays in the
history.
"""

from __future__ import annotations

import io
import json
from dataclasses import replace

from fakes.jira import FakeJira
from fakes.slack import FakeSlack
from fakes.teams import FakeTeams
from helpers import ListSink, carried
from sebridge.cli import reading
from sebridge.config.loader import from_mapping
from sebridge.config.secrets import Secret
from sebridge.imds.simulator import Simulator
from sebridge.integrations.console.sink import ConsoleSink
from sebridge.integrations.email.mail import MailBuilder
from sebridge.integrations.jira.client import JiraApi
from sebridge.integrations.jira.settings import JiraSettings
from sebridge.integrations.jira.sink import JiraSink
from sebridge.integrations.jsonl.sink import record
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack.sink import SlackSink, build_slack_client
from sebridge.integrations.teams.sink import TeamsSink
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from test_hooks_daemon import MakeDaemon, make_daemon, tick

__all__ = ["make_daemon"]  # the fixture, imported for pytest

CHANNEL = "C0123456789"
NOT_READY = "vm0: failed: fails exit 1"


def test_an_approval_anyway_after_a_held_one_names_who_did_it_everywhere(
    sim: Simulator, make_daemon: MakeDaemon, store_url: str, slack: FakeSlack, teams: FakeTeams
) -> None:
    sink = ListSink()
    d = make_daemon([{"name": "web", "action": "ask", "prepare": ["fails"]}], sink)
    event_id = sim.schedule("Reboot")
    tick(d)
    # Bob approves from Slack; vm0's drain fails: his approval is held.
    bob = ApprovalRequest(event_id, "bob", "slack", actor_id="U0BOB")
    carried(d, bob, wait=0.5)
    tick(d)
    tick(d)
    assert sink.kinds(event_id)[-1] == "held"
    assert sim.start_requests == []
    # Alice approves anyway from the CLI: carried out, the VM not ready.
    alice = ApprovalRequest(event_id, "alice", "cli", anyway=True)
    assert carried(d, alice, wait=1.0).kind == OutcomeKind.APPROVED
    assert sim.start_requests == [event_id]
    sim.start_event(event_id)
    tick(d)
    tick(d)

    # The store keeps both: the held approver and the one who approved anyway.
    approval = d.store.approvals.get(event_id)
    assert approval is not None
    assert (approval.actor, approval.via, approval.actor_id) == ("bob", "slack", "U0BOB")
    assert (approval.anyway_by, approval.anyway_via, approval.anyway_id) == ("alice", "cli", None)

    # Every message from the approval on names alice, anyway; none names bob as approver.
    (approved,) = sink.of(event_id, "approved")
    (started,) = sink.of(event_id, "started")
    for m in (approved, started):
        assert m.decider == ("alice", None, True)
    # JSON lines (and so the webhook's body): who, anyway, and the VM not ready.
    line = record(approved)
    assert (line["actor"], line["via"], line["approved_by"], line["anyway"]) == (
        "alice",
        "cli",
        "alice",
        True,
    )
    assert [v["vm"] for v in line["not_ready"]] == ["vm0"]
    assert record(started)["approved_by"] == "alice" and record(started)["anyway"] is True
    # The console.
    out = io.StringIO()
    ConsoleSink(Renderer(), out).send(approved)
    assert f"{event_id} anyway by alice via cli (Not ready: {NOT_READY})" in out.getvalue()
    # Slack: a warning, never a green check, in the message and its thread, and it stays said
    # once the event started.
    slack_sink = SlackSink(build_slack_client(slack.bot_token, slack.url), CHANNEL, Renderer())
    receipt = slack_sink.send(sink.of(event_id, "scheduled")[0])
    for m in (approved, started):
        slack_sink.send(replace(m, receipt=receipt))
    (parent,) = [m for m in slack.messages.values() if m.thread_ts is None]
    states = [b["text"]["text"] for b in parent.blocks or () if "text" in b]
    assert "*State:* :arrow_forward: Started (approved anyway by alice)" in states
    replies = [r.text for r in slack.replies(parent.channel, parent.ts)]
    assert replies[0] == f":warning: Approved anyway by alice via cli (Not ready: {NOT_READY})"
    assert ":white_check_mark:" not in " ".join(replies)
    # Teams: the started card says anyway too.
    teams_sink = TeamsSink(teams.workflows_url, Renderer(), timeout=5)
    teams_sink.send(approved)
    teams_sink.send(started)
    first, then = teams.wait_shown(2)
    assert first.card["body"][0]["text"].startswith("⚠️ **Approved anyway** by alice via cli")
    assert then.card["body"][0]["text"] == "▶️ **Started** (approved anyway by alice)"

    # Mail: the started mail says anyway in its subject, its text and its HTML.
    mail = (
        MailBuilder(
            Renderer(),
            sender="sebridge@example.com",
            to=("ops@example.com",),
            domain="example.com",
            section="email",
        )
        .build(started)
        .message
    )
    assert str(mail["Subject"]).endswith(": approved anyway by alice")
    for part in ("plain", "html"):
        body = mail.get_body((part,))
        assert body is not None and "Started (approved anyway by alice)." in body.get_content()
    # Jira: the started comment too.
    with FakeJira("datacenter") as jira:
        settings = JiraSettings(url=jira.url, project="OPS", pat=Secret(jira.pat))
        jira_sink = JiraSink(JiraApi(settings), Renderer(), lag_waits=(0.1,))
        issue = jira_sink.send(sink.of(event_id, "scheduled")[0])
        jira_sink.send(replace(started, receipt=issue))
        (created,) = jira.issues_of(event_id)
        (comment,) = jira.comments(created["key"])
    assert comment.startswith("Started (approved anyway by alice).")

    # `events` and `events --json` name alice, anyway, and bob as the one who asked first.
    config = from_mapping({"store": {"url": store_url}})
    out = io.StringIO()
    assert reading.events(config, as_json=False, show_all=True, out=out) == 0
    assert "alice via cli, anyway (asked first: bob via slack) (posted)" in out.getvalue()
    out = io.StringIO()
    assert reading.events(config, as_json=True, show_all=True, out=out) == 0
    (shown,) = [e for e in json.loads(out.getvalue()) if e["event_id"] == event_id]
    assert shown["approval"] == {
        "actor": "alice",
        "via": "cli",
        "state": "posted",
        "error": None,
        "anyway": True,
        "asked_first_by": {"actor": "bob", "via": "slack"},
    }
    # `history`: bob's held approval stays in the story, then alice's anyway.
    out = io.StringIO()
    assert reading.history(config, event_id=event_id, limit=100, as_json=False, out=out) == 0
    said = out.getvalue().splitlines()
    (held,) = [s for s in said if " held " in s]
    assert "by bob via slack: Approval by bob held: fails failed (exit 1) on vm0" in held
    (carried_line,) = [s for s in said if " approved " in s]
    assert f"{event_id} anyway by alice via cli: Not ready: {NOT_READY}" in carried_line

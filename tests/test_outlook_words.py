"""What happens next, and who did what, in one wording (model/wording/outlook.py), and how each
channel says it: the console's line, the JSON line, and what the fake Slack, Teams and Jira
received. A held event's reminder says held, why, when Azure starts it anyway and the ways
out, never "nobody has approved it yet", and offers no approval (issue 22, finding 2 and
the small wordings)."""

from __future__ import annotations

import io
import json
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest

from fakes.jira import FakeJira
from fakes.slack import FakeSlack
from fakes.teams import FakeTeams
from sebridge.cli.format import history_line
from sebridge.config.secrets import Secret
from sebridge.integrations.console.sink import ConsoleSink
from sebridge.integrations.jira.client import JiraApi
from sebridge.integrations.jira.settings import JiraSettings
from sebridge.integrations.jira.sink import JiraSink
from sebridge.integrations.jsonl.sink import record
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack.sink import SlackSink, build_slack_client
from sebridge.integrations.teams.sink import TeamsSink
from sebridge.model import HookRun, ScheduledEvent, Transition
from sebridge.model.message import Message
from sebridge.model.readiness import VmReadiness, VmState
from sebridge.model.records import HistoryEntry
from sebridge.model.wording.outlook import (
    anyway_command,
    anyway_note,
    approve_command,
    approver,
    decided,
    outlook,
    starts_at,
)

pytestmark = pytest.mark.usefixtures("no_proxy")

NOW = datetime(2026, 11, 23, 8, 0, tzinfo=UTC)
EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
LINK = "https://vm0.example.net/approve/abc.def"
CHANNEL = "C0123456789"
FAILED = VmReadiness("web1", VmState.FAILED, "drain", "exit 1", "draining\nlb refused\n")
READINESS = (VmReadiness("vm0", VmState.READY), FAILED)
RETRY = f"sebridge hooks retry {EVENT_ID}"
ANYWAY = f"sebridge approve {EVENT_ID} --anyway"


def event(**more: Any) -> ScheduledEvent:
    fields: dict[str, Any] = dict(
        resources=("vm0", "web1"),
        not_before=NOW + timedelta(minutes=12, seconds=20),
        description="Host update",
        source="Platform",
        duration_seconds=300,
    )
    fields.update(more)
    return ScheduledEvent(
        fields.pop("event_id", EVENT_ID), fields.pop("event_type", "Reboot"), "Scheduled", **fields
    )


def message(kind: str, **more: Any) -> Message:
    t = Transition(
        kind,
        more.pop("ev", event()),
        NOW,
        actor=more.pop("actor", None),
        via=more.pop("via", None),
        hook=more.pop("hook", None),
        remind_before=more.pop("remind_before", None),
        note=more.pop("note", ""),
    )
    return Message(t, "vm0", more.pop("policy", "ask"), **more)


def held_reminder(**more: Any) -> Message:
    return message(
        "reminder",
        remind_before=600,
        approval_state="held",
        readiness=READINESS,
        prepare=("drain",),
        approve_url=LINK,
        rule="business hours",
        **more,
    )


# ------------------------------------------------------------------ the words


def test_when_azure_starts_it_in_utc_and_minutes() -> None:
    assert starts_at(event(), NOW) == "at 2026-11-23 08:12:20 UTC (in 12 min)"
    unknown = event(not_before=None, not_before_text="soon")
    assert starts_at(unknown, NOW) == 'at NotBefore, which IMDS sent as "soon"'


def test_who_approved_is_said_once() -> None:
    assert approver("policy", "policy", "night freeze") == 'policy (rule "night freeze")'
    assert approver("policy", "policy") == "policy"
    assert (
        approver("approval link (carol (on-call))", "link") == "carol (on-call) via approval link"
    )
    assert approver("approval link", "link") == "approval link"
    assert approver("alice", "cli") == "alice via cli"
    assert approver("alice", None) == "alice"


def test_the_decision_names_the_action_and_the_rule() -> None:
    assert decided("ask", "business hours") == 'ask: rule "business hours"'
    assert decided("ask", "no rule matched") == "ask: no rule matched"
    assert decided("approve", "") == "approve"


def test_commands_name_the_id_as_events_shows_it_and_paste_as_they_stand() -> None:
    assert approve_command(EVENT_ID) == f"sebridge approve {EVENT_ID}"
    # A hostile id: escaped as `events` shows it (no line break acts), quoted for a shell.
    assert anyway_command("a b\nc") == "sebridge approve 'a b\\nc' --anyway"


def test_only_a_held_event_has_ways_out_and_an_ended_one_no_start_time() -> None:
    held = outlook(event(), approval="held", readiness=READINESS, now=NOW)
    assert held.held and held.ways_out[0][0] == RETRY and held.ways_out[1][0] == ANYWAY
    assert held.not_ready == ("web1: failed: drain exit 1: lb refused",)
    asked = outlook(event(), approval=None, readiness=(), now=NOW)
    assert asked.starts.startswith("Azure starts it anyway at ") and asked.ways_out == ()
    over = outlook(event(), approval="held", readiness=READINESS, now=NOW, over=True)
    assert over.starts == "" and over.ways_out == ()


# ------------------------------------------------------------------ a held event's reminder


def test_the_console_says_a_held_reminder_is_held_with_the_ways_out() -> None:
    out = io.StringIO()
    ConsoleSink(Renderer(), out, clock=lambda: NOW).send(held_reminder())
    line = out.getvalue()
    assert "nobody has approved" not in line and "approve:" not in line
    assert "still held: a listed VM is not ready, nothing was sent to Azure." in line
    assert "Azure starts it anyway at 2026-11-23 08:12:20 UTC (in 12 min), ready or not." in line
    assert "Not ready: web1: failed: drain exit 1: lb refused." in line
    assert f"Ways out: {RETRY} (" in line and f"; or {ANYWAY} (" in line


def test_the_json_line_of_a_held_reminder_carries_what_happens_next() -> None:
    line = record(held_reminder())
    assert line["approval"] == "held" and line["rule"] == "business hours"
    assert line["action"] == "ask" and line["azure_starts_at"] == "2026-11-23T08:12:20+00:00"
    assert line["not_ready"] == [
        {"vm": "web1", "state": "failed", "hook": "drain", "why": "exit 1"}
    ]
    assert line["ways_out"] == [RETRY, ANYWAY]
    assert "approve_url" not in line and "approve_command" not in line


def test_slack_replies_held_to_a_held_reminder_and_offers_no_button(slack: FakeSlack) -> None:
    sink = SlackSink(build_slack_client(slack.bot_token, slack.url), CHANNEL, Renderer())
    receipt = sink.send(message("scheduled", approve_url=LINK))
    sink.send(held_reminder(receipt=receipt))
    ((channel, ts), parent) = next((k, m) for k, m in slack.messages.items() if m.thread_ts is None)
    (reply,) = slack.replies(channel, ts)
    assert reply.text.startswith(":alarm_clock: Reminder: this Reboot is still held")
    assert "nobody has approved" not in reply.text
    assert "Azure starts it anyway at " in reply.text
    assert "• not ready: web1: failed: drain exit 1: lb refused" in reply.text
    assert f"• {RETRY}: " in reply.text and f"• {ANYWAY}: " in reply.text
    blocks = json.dumps(parent.blocks)
    assert '"action_id": "approve"' not in blocks and "*What happens next*" in blocks


def test_teams_says_held_on_a_held_reminder_card_without_approve(teams: FakeTeams) -> None:
    TeamsSink(teams.workflows_url, Renderer(), timeout=5, clock=lambda: NOW).send(held_reminder())
    (shown,) = teams.wait_shown(1)
    card = json.dumps(shown.card, ensure_ascii=False)
    assert "⏰ **Reminder**: still held" in card and "nobody has approved" not in card
    assert "Azure starts it anyway at 2026-11-23 08:12:20 UTC (in 12 min)" in card
    assert RETRY in card and ANYWAY in card
    assert "Approve…" not in card and "actions" not in shown.card
    # The readiness shown is labelled with when it was read (the card cannot change later).
    assert "Readiness at 2026-11-23 08:00:00 UTC" in card


def test_jira_comments_held_on_a_held_reminder() -> None:
    with FakeJira("datacenter") as jira:
        settings = JiraSettings(url=jira.url, project="OPS", pat=Secret(jira.pat))
        sink = JiraSink(JiraApi(settings), Renderer(), lag_waits=(0.1,))
        receipt = sink.send(message("scheduled", rule="business hours"))
        sink.send(held_reminder(receipt=receipt))
        (issue,) = jira.issues_of(EVENT_ID)
        (comment,) = jira.comments(issue["key"])
    assert comment.startswith("Reminder: still held (a listed VM is not ready")
    assert "Azure starts it anyway at " in comment and "Not ready: web1: failed" in comment
    assert f"- {RETRY}: " in comment and f"- {ANYWAY}: " in comment
    assert LINK not in comment and "Approve it" not in comment


# ------------------------------------------------------------------ the small wordings


def test_a_freeze_the_policy_approves_offers_no_approve_button(teams: FakeTeams) -> None:
    freeze = event(event_type="Freeze", duration_seconds=5)
    m = message("scheduled", ev=freeze, policy="approve", approve_url=LINK, rule="short freeze")
    assert not m.approvable
    TeamsSink(teams.workflows_url, Renderer(), timeout=5, clock=lambda: NOW).send(m)
    (shown,) = teams.wait_shown(1)
    card = json.dumps(shown.card, ensure_ascii=False)
    assert 'Policy (approve: rule \\"short freeze\\"): sebridge approves this at once' in card
    assert "Approve…" not in card and "actions" not in shown.card


def test_a_policy_approval_is_said_once_with_its_rule(teams: FakeTeams) -> None:
    m = message("approved", actor="policy", via="policy", rule="night freeze")
    out = io.StringIO()
    ConsoleSink(Renderer(), out, clock=lambda: NOW).send(m)
    assert 'APPROVED  Reboot    C7061BAC-AFDC-4513-B24B-AA5F13A16123 by policy (rule "night' in (
        out.getvalue()
    )
    assert "via policy" not in out.getvalue()
    TeamsSink(teams.workflows_url, Renderer(), timeout=5, clock=lambda: NOW).send(m)
    (shown,) = teams.wait_shown(1)
    assert shown.card["body"][0]["text"] == '✅ **Approved** by policy (rule "night freeze")'


def test_a_late_hook_card_shows_what_its_run_reported_not_todays_readiness(
    teams: FakeTeams,
) -> None:
    """A hook_failed card delivered late must not list readiness read at delivery as if
    that run had reported it: the card says its own run; a hold and a reminder list every
    VM, labelled with when it was read."""
    run = HookRun("drain", "prepare", "web1", exit_code=1, why="exit 1", output="lb refused")
    ready_now = (VmReadiness("vm0", VmState.READY), VmReadiness("web1", VmState.READY))
    m = message("hook_failed", hook=run, readiness=ready_now, prepare=("drain",))
    TeamsSink(teams.workflows_url, Renderer(), timeout=5, clock=lambda: NOW).send(m)
    (shown,) = teams.wait_shown(1)
    card = json.dumps(shown.card, ensure_ascii=False)
    assert "drain failed (exit 1) on web1: lb refused" in card
    assert "web1: ready" not in card and "Readiness" not in card


def test_a_recover_hooks_json_line_has_no_imds_status() -> None:
    """A recover hook runs after the event left IMDS: its line carries no status as if
    the event were still Started."""
    started = event(not_before=None)
    started = ScheduledEvent(EVENT_ID, "Reboot", "Started", started.resources)
    run = HookRun("undrain", "recover", "vm0", exit_code=0, seconds=0.4)
    line = record(message("hook_succeeded", ev=started, hook=run))
    assert line["status"] is None and line["stage"] == "recover"
    prepare = HookRun("drain", "prepare", "vm0", exit_code=0, seconds=0.4)
    assert record(message("hook_succeeded", hook=prepare))["status"] == "Scheduled"


def test_history_says_who_approved_once() -> None:
    policy = Transition("approved", event(), NOW, actor="policy", via="policy")
    line = history_line(HistoryEntry(1, NOW, policy, ()))
    assert line.endswith(f"{EVENT_ID} by policy") and "via policy" not in line
    link = Transition("approved", event(), NOW, actor="approval link (carol (on-call))", via="link")
    assert history_line(HistoryEntry(2, NOW, link, ())).endswith(
        "by carol (on-call) via approval link"
    )


def test_an_approval_anyway_names_its_approver_once_in_every_channel(
    slack: FakeSlack, teams: FakeTeams
) -> None:
    """The carrier's note of an approval anyway ("approved anyway by bob; not ready: ...")
    beside the sinks' "by bob via cli": each channel says who once, "anyway", and the VMs
    not ready."""
    unready = "web1: failed: drain exit 1"
    note = anyway_note("bob", unready)
    assert note == f"approved anyway by bob; not ready: {unready}"
    m = message("approved", actor="bob", via="cli", note=note)
    out = io.StringIO()
    ConsoleSink(Renderer(), out, clock=lambda: NOW).send(m)
    assert (
        out.getvalue().rstrip().endswith(f"{EVENT_ID} anyway by bob via cli (Not ready: {unready})")
    )
    assert history_line(HistoryEntry(1, NOW, m.transition, ())).endswith(
        f"{EVENT_ID} anyway by bob via cli: Not ready: {unready}"
    )
    TeamsSink(teams.workflows_url, Renderer(), timeout=5, clock=lambda: NOW).send(m)
    (shown,) = teams.wait_shown(1)
    assert shown.card["body"][0]["text"] == (
        f"⚠️ **Approved anyway** by bob via cli (Not ready: {unready})"
    )
    sink = SlackSink(build_slack_client(slack.bot_token, slack.url), CHANNEL, Renderer())
    receipt = sink.send(message("scheduled"))
    sink.send(message("approved", actor="bob", via="cli", note=note, receipt=receipt))
    ((channel, ts), _) = next((k, m) for k, m in slack.messages.items() if m.thread_ts is None)
    (reply,) = slack.replies(channel, ts)
    assert reply.text.startswith(":warning: Approved anyway by ")  # not a green check
    assert reply.text.count("bob") == 1 and f"(Not ready: {unready})" in reply.text
    with FakeJira("datacenter") as jira:
        settings = JiraSettings(url=jira.url, project="OPS", pat=Secret(jira.pat))
        jira_sink = JiraSink(JiraApi(settings), Renderer(), lag_waits=(0.1,))
        receipt = jira_sink.send(message("scheduled"))
        jira_sink.send(message("approved", actor="bob", via="cli", note=note, receipt=receipt))
        (issue,) = jira.issues_of(EVENT_ID)
        (comment,) = jira.comments(issue["key"])
    assert comment.startswith("Approved anyway by bob via cli: StartRequests sent to Azure")
    assert comment.count("bob") == 1 and f"Not ready: {unready}." in comment


def test_a_reminder_recorded_while_held_is_held_without_the_stores_state() -> None:
    """Transition.while_held (the reminders worker's) says held when the message knows no
    approval state of the store: the console and the JSON line say held and the ways out."""
    t = Transition("reminder", event(), NOW, remind_after=600, while_held=True)
    m = Message(t, "vm0", "ask", readiness=READINESS, prepare=("drain",), approve_url=LINK)
    assert m.held and not m.approvable and m.anyway
    out = io.StringIO()
    ConsoleSink(Renderer(), out, clock=lambda: NOW).send(m)
    assert "still held: a listed VM is not ready" in out.getvalue()
    assert "nobody has approved" not in out.getvalue()
    line = record(m)
    assert line["while_held"] is True and line["ways_out"] == [RETRY, ANYWAY]
    assert "approve_url" not in line
    # The store's state at delivery, when known, is what the message says.
    assert not Message(t, "vm0", "ask", approval_state="posted").held


# ------------------------------------------------------------------ the alarm: started_unready

# The note names the VMs and why; each channel says "started while not ready" once (issue 34:
# "Started while not ready: started while not ready: ...").
UNREADY = "web1: failed: drain exit 1"


def said_once(text: str) -> bool:
    return text.lower().count("started while not ready") == 1


def alarm(**more: Any) -> Message:
    started = event(not_before=None)
    return message("started_unready", ev=started, note=UNREADY, **more)


def test_the_console_and_json_lines_raise_the_alarm_with_the_vms() -> None:
    out = io.StringIO()
    ConsoleSink(Renderer(), out).send(alarm())
    said = out.getvalue()
    assert f"STARTED UNREADY Reboot    {EVENT_ID} ALARM: started while not ready: {UNREADY}" in said
    assert said_once(said)
    line = record(alarm(), maybe_repeat=False)
    assert (line["transition"], line["note"]) == ("started_unready", UNREADY)


def test_slack_shows_the_alarm_in_the_channel_not_only_the_thread(slack: FakeSlack) -> None:
    sink = SlackSink(build_slack_client(slack.bot_token, slack.url), CHANNEL, Renderer())
    receipt = sink.send(message("scheduled"))
    sink.send(message("hook_failed", receipt=receipt, hook=HookRun("drain", "prepare", "web1")))
    sink.send(alarm(receipt=receipt))
    ((channel, ts), _) = next((k, m) for k, m in slack.messages.items() if m.thread_ts is None)
    hook_reply, alarm_reply = slack.replies(channel, ts)
    assert not hook_reply.broadcast  # a note stays in the thread
    assert alarm_reply.broadcast and "web1: failed: drain exit 1" in alarm_reply.text
    assert said_once(alarm_reply.text)


def test_teams_posts_the_alarm_card_and_jira_comments_it(teams: FakeTeams) -> None:
    TeamsSink(teams.workflows_url, Renderer(), timeout=5, clock=lambda: NOW).send(alarm())
    (shown,) = teams.wait_shown(1)
    assert "web1: failed: drain exit 1" in json.dumps(shown.card, ensure_ascii=False)
    assert said_once(json.dumps(shown.card, ensure_ascii=False))
    with FakeJira("datacenter") as jira:
        settings = JiraSettings(url=jira.url, project="OPS", pat=Secret(jira.pat))
        sink = JiraSink(JiraApi(settings), Renderer(), lag_waits=(0.1,))
        receipt = sink.send(message("scheduled"))
        sink.send(alarm(receipt=receipt))
        (issue,) = jira.issues_of(EVENT_ID)
        (comment,) = jira.comments(issue["key"])
    assert "web1: failed: drain exit 1" in comment and said_once(comment)

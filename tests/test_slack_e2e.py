"""Slack end to end: the daemon in this process, the IMDS simulator and the fake Slack on sockets.

Everything is real except Slack and IMDS themselves: `build_daemon(config, serve=True)` builds
the Slack sink and the click service from a Config (Socket Mode with slack_bolt's
SocketModeHandler, or HTTP mode on waitress), `daemon.run()` polls the simulator on a thread,
and clicks arrive the way Slack sends them (a block_actions envelope on the websocket, or a
signed form POST to /slack/events). Outcomes are awaited with bounded polls, never sleeps.
"""

from __future__ import annotations

import contextlib
import io
import itertools
import json
import logging
import re
import sys
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.error import HTTPError
from urllib.request import Request, urlopen

import pytest

from fakes.slack import DEFAULT_SCOPES, FakeMessage, FakeSlack
from helpers import RunnerThread, lines_of, read_jsonl, threads_left, wait_until
from sebridge.cli import main as cli
from sebridge.cli import reading
from sebridge.cli.runtime import build_runner
from sebridge.config.loader import Config
from sebridge.engine.daemon import Daemon
from sebridge.engine.runner import Runner
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.integrations.slack.names import SlackNames
from sebridge.integrations.slack.sink import build_slack_client
from sebridge.web.server import HttpServer

OPS = "C0123456789"
ONCALL = "S0456EFGH"
APPROVERS = ["U0AAA", ONCALL]
SECRET = "8f742231b10e8888abcd99yyyzzz85a5"  # the HTTP-mode signing secret
POLL = 0.2
# No proxy (slack_sdk honours HTTP(S)_PROXY), no stray config, the root logger restored, and
# no thread of ours left running.
pytestmark = pytest.mark.usefixtures("hermetic", "no_threads_left")


# -------------------------------------------------------------------- the bridge under test


@dataclass
class Bridge:
    """One daemon (polling on a thread), its fake Slack and its simulator."""

    mode: str  # "socket" or "http"
    slack: FakeSlack
    sim: Simulator
    config: Config
    runner: Runner
    jsonl: Path
    events_url: str = ""  # HTTP mode: http://127.0.0.1:PORT/slack/events
    _running: RunnerThread = field(init=False)

    def __post_init__(self) -> None:
        self._running = RunnerThread(self.runner)

    @property
    def daemon(self) -> Daemon:
        return self.runner.daemon

    def start(self) -> Bridge:
        self._running.start()
        if self.mode == "socket":
            assert self.slack.wait_connected(timeout=10), "no Socket Mode connection"
        return self

    def stop(self) -> None:
        self._running.stop()

    # ---- what people see in the channel

    def parents(self, event_id: str) -> list[FakeMessage]:
        """Top-level messages whose metadata names `event_id`."""
        return [
            m
            for m in self.slack.messages.values()
            if ((m.metadata or {}).get("event_payload") or {}).get("event_id") == event_id
        ]

    def wait_message(self, event_id: str, timeout: float = 5.0) -> FakeMessage:
        found = wait_until(
            lambda: self.parents(event_id), timeout, message=f"the Slack message of {event_id}"
        )
        assert len(found) == 1, found
        return found[0]

    def replies(self, message: FakeMessage) -> list[str]:
        return [r.text for r in self.slack.replies(message.channel, message.ts)]

    def wait_reply(self, message: FakeMessage, pattern: str, timeout: float = 5.0) -> list[str]:
        """Wait for a thread reply matching `pattern` (case-insensitive); all replies."""
        wait_until(
            lambda: any(re.search(pattern, r, re.I) for r in self.replies(message)),
            timeout,
            message=lambda: f"a reply matching {pattern!r}; replies: {self.replies(message)}",
        )
        return self.replies(message)

    def wait_state(self, message: FakeMessage, pattern: str, timeout: float = 5.0) -> str:
        """Wait until the message's State line matches `pattern`; returns that line."""
        wait_until(
            lambda: re.search(pattern, state_line(message), re.I),
            timeout,
            message=lambda: f"state {pattern!r}; message shows {state_line(message)!r}",
        )
        return state_line(message)

    # ---- clicks, the way Slack delivers them

    def payload(
        self, event_id: str, action: str = "approve", user: str = "U0AAA"
    ) -> dict[str, Any]:
        """A click on the event's message (as it looks now) by `user`."""
        message = self.wait_message(event_id)
        return self.slack.block_actions_payload(
            action, value=event_id, user_id=user, channel=OPS, message_ts=message.ts
        )

    def click(self, payload: dict[str, Any]) -> None:
        """Deliver a click and check Slack got its answer in time (ack / HTTP 200)."""
        if self.mode == "socket":
            envelope_id = self.slack.send_envelope(payload)
            assert self.slack.wait_ack(envelope_id, timeout=3) == {"envelope_id": envelope_id}
            latency = self.slack.ack_latency(envelope_id)
            assert latency is not None and latency < 3
        else:
            status, _, _ = self.slack.post_interaction(self.events_url, payload, SECRET)
            assert status == 200

    def settle(self, polls: int = 3) -> None:
        """A few more polls and an empty outbox: strays and duplicates would show by now."""
        start = len(self.sim.requests)
        wait_until(lambda: len(self.sim.requests) >= start + polls, 10, message="more polls")
        wait_until(
            lambda: self.daemon.store.outbox.pending_count() == 0, 15, message="an empty outbox"
        )


def state_line(message: FakeMessage) -> str:
    """The "*State:* ..." section of a message (its fallback text if there is none)."""
    for block in message.blocks or ():
        text = (block.get("text") or {}).get("text", "")
        if text.startswith("*State:*"):
            return str(text)
    return message.text


def buttons(message: FakeMessage) -> list[str]:
    return [
        e.get("action_id", "")
        for b in message.blocks or ()
        if b.get("type") == "actions"
        for e in b.get("elements", ())
    ]


def texts(message: FakeMessage) -> str:
    """Every text of the message's blocks, joined (notes in context blocks included)."""
    out = [message.text]
    for block in message.blocks or ():
        if isinstance(block.get("text"), dict):
            out.append(block["text"].get("text", ""))
        for element in [*block.get("elements", ()), *block.get("fields", ())]:
            if isinstance(element, dict) and isinstance(element.get("text"), str):
                out.append(element["text"])
    return "\n".join(out)


def slack_config(
    slack: FakeSlack,
    sim: Simulator,
    tmp_path: Path,
    mode: str,
    *,
    approvers: list[str] | None = None,
    jsonl: Path | None = None,
    slack_extra: dict[str, Any] | None = None,
    extra: dict[str, Any] | None = None,
) -> dict[str, Any]:
    """The config as TOML would give it: Socket Mode (app_token) or HTTP mode (signing_secret)."""
    section: dict[str, Any] = {
        "bot_token": slack.bot_token,
        "channel": OPS,
        "approvers": APPROVERS if approvers is None else approvers,
        "api_url": slack.url,
        **(slack_extra or {}),
    }
    if mode == "socket":
        section["app_token"] = slack.app_token
    else:
        section["signing_secret"] = SECRET
    data: dict[str, Any] = {
        "imds": {"endpoint": sim.url, "poll_interval": POLL, "vm_name": "vm0"},
        "store": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
        "console": {"enabled": False},
        "http": {"listen": "127.0.0.1:0"},
        "dispatch": {"shutdown_grace_seconds": 1.0},
        "slack": section,
    }
    if jsonl is not None:
        data["jsonl"] = {"path": str(jsonl)}
    return {**data, **(extra or {})}


def _http_port(runner: Runner) -> int:
    (server,) = (s for s in runner.services if isinstance(s, HttpServer))
    return server.port


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(
        channels={OPS: "ops"},
        usergroups={ONCALL: ["U0BBB"]},
        users={"U0AAA": "alice", "U0BBB": "bob", "U0ZZZ": "mallory"},
    )
    with fake:
        yield fake


@pytest.fixture
def make_bridge(
    slack: FakeSlack, sim: Simulator, tmp_path: Path
) -> Iterator[Callable[..., Bridge]]:
    bridges: list[Bridge] = []

    def make(mode: str, **options: Any) -> Bridge:
        jsonl = tmp_path / "events.jsonl"
        config = from_mapping(
            slack_config(slack, sim, tmp_path, mode, jsonl=jsonl, **options), environ={}
        )
        runner = build_runner(config)
        url = "" if mode == "socket" else f"http://127.0.0.1:{_http_port(runner)}/slack/events"
        bridge = Bridge(mode, slack, sim, config, runner, jsonl, url)
        bridges.append(bridge)
        return bridge.start()

    yield make
    for bridge in bridges:
        bridge.stop()


@pytest.fixture(params=["socket", "http"])
def bridge(request: pytest.FixtureRequest, make_bridge: Callable[..., Bridge]) -> Bridge:
    """The same tests over both click paths."""
    return make_bridge(request.param)


# -------------------------------------------------------------------- 1. the whole flow


def test_reboot_approved_from_slack_then_started_and_completed(bridge: Bridge) -> None:
    sim, slack = bridge.sim, bridge.slack
    event_id = sim.schedule("Reboot")

    message = bridge.wait_message(event_id)
    assert message.channel == OPS
    assert message.metadata == {
        "event_type": "sebridge_event",
        "event_payload": {"event_id": event_id, "event_type": "Reboot", "vm": "vm0"},
    }
    assert buttons(message) == ["approve", "take"]
    (actions,) = [b for b in message.blocks or () if b["type"] == "actions"]
    approve = actions["elements"][0]
    assert approve["value"] == event_id and "confirm" in approve  # a confirmation dialog
    assert re.search("scheduled", state_line(message), re.I)
    assert "Reboot" in message.text and "vm0" in message.text
    assert sim.posts == []

    bridge.click(bridge.payload(event_id, user="U0AAA"))

    wait_until(lambda: sim.start_requests, 5, message="the StartRequest at IMDS")
    assert sim.start_requests == [event_id]
    assert [(p.ids, p.status) for p in sim.posts] == [((event_id,), 200)]
    assert bridge.wait_reply(message, r"approved by <@U0AAA>") == [
        ":white_check_mark: Approved by <@U0AAA>"
    ]
    assert re.search(r"approved by <@U0AAA>", state_line(message), re.I)
    assert buttons(message) == []
    assert re.search(r"approved by <@U0AAA>", message.text, re.I)  # the notification text too

    sim.start_event(event_id)
    bridge.wait_reply(message, r"started")
    bridge.wait_state(message, r"started")
    assert buttons(message) == []

    sim.complete(event_id)
    replies = bridge.wait_reply(message, r"completed")
    bridge.wait_state(message, r"completed")
    bridge.settle()
    assert (
        [re.sub(r"^:\w+: ", "", r) for r in bridge.replies(message)]
        == [
            "Approved by <@U0AAA>",
            "Started",
            "Completed",
        ]
        == [re.sub(r"^:\w+: ", "", r) for r in replies]
    )
    assert len(bridge.parents(event_id)) == 1 and len(slack.messages) == 1
    assert sim.start_requests == [event_id]  # approved once, never again
    assert len(slack.calls_to("chat.update")) >= 3  # every transition updated the one message


def test_a_member_of_an_approver_group_may_approve(bridge: Bridge) -> None:
    event_id = bridge.sim.schedule("Redeploy")
    message = bridge.wait_message(event_id)

    bridge.click(bridge.payload(event_id, user="U0BBB"))  # in S0456EFGH, not listed by id

    wait_until(lambda: bridge.sim.start_requests == [event_id], 5, message="the StartRequest")
    bridge.wait_reply(message, r"approved by <@U0BBB>")
    (lookup,) = bridge.slack.calls_to("usergroups.users.list")
    assert lookup.params["usergroup"] == ONCALL
    approval = bridge.daemon.store.approvals.get(event_id)
    # Kept by name (the click's), beside the member id Slack mentions.
    assert approval is not None
    assert (approval.actor, approval.via, approval.actor_id) == ("bob", "slack", "U0BBB")


def test_an_outsider_is_refused_privately_and_audited(bridge: Bridge, tmp_path: Path) -> None:
    event_id = bridge.sim.schedule("Reboot")
    message = bridge.wait_message(event_id)

    bridge.click(bridge.payload(event_id, "approve", user="U0ZZZ"))
    bridge.click(bridge.payload(event_id, "take", user="U0ZZZ"))

    wait_until(lambda: len(bridge.slack.ephemerals) == 2, 5, message="two ephemeral refusals")
    for ephemeral in bridge.slack.ephemerals:
        assert (ephemeral.channel, ephemeral.user) == (OPS, "U0ZZZ")
        assert "not one of sebridge's approvers" in ephemeral.text
    audit = bridge.daemon.store.history.audit_entries()
    assert (
        sorted((a.event_id, a.actor, a.via, a.action) for a in audit)
        == [(event_id, "mallory", "slack", "refused")] * 2
    )
    assert {a.detail.split(":")[0] for a in audit} == {"approve", "take"}
    out = io.StringIO()
    assert reading.history(bridge.config, event_id=None, limit=100, as_json=False, out=out) == 0
    assert f"refused   {event_id} by mallory via slack" in out.getvalue()  # `sebridge history`

    bridge.settle()
    assert bridge.sim.posts == []
    assert bridge.daemon.store.approvals.get(event_id) is None
    assert buttons(message) == ["approve", "take"]  # still waiting for a real approver
    assert bridge.replies(message) == []  # nobody "took" it either


def _unnamed(payload: dict[str, Any]) -> dict[str, Any]:
    """A click whose payload carries the user's id only (no `name`, no `username`)."""
    user = {k: v for k, v in payload["user"].items() if k not in ("name", "username")}
    return {**payload, "user": user}


def test_approvers_are_named_in_every_channel_and_mentioned_in_slack(
    make_bridge: Callable[..., Bridge], tmp_path: Path
) -> None:
    """Issue 34, finding 7: Slack approvers were member ids (U0AAA) in every channel, and raw
    in Slack's own held reply. Names now: the click's name, else users.info once (cached);
    in Slack a mention, the held reply's included."""
    fails = tmp_path / "fails.py"
    fails.write_text("import sys\nprint('lb said 503')\nsys.exit(1)\n")
    bridge = make_bridge(
        "socket",
        extra={
            "policy": {"rules": [{"name": "web", "action": "ask", "prepare": ["drain"]}]},
            "hooks": {"drain": {"command": [sys.executable, str(fails)]}},
        },
    )
    event_id = bridge.sim.schedule("Reboot", notice=1800)
    message = bridge.wait_message(event_id)
    bridge.click(bridge.payload(event_id, user="U0AAA"))  # alice: her click names her
    replies = bridge.wait_reply(message, r"held")
    (held,) = [r for r in replies if "held" in r and r.startswith(":no_entry:")]
    assert held.startswith(":no_entry: Approval by <@U0AAA> held: drain failed (exit 1) on vm0")
    assert "U0AAA" not in held.replace("<@U0AAA>", "")  # a mention, never the raw id
    wait_until(lambda: lines_of(bridge.jsonl, event_id, "held"), 5, message="the held line")
    (line,) = lines_of(bridge.jsonl, event_id, "held")
    assert (line["actor"], line["via"]) == ("alice", "slack")
    assert "Approval by alice held" in line["note"] and "U0AAA" not in json.dumps(line)
    assert bridge.slack.calls_to("users.info") == []  # the click said who she is

    # Bob (through the on-call group) approves anyway; his click carries no name: users.info
    # once, and a second click of his asks nothing more.
    bridge.click(_unnamed(bridge.payload(event_id, "approve_anyway", user="U0BBB")))
    replies = bridge.wait_reply(message, r"approved anyway")
    assert any(r.startswith(":warning: Approved anyway by <@U0BBB>") for r in replies)
    assert bridge.wait_state(message, r"approved anyway by <@U0BBB>")
    other = bridge.sim.schedule("Redeploy", notice=1800)
    bridge.wait_message(other)
    bridge.click(_unnamed(bridge.payload(other, "take", user="U0BBB")))
    bridge.wait_reply(bridge.wait_message(other), r"taken by <@U0BBB>")
    (lookup,) = bridge.slack.calls_to("users.info")
    assert lookup.params["user"] == "U0BBB"
    wait_until(lambda: lines_of(bridge.jsonl, event_id, "approved"), 5, message="approved")
    (approved,) = lines_of(bridge.jsonl, event_id, "approved")
    assert (approved["actor"], approved["approved_by"], approved["anyway"]) == ("bob", "bob", True)
    # The JSON lines sink delivers on its own worker: Slack's reply may come first.
    wait_until(lambda: lines_of(bridge.jsonl, other, "taken"), 5, message="taken")
    (taken,) = lines_of(bridge.jsonl, other, "taken")
    assert taken["actor"] == "bob"

    # `events` and `history` name people too; the store keeps each name beside its id.
    approval = bridge.daemon.store.approvals.get(event_id)
    assert approval is not None
    assert (approval.actor, approval.actor_id) == ("alice", "U0AAA")
    assert (approval.anyway_by, approval.anyway_id) == ("bob", "U0BBB")
    out = io.StringIO()
    assert reading.events(bridge.config, as_json=False, show_all=False, out=out) == 0
    assert "bob via slack, anyway (asked first: alice via slack) (posted)" in out.getvalue()
    out = io.StringIO()
    assert reading.history(bridge.config, event_id=event_id, limit=100, as_json=False, out=out) == 0
    said = out.getvalue()
    assert "by alice via slack" in said and "anyway by bob via slack" in said
    assert "U0AAA" not in said and "U0BBB" not in said


def test_a_name_slack_cannot_give_is_the_member_id() -> None:
    """Without users:read (or for an unknown id) the member id stands in for the name: the
    approval still goes, and Slack still shows it as a mention."""
    scopes = [s for s in DEFAULT_SCOPES if s != "users:read"]
    with FakeSlack(scopes=scopes, users={"U0AAA": "alice"}) as fake:
        names = SlackNames(build_slack_client(fake.bot_token, fake.url))
        assert names.name_of("U0AAA") == "U0AAA"
    with FakeSlack(users={"U0AAA": "alice"}) as fake:
        names = SlackNames(build_slack_client(fake.bot_token, fake.url))
        assert [names.name_of("U0AAA") for _ in range(3)] == ["alice"] * 3
        assert names.name_of("U0NOPE") == "U0NOPE"
        assert [c.params["user"] for c in fake.calls_to("users.info")] == ["U0AAA", "U0NOPE"]


# -------------------------------------------------------------------- 4. HTTP mode signatures


def _post_raw(url: str, body: bytes, headers: dict[str, str]) -> int:
    request = Request(url, data=body, headers=headers, method="POST")
    try:
        with urlopen(request, timeout=5) as response:
            return int(response.status)
    except HTTPError as exc:
        return exc.code


def test_http_mode_rejects_unsigned_forged_and_stale_requests(
    make_bridge: Callable[..., Bridge],
) -> None:
    bridge = make_bridge("http")
    slack, sim = bridge.slack, bridge.sim
    event_id = sim.schedule("Reboot")
    message = bridge.wait_message(event_id)
    bridge.settle()
    calls_before = len(slack.calls)
    payload = bridge.payload(event_id, user="U0AAA")  # a real approver's click
    body = FakeSlack.block_actions_form(payload).encode()
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    now = int(time.time())
    tampered = body.replace(b"U0AAA", b"U0BBB")

    cases = {
        "forged (another secret)": {**form, **FakeSlack.signed_request(body, "not-the-secret")},
        "stale (signed 5 min 10 s ago)": {
            **form,
            **FakeSlack.signed_request(body, SECRET, timestamp=now - 310),
        },
        "missing signature": form,
        "timestamp without signature": {**form, "X-Slack-Request-Timestamp": str(now)},
        "signature of another body": {**form, **FakeSlack.signed_request(body, SECRET)},
    }
    for name, headers in cases.items():
        sent = tampered if name == "signature of another body" else body
        assert _post_raw(bridge.events_url, sent, headers) == 401, name

    bridge.settle()
    assert bridge.daemon.store.approvals.get(event_id) is None
    assert sim.posts == []
    assert len(slack.calls) == calls_before  # no ephemeral, no group lookup, no update
    assert buttons(message) == ["approve", "take"] and bridge.replies(message) == []

    # The same click, correctly signed and fresh, goes through: the URL and body were right.
    bridge.click(payload)
    wait_until(lambda: sim.start_requests == [event_id], 5, message="the StartRequest")


def test_http_mode_answers_malformed_requests_with_400_or_401_and_no_traceback(
    make_bridge: Callable[..., Bridge], caplog: pytest.LogCaptureFixture
) -> None:
    bridge = make_bridge("http")
    form = {"Content-Type": "application/x-www-form-urlencoded"}
    json_type = {"Content-Type": "application/json"}
    cases: list[tuple[str, bytes, dict[str, str], int]] = [
        ("unsigned payload=x", b"payload=x", form, 401),
        ("signed payload=x", b"payload=x", form, 400),
        ("signed payload that is a list", b"payload=%5B1%5D", form, 400),
        ("signed empty body", b"", form, 400),
        ("signed broken JSON", b"{not json", json_type, 400),
        ("signed bytes that are not UTF-8", b"payload=\xff\xfe", form, 400),
    ]
    with caplog.at_level(logging.INFO):
        for name, body, headers, expected in cases:
            signed = FakeSlack.signed_request(body, SECRET) if name.startswith("signed") else {}
            assert _post_raw(bridge.events_url, body, {**headers, **signed}) == expected, name
    refusals = [r for r in caplog.records if "refused" in r.getMessage()]
    assert len(refusals) == len(cases)  # one line each
    assert [r for r in caplog.records if r.exc_info] == []  # and no traceback anywhere
    assert bridge.sim.posts == []


# -------------------------------------------------------------------- 5. stale clicks


def _started(bridge: Bridge, event_id: str, message: FakeMessage) -> str:
    bridge.sim.start_event(event_id)
    bridge.wait_reply(message, r"started")
    return "already started"


def _cancelled(bridge: Bridge, event_id: str, message: FakeMessage) -> str:
    bridge.sim.complete(event_id)
    bridge.wait_reply(message, r"cancelled")
    return r"gone from IMDS \(cancelled\)"


def _completed(bridge: Bridge, event_id: str, message: FakeMessage) -> str:
    bridge.sim.start_event(event_id)
    bridge.wait_reply(message, r"started")
    bridge.sim.complete(event_id)
    bridge.wait_reply(message, r"completed")
    return r"gone from IMDS \(completed\)"


@pytest.mark.parametrize("outcome", [_started, _cancelled, _completed], ids=lambda f: f.__name__)
def test_a_click_on_an_event_gone_or_started_only_says_so(
    bridge: Bridge, outcome: Callable[[Bridge, str, FakeMessage], str]
) -> None:
    event_id = bridge.sim.schedule("Reboot")
    message = bridge.wait_message(event_id)
    payload = bridge.payload(event_id)  # the button as the approver saw it, before the change
    note = outcome(bridge, event_id, message)
    bridge.settle()
    updates = len(message.history)

    bridge.click(payload)

    wait_until(lambda: len(message.history) > updates, 5, message="the clicked message updated")
    assert re.search(note, texts(message)), texts(message)
    assert "nothing to approve" in texts(message)
    assert buttons(message) == []
    bridge.settle()
    assert bridge.sim.posts == []
    approval = bridge.daemon.store.approvals.get(event_id)
    assert approval is None
    assert len(bridge.parents(event_id)) == 1


# -------------------------------------------------------------------- 6. I'm on it


def test_im_on_it_names_the_user_and_approves_nothing(bridge: Bridge) -> None:
    event_id = bridge.sim.schedule("Reboot")
    message = bridge.wait_message(event_id)

    bridge.click(bridge.payload(event_id, "take", user="U0AAA"))

    replies = bridge.wait_reply(message, r"<@U0AAA>")
    assert replies == [":raising_hand: Taken by <@U0AAA>, not approved yet"]
    bridge.wait_state(message, r"<@U0AAA> is on it")
    assert buttons(message) == ["approve", "take"]  # still approvable
    bridge.settle()
    assert bridge.sim.posts == []
    assert bridge.daemon.store.approvals.get(event_id) is None
    assert len(bridge.parents(event_id)) == 1


# -------------------------------------------------------------------- 7. Slack down, rate limits


def _scheduled_line_within(bridge: Bridge, event_id: str, seconds: float) -> None:
    started = time.monotonic()
    wait_until(
        lambda: [
            r
            for r in read_jsonl(bridge.jsonl)
            if r["event_id"] == event_id and r["transition"] == "scheduled"
        ],
        seconds,
        message="the JSON line while Slack fails",
    )
    assert time.monotonic() - started < seconds


@pytest.mark.slow
@pytest.mark.parametrize("how", ["503", "close"])
def test_slack_down_delays_only_slack_and_posts_once_when_back(
    make_bridge: Callable[..., Bridge], how: str
) -> None:
    bridge = make_bridge("http")
    slack = bridge.slack
    slack.set_down(True, mode=how)
    event_id = bridge.sim.schedule("Reboot")

    _scheduled_line_within(bridge, event_id, 2.0)  # the JSON lines sink is not held up
    # The first attempt posts; a retry first looks for what it may have posted.
    attempts = ("chat.postMessage", "conversations.history")
    wait_until(
        lambda: sum(len(slack.calls_to(m)) for m in attempts) >= 2, 5, message="two attempts"
    )
    assert bridge.parents(event_id) == []
    slack.set_down(False)

    message = bridge.wait_message(event_id, timeout=10)
    bridge.settle()
    assert len(bridge.parents(event_id)) == 1 and len(slack.messages) == 1
    assert buttons(message) == ["approve", "take"]
    assert [s.status for s in slack.calls_to("chat.postMessage")][-1] == 200


@pytest.mark.slow
def test_rate_limited_post_waits_for_retry_after_and_posts_once(
    make_bridge: Callable[..., Bridge],
) -> None:
    bridge = make_bridge("http")
    slack = bridge.slack
    slack.fail_next("chat.postMessage", error="ratelimited", retry_after=1, count=2, applied=False)
    event_id = bridge.sim.schedule("Reboot")

    _scheduled_line_within(bridge, event_id, 2.0)
    bridge.wait_message(event_id, timeout=10)
    bridge.settle()
    posts = slack.calls_to("chat.postMessage")
    assert [p.status for p in posts] == [429, 429, 200]
    gaps = [b.at - a.at for a, b in itertools.pairwise(posts)]
    assert all(gap >= 0.95 for gap in gaps), gaps  # Retry-After: 1 honoured
    assert len(bridge.parents(event_id)) == 1 and len(slack.messages) == 1


def test_a_post_whose_answer_was_lost_is_not_posted_twice(
    make_bridge: Callable[..., Bridge],
) -> None:
    bridge = make_bridge("http")
    slack = bridge.slack
    slack.fail_next("chat.postMessage", error="service_unavailable", status=503, applied=True)
    event_id = bridge.sim.schedule("Reboot")

    bridge.wait_message(event_id, timeout=10)  # the first attempt was posted
    wait_until(lambda: slack.calls_to("conversations.history"), 10, message="a retry's lookup")
    bridge.settle()
    assert len(bridge.parents(event_id)) == 1


def test_a_reply_whose_answer_was_lost_is_not_posted_twice(
    make_bridge: Callable[..., Bridge],
) -> None:
    bridge = make_bridge("http")
    slack, sim = bridge.slack, bridge.sim
    event_id = sim.schedule("Reboot")
    message = bridge.wait_message(event_id)
    slack.fail_next("chat.postMessage", error="service_unavailable", status=503, applied=True)
    sim.start_event(event_id)

    bridge.wait_reply(message, "Started")
    wait_until(lambda: slack.calls_to("conversations.replies"), 10, message="a retry's lookup")
    bridge.settle()
    (reply,) = bridge.replies(message)
    assert "Started" in reply


# -------------------------------------------------------------------- 8. Socket Mode reconnect


def test_a_click_still_arrives_after_slack_refreshes_the_socket(
    make_bridge: Callable[..., Bridge],
) -> None:
    bridge = make_bridge("socket")
    slack, sim = bridge.slack, bridge.sim
    event_id = sim.schedule("Reboot")
    message = bridge.wait_message(event_id)

    assert slack.disconnect_all("refresh_requested", close_after=2.0) == 1
    assert slack.wait_reconnected(2, timeout=10)
    # The client switches to the new connection, then closes the old one itself.
    wait_until(lambda: slack.socket_connections == 1, 5, message="the old connection closed")

    bridge.click(bridge.payload(event_id, user="U0AAA"))
    wait_until(lambda: sim.start_requests == [event_id], 5, message="the StartRequest")
    bridge.wait_reply(message, r"approved by <@U0AAA>")
    assert slack.connections_opened == 2


# -------------------------------------------------------------------- 9. policy


def test_a_user_initiated_event_shows_approved_by_policy_without_a_click(
    make_bridge: Callable[..., Bridge],
) -> None:
    bridge = make_bridge("http")
    event_id = bridge.sim.schedule("Redeploy", source="User")

    message = bridge.wait_message(event_id)
    wait_until(lambda: bridge.sim.start_requests == [event_id], 5, message="the StartRequest")
    bridge.wait_reply(message, r"approved by policy")
    bridge.wait_state(message, r"approved by policy")
    bridge.settle()
    assert buttons(message) == []
    # Nobody was ever offered a button for it: no version of the message had one.
    assert all(not buttons(old) for old in message.history)
    assert "sebridge will approve this at once" in texts(message)
    assert bridge.slack.ephemerals == [] and bridge.daemon.store.history.audit_entries() == []


# -------------------------------------------------------------------- stopping


@pytest.mark.parametrize("mode", ["socket", "http"])
def test_stopping_leaves_no_threads_behind(
    slack: FakeSlack, sim: Simulator, tmp_path: Path, mode: str
) -> None:
    before = set(threading.enumerate())
    config = from_mapping(slack_config(slack, sim, tmp_path, mode), environ={})
    runner = build_runner(config)
    bridge = Bridge(mode, slack, sim, config, runner, tmp_path / "unused.jsonl")
    if mode == "http":
        bridge.events_url = f"http://127.0.0.1:{_http_port(runner)}/slack/events"
    bridge.start()
    try:
        event_id = sim.schedule("Reboot")
        bridge.click(bridge.payload(event_id, "take"))  # the listener executor gets a thread
        bridge.wait_reply(bridge.wait_message(event_id), "Taken")
    finally:
        bridge.stop()
    assert threads_left(before, grace=1.5) == []


# -------------------------------------------------------------------- 10. sebridge check


def _check(tmp_path: Path, sim: Simulator, slack: FakeSlack, **slack_keys: Any) -> tuple[int, str]:
    """`sebridge check --config FILE` in this process -> (exit code, stdout + stderr)."""
    keys = {
        "bot_token": slack.bot_token,
        "app_token": slack.app_token,
        "channel": OPS,
        "approvers": APPROVERS,
        "api_url": slack.url,
        **slack_keys,
    }
    lines = [
        "[imds]",
        f'endpoint = "{sim.url}"',
        "[store]",
        f'url = "sqlite:///{tmp_path / "state.db"}"',
        "[console]",
        "enabled = false",
        "[slack]",
    ]
    for key, value in keys.items():
        rendered = (
            "[" + ", ".join(f'"{v}"' for v in value) + "]"
            if isinstance(value, list)
            else f'"{value}"'
        )
        lines.append(f"{key} = {rendered}")
    path = tmp_path / "sebridge.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = cli.main(["check", "--config", str(path)])
    return code, out.getvalue() + err.getvalue()


def test_check_passes_against_a_working_slack(tmp_path: Path, sim: Simulator) -> None:
    with FakeSlack(channels={OPS: "ops"}, usergroups={ONCALL: ["U0BBB"]}) as slack:
        code, output = _check(tmp_path, sim, slack)
        assert (code, slack.calls_to("auth.test") != []) == (0, True), output
    assert "ok: slack: token works: bot sebridge in Fake Workspace" in output
    assert "ok: slack: scopes: all granted" in output
    assert "ok: slack: channel #ops: the bot is a member" in output
    assert "problem" not in output
    assert slack.bot_token not in output and slack.app_token not in output


@pytest.mark.parametrize(
    ("fake", "keys", "expected"),
    [
        pytest.param(
            {"scopes": ("chat:write", "channels:read", "groups:read", "channels:history")},
            {},
            "problem: slack.bot_token: the token lacks scopes usergroups:read: add them under OAuth",
            id="missing-usergroups-read",
        ),
        pytest.param(
            {"not_in_channel": (OPS,)},
            {},
            "problem: slack.channel: the bot is not in #ops: /invite @sebridge there",
            id="not-in-channel",
        ),
        pytest.param(
            {},
            {"bot_token": "xoxb-revoked-or-wrong"},
            "problem: slack.bot_token: auth.test failed: Slack answered invalid_auth: copy the",
            id="bad-token",
        ),
        pytest.param(
            {},
            {"channel": "C0NOSUCHCHN"},
            "problem: slack.channel: channel C0NOSUCHCHN: Slack answered channel_not_found: use a",
            id="no-such-channel",
        ),
    ],
)
def test_check_says_what_to_fix(
    tmp_path: Path, sim: Simulator, fake: dict[str, Any], keys: dict[str, Any], expected: str
) -> None:
    with FakeSlack(channels={OPS: "ops"}, usergroups={ONCALL: ["U0BBB"]}, **fake) as slack:
        code, output = _check(tmp_path, sim, slack, **keys)
    assert code == 1, output
    assert expected in output, output
    assert "xoxb-revoked-or-wrong" not in output and slack.bot_token not in output

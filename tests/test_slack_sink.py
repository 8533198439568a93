"""Slack sink over a real socket, with the real slack_sdk WebClient.

`_FakeWebApi` is a deliberately small stand-in for Slack's Web API
(chat.postMessage, chat.update, failure injection); it is to be replaced by
the shared tests/fakes/slack.py.
"""

from __future__ import annotations

import json
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest

from sebridge.integrations.render import Renderer
from sebridge.integrations.slack.sink import (
    SlackSink,
    build_slack_client,
    escape_mrkdwn,
    slack_user,
)
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import Receipt, ScheduledEvent, Transition
from sebridge.model.leads import REMIND, REMIND_AFTER, Lead
from sebridge.model.message import Message

TOKEN = "xoxb-1111-2222-SECRETSECRET"
CHANNEL = "C0TEST"
EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
NOT_BEFORE = datetime(2030, 1, 1, 12, 0, 0, tzinfo=UTC)
NOW = datetime(2030, 1, 1, 11, 45, 0, tzinfo=UTC)
SLACK_DATE = "<!date^1893499200^{date_short_pretty} {time}|2030-01-01 12:00:00 UTC>"


class _FakeWebApi:
    """chat.postMessage / chat.update on 127.0.0.1:0, recording calls, failing on request."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, dict[str, Any], str]] = []  # (method, body, Authorization)
        self.messages: dict[tuple[str, str], dict[str, Any]] = {}
        self.replies: dict[tuple[str, str], list[dict[str, Any]]] = {}
        self.failures: dict[str, list[dict[str, Any]]] = {}
        self.delay = 0.0
        self.posted = 0
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:
                body = self.rfile.read(int(self.headers.get("Content-Length", 0)))
                method = self.path.rsplit("/", 1)[-1]
                status, headers, answer = fake.handle(
                    method, json.loads(body or b"{}"), self.headers.get("Authorization", "")
                )
                data = answer if isinstance(answer, bytes) else json.dumps(answer).encode()
                self.send_response(status)
                ctype = "text/html" if isinstance(answer, bytes) else "application/json"
                self.send_header("Content-Type", ctype)
                self.send_header("Content-Length", str(len(data)))
                for key, value in headers.items():
                    self.send_header(key, value)
                self.end_headers()
                self.wfile.write(data)

            def log_message(self, format: str, *args: Any) -> None:
                pass

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        # A client that gave up (the timeout test) leaves a broken pipe: not worth a traceback.
        self._server.handle_error = lambda request, client_address: None  # type: ignore[method-assign]
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/api/"
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.02,), daemon=True
        )
        self._thread.start()

    def fail_next(self, method: str, *, error: str = "", status: int = 200, **more: Any) -> None:
        """The next call of `method` fails: ok:false with `error`, or HTTP `status`."""
        self.failures.setdefault(method, []).append({"error": error, "status": status, **more})

    def handle(
        self, method: str, body: dict[str, Any], auth: str
    ) -> tuple[int, dict[str, str], Any]:
        time.sleep(self.delay)
        with self._lock:
            self.calls.append((method, body, auth))
            failures = self.failures.get(method)
            if failures:
                f = failures.pop(0)
                headers = {"Retry-After": str(f["retry_after"])} if "retry_after" in f else {}
                if f.get("html"):
                    return f["status"], headers, b"<html>Bad Gateway</html>"
                extra = {k: v for k, v in f.items() if k not in ("error", "status", "retry_after")}
                return f["status"], headers, {"ok": False, "error": f["error"], **extra}
            channel = "C0NAMED" if body["channel"].startswith("#") else body["channel"]
            if method == "chat.postMessage" and body.get("thread_ts"):
                self.replies.setdefault((channel, body["thread_ts"]), []).append(body)
                return 200, {}, {"ok": True, "channel": channel, "ts": f"{time.time():.6f}"}
            if method == "chat.postMessage":
                self.posted += 1
                ts = f"1700000000.{self.posted:06d}"
                self.messages[channel, ts] = {**body, "history": []}
                return 200, {}, {"ok": True, "channel": channel, "ts": ts}
            if method == "chat.update":
                key = (channel, body["ts"])
                if key not in self.messages:
                    return 200, {}, {"ok": False, "error": "message_not_found"}
                old = self.messages[key]
                history = [*old["history"], {k: v for k, v in old.items() if k != "history"}]
                self.messages[key] = {**old, **body, "history": history}
                return 200, {}, {"ok": True, "channel": channel, "ts": body["ts"]}
            return 200, {}, {"ok": False, "error": "unknown_method"}

    def close(self) -> None:
        self._server.shutdown()
        self._server.server_close()


@pytest.fixture
def fake() -> Iterator[_FakeWebApi]:
    server = _FakeWebApi()
    yield server
    server.close()


def make_sink(fake: _FakeWebApi, templates: Path | None = None, **kw: Any) -> SlackSink:
    client = build_slack_client(TOKEN, fake.url)
    return SlackSink(
        client, kw.pop("channel", CHANNEL), Renderer(templates), clock=lambda: NOW, **kw
    )


@pytest.fixture
def sink(fake: _FakeWebApi) -> SlackSink:
    return make_sink(fake)


def event(**kw: Any) -> ScheduledEvent:
    fields: dict[str, Any] = {
        "event_id": EVENT_ID,
        "event_type": "Reboot",
        "status": "Scheduled",
        "resources": ("vm1", "vm2"),
        "resource_type": "VirtualMachine",
        "not_before": NOT_BEFORE,
        "not_before_text": "Tue, 01 Jan 2030 12:00:00 GMT",
        "description": "Host server is undergoing maintenance.",
        "source": "Platform",
        "duration_seconds": -1,
    }
    return ScheduledEvent(**{**fields, **kw})


def message(kind: str = "scheduled", ev: ScheduledEvent | None = None, **kw: Any) -> Message:
    t = Transition(
        kind,
        ev or event(),
        NOW,
        changes=kw.pop("changes", ()),
        actor=kw.pop("actor", None),
        via=kw.pop("via", None),
        dry_run=kw.pop("t_dry_run", False),
        note=kw.pop("note", None),
    )
    return Message(transition=t, vm_name="vm1", policy=kw.pop("policy", "ask"), **kw)


def texts(blocks: list[dict[str, Any]]) -> str:
    """Every text of the blocks, one per line."""
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            if isinstance(node.get("text"), str):
                found.append(node["text"])
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(blocks)
    return "\n".join(found)


def actions(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [b for b in blocks if b["type"] == "actions"]


def parent(fake: _FakeWebApi) -> dict[str, Any]:
    assert len(fake.messages) == 1, fake.messages
    return next(iter(fake.messages.values()))


# -- the first transition: one parent message --------------------------------------------


def test_scheduled_posts_one_parent_message_with_buttons_metadata_and_slack_date(
    fake: _FakeWebApi, sink: SlackSink
) -> None:
    receipt = sink.send(message())

    assert [c[0] for c in fake.calls] == ["chat.postMessage"]
    assert fake.calls[0][2] == f"Bearer {TOKEN}"
    (((channel, ts), posted),) = fake.messages.items()
    assert channel == CHANNEL
    assert receipt == Receipt(f"{CHANNEL}:{ts}", {"channel": CHANNEL, "ts": ts})
    assert posted["metadata"] == {
        "event_type": "sebridge_event",
        "event_payload": {"event_id": EVENT_ID, "event_type": "Reboot", "vm": "vm1"},
    }
    shown = texts(posted["blocks"])
    assert ":arrows_counterclockwise: *Reboot* of vm1, vm2" in shown
    assert "*Resources*\n*vm1* (this VM), vm2" in shown
    assert f"{SLACK_DATE} (in 15 min)" in shown
    assert "Host server is undergoing maintenance." in shown
    assert "Platform" in shown and "unknown" in shown  # source; duration -1
    assert "waiting for a person to approve" in shown
    assert "Scheduled" in shown
    assert "Reboot of vm1, vm2" in posted["text"]

    (row,) = actions(posted["blocks"])
    approve, take = row["elements"]
    assert approve["action_id"] == "approve" and approve["style"] == "primary"
    assert approve["value"] == EVENT_ID
    confirm = approve["confirm"]
    assert confirm["confirm"]["text"] == "Approve" and confirm["deny"]["text"] == "Cancel"
    assert "Reboot" in confirm["text"]["text"] and EVENT_ID in confirm["text"]["text"]
    assert take["action_id"] == "take" and take["value"] == EVENT_ID
    assert take["text"]["text"] == "I'm on it"


def test_policy_approve_says_so(fake: _FakeWebApi, sink: SlackSink) -> None:
    sink.send(message(policy="approve"))
    assert "sebridge will approve this at once" in texts(parent(fake)["blocks"])


def test_policy_approve_after_prepare_hooks_says_it_waits_for_them(
    fake: _FakeWebApi, sink: SlackSink
) -> None:
    sink.send(message(policy="approve", prepare=("drain", "stop_jobs")))
    shown = texts(parent(fake)["blocks"])
    assert "at once" not in shown
    assert "sebridge will approve this once its prepare hooks (drain, stop_jobs) have run" in shown


def test_policy_inform_offers_no_approval(fake: _FakeWebApi, sink: SlackSink) -> None:
    sink.send(message(policy="inform"))
    posted = parent(fake)
    assert "inform only (no approval asked; Azure starts it at NotBefore)" in texts(
        posted["blocks"]
    )
    assert actions(posted["blocks"]) == []


def test_channel_name_is_replaced_by_the_id_slack_answers(fake: _FakeWebApi) -> None:
    receipt = make_sink(fake, channel="#ops").send(message())
    assert receipt is not None and receipt.data["channel"] == "C0NAMED"


def test_unplanned_parent_has_no_buttons(fake: _FakeWebApi, sink: SlackSink) -> None:
    ev = event(event_type="Freeze", status="Started", not_before=None, not_before_text="")
    sink.send(message("unplanned", ev))
    posted = parent(fake)
    assert actions(posted["blocks"]) == []
    assert "Started without notice" in texts(posted["blocks"])
    assert ":snowflake:" in posted["text"]


def test_first_seen_late_transition_posts_a_new_parent(fake: _FakeWebApi, sink: SlackSink) -> None:
    receipt = sink.send(message("completed"))
    posted = parent(fake)
    assert receipt is not None and actions(posted["blocks"]) == []
    assert "Completed" in texts(posted["blocks"])


def test_unknown_event_type_and_old_api_version_fields(fake: _FakeWebApi, sink: SlackSink) -> None:
    ev = ScheduledEvent("1", "Hibernate", "Scheduled", (), not_before_text="sometime")
    sink.send(message(ev=ev))
    shown = texts(parent(fake)["blocks"])
    assert ":grey_question: *Hibernate*" in shown
    assert 'unknown (sent as "sometime")' in shown and "not given" in shown


# -- later transitions: the same message updated, one thread reply each ------------------


def test_approved_updates_the_same_message_and_replies_in_its_thread(
    fake: _FakeWebApi, sink: SlackSink
) -> None:
    receipt = sink.send(message())
    again = sink.send(
        message("approved", actor="U0AAA", via="slack", approved_by="U0AAA", receipt=receipt)
    )

    assert again == receipt
    assert [c[0] for c in fake.calls] == ["chat.postMessage", "chat.update", "chat.postMessage"]
    posted = parent(fake)
    assert len(posted["history"]) == 1
    assert actions(posted["blocks"]) == []  # buttons gone
    assert "Approved by <@U0AAA>" in texts(posted["blocks"])
    assert "Approved by <@U0AAA>" in posted["text"]
    assert receipt is not None
    (reply,) = fake.replies[CHANNEL, receipt.data["ts"]]
    assert reply["text"] == ":white_check_mark: Approved by <@U0AAA>"


def test_policy_approval_names_the_policy(fake: _FakeWebApi, sink: SlackSink) -> None:
    receipt = sink.send(message(policy="approve"))
    assert receipt is not None
    sink.send(
        message("approved", actor="policy", via="policy", approved_by="policy", receipt=receipt)
    )
    (reply,) = fake.replies[CHANNEL, receipt.data["ts"]]
    assert reply["text"] == ":white_check_mark: Approved by policy"
    assert "Approved by policy" in texts(parent(fake)["blocks"])


def test_a_policy_approval_names_the_vm_no_agent_could_drain(
    fake: _FakeWebApi, sink: SlackSink
) -> None:
    """Issue 34, finding 1: the approved line names a listed VM no agent ran on."""
    receipt = sink.send(message(policy="approve"))
    assert receipt is not None
    note = "web9: no agent: sebridge cannot drain it"
    sink.send(
        message(
            "approved",
            actor="policy",
            via="policy",
            approved_by="policy",
            receipt=receipt,
            note=note,
        )
    )
    (reply,) = fake.replies[CHANNEL, receipt.data["ts"]]
    assert reply["text"] == f":white_check_mark: Approved by policy ({note})"


@pytest.mark.parametrize(
    ("kind", "status", "state", "reply_text"),
    [
        ("started", "Started", "Started", ":arrow_forward: Started"),
        ("completed", "Started", "Completed", ":checkered_flag: Completed"),
        ("cancelled", "Scheduled", "Cancelled", ":no_entry_sign: Cancelled"),
    ],
)
def test_lifecycle_updates_and_replies(
    fake: _FakeWebApi, sink: SlackSink, kind: str, status: str, state: str, reply_text: str
) -> None:
    receipt = sink.send(message())
    assert receipt is not None
    sink.send(message(kind, event(status=status), receipt=receipt))
    posted = parent(fake)
    assert actions(posted["blocks"]) == []
    assert "*State:* :" in texts(posted["blocks"]) and state in texts(posted["blocks"])
    (reply,) = fake.replies[CHANNEL, receipt.data["ts"]]
    assert reply["text"].startswith(reply_text)


def test_changed_keeps_buttons_and_says_what_moved(fake: _FakeWebApi, sink: SlackSink) -> None:
    receipt = sink.send(message())
    later = event(not_before=datetime(2030, 1, 1, 13, 0, tzinfo=UTC))
    sink.send(message("changed", later, changes=("not_before",), receipt=receipt))
    assert len(actions(parent(fake)["blocks"])) == 1
    assert receipt is not None
    (reply,) = fake.replies[CHANNEL, receipt.data["ts"]]
    assert reply["text"].startswith(":pencil2: Changed: NotBefore moved to <!date^1893502800^")
    assert "(in 75 min)" in reply["text"]


def test_taken_records_who_without_approving(fake: _FakeWebApi, sink: SlackSink) -> None:
    receipt = sink.send(message())
    sink.send(message("taken", actor="U0BBB", via="slack", receipt=receipt))
    posted = parent(fake)
    assert len(actions(posted["blocks"])) == 1  # still approvable
    assert "<@U0BBB> is on it" in texts(posted["blocks"])
    assert receipt is not None
    (reply,) = fake.replies[CHANNEL, receipt.data["ts"]]
    assert reply["text"] == ":raising_hand: Taken by <@U0BBB>, not approved yet"


def test_dry_run_is_marked_everywhere(fake: _FakeWebApi, sink: SlackSink) -> None:
    receipt = sink.send(message(dry_run=True))
    posted = parent(fake)
    assert "DRY RUN" in texts(posted["blocks"]) and "[DRY RUN]" in posted["text"]
    sink.send(
        message(
            "would_approve",
            actor="policy",
            via="policy",
            approved_by="policy",
            t_dry_run=True,
            dry_run=True,
            receipt=receipt,
        )
    )
    assert receipt is not None
    (reply,) = fake.replies[CHANNEL, receipt.data["ts"]]
    # Its own wording: nobody reading the thread takes it for a real approval.
    assert reply["text"] == (
        "[DRY RUN] :test_tube: Would approve: dry run. policy approved; nothing was sent to Azure"
    )
    assert "Approved" not in reply["text"]
    shown = texts(parent(fake)["blocks"])
    assert "Would approve: dry run" in shown and ":white_check_mark:" not in shown


def test_mention_only_for_chosen_types_and_only_on_the_first_post(fake: _FakeWebApi) -> None:
    group = "<!subteam^S0456EFGH>"
    sink = make_sink(fake, mention=group, mention_types=("Preempt", "Terminate"))
    preempt = event(event_type="Preempt", event_id="P1", duration_seconds=30)
    receipt = sink.send(message(ev=preempt))
    sink.send(message(ev=event(event_id="R1")))  # a Reboot: no mention

    by_id = {m["metadata"]["event_payload"]["event_id"]: m for m in fake.messages.values()}
    assert by_id["P1"]["text"].startswith(f"{group} :warning: Preempt")
    assert by_id["P1"]["blocks"][0]["text"]["text"].startswith(f"{group} :warning:")
    assert group not in by_id["R1"]["text"] and group not in json.dumps(by_id["R1"]["blocks"])

    sink.send(message("started", preempt, receipt=receipt))
    assert receipt is not None
    updated = fake.messages[CHANNEL, receipt.data["ts"]]
    assert len(updated["history"]) == 1
    assert group not in updated["text"] and group not in json.dumps(updated["blocks"])
    assert all(group not in r["text"] for rs in fake.replies.values() for r in rs)


def test_a_reminder_mentions_the_group_in_its_thread_reply_only(fake: _FakeWebApi) -> None:
    group = "<!subteam^S0456EFGH>"
    sink = make_sink(fake, remind_mention=group)
    receipt = sink.send(message())
    assert receipt is not None
    reminder = Transition("reminder", event(), NOW, remind_before=600)
    sink.send(Message(transition=reminder, vm_name="vm1", policy="ask", receipt=receipt))

    (reply,) = fake.replies[CHANNEL, receipt.data["ts"]]
    assert reply["text"].startswith(f":alarm_clock: {group} Reminder:"), reply["text"]
    parent_now = fake.messages[CHANNEL, receipt.data["ts"]]
    assert group not in parent_now["text"] and group not in json.dumps(parent_now["blocks"])


def test_hostile_imds_text_is_escaped_in_blocks_and_text(
    fake: _FakeWebApi, sink: SlackSink
) -> None:
    hostile = event(
        event_type="<!here>",
        resources=("vm1", "<@U0EVIL>"),
        description='<!channel> <https://evil|click> & co "quoted"\nsecond line',
        source="<!everyone>",
        event_id="id<b>",
    )
    receipt = sink.send(message(ev=hostile))
    sink.send(message("approved", hostile, actor="<!channel>", via="cli", receipt=receipt))
    posted = parent(fake)
    replies = [r["text"] for rs in fake.replies.values() for r in rs]
    first_post = posted["history"][0]
    shown = [texts(first_post["blocks"]), first_post["text"], *replies]
    for sent in [texts(posted["blocks"]), posted["text"], *shown]:
        for raw in ("<!channel>", "<https://", "<!here>", "<@U0EVIL>", "<!everyone>", "<b>"):
            assert raw not in sent
    first = texts(first_post["blocks"])
    assert '&lt;!channel&gt; &lt;https://evil|click&gt; &amp; co "quoted"\nsecond line' in first
    assert replies == [":white_check_mark: Approved by &lt;!channel&gt; via cli"]
    # Button values are data for the click handler, never shown: the raw id, JSON-escaped.
    assert {e["value"] for e in actions(first_post["blocks"])[0]["elements"]} == {"id<b>"}


def test_mrkdwn_filters() -> None:
    assert escape_mrkdwn("a & <b> &lt;") == "a &amp; &lt;b&gt; &amp;lt;"
    assert escape_mrkdwn(None) == ""
    assert slack_user("U0AAA") == "<@U0AAA>" and slack_user("W012ABC") == "<@W012ABC>"
    assert slack_user("alice") == "alice" and slack_user("<!channel>") == "&lt;!channel&gt;"


# -- failures -------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("failure", "cls", "says"),
    [
        ({"error": "channel_not_found"}, PermanentDeliveryError, "check slack.channel"),
        ({"error": "not_in_channel"}, PermanentDeliveryError, "/invite @sebridge"),
        ({"error": "invalid_auth"}, PermanentDeliveryError, "slack.bot_token is not valid"),
        ({"error": "not_authed"}, PermanentDeliveryError, "slack.bot_token is not valid"),
        ({"error": "token_revoked"}, PermanentDeliveryError, "slack.bot_token is not valid"),
        ({"error": "account_inactive"}, PermanentDeliveryError, "slack.bot_token is not valid"),
        (
            {"error": "missing_scope", "needed": "chat:write"},
            PermanentDeliveryError,
            "chat:write scope",
        ),
        (
            {"error": "invalid_blocks", "errors": ["bad /blocks/0"]},
            PermanentDeliveryError,
            "bad /blocks/0",
        ),
        ({"error": "no_such_thing"}, PermanentDeliveryError, "no_such_thing"),
        ({"error": TOKEN}, PermanentDeliveryError, "xox?-***"),  # scrubbed even if echoed
        ({"error": "ratelimited"}, RetryableDeliveryError, "rate limited"),
        ({"error": "internal_error"}, RetryableDeliveryError, "internal_error"),
        ({"error": "fatal_error"}, RetryableDeliveryError, "fatal_error"),
        ({"error": "service_unavailable"}, RetryableDeliveryError, "service_unavailable"),
        ({"error": "request_timeout"}, RetryableDeliveryError, "request_timeout"),
        ({"status": 503, "error": "x"}, RetryableDeliveryError, "HTTP 503"),
        ({"status": 502, "html": True}, RetryableDeliveryError, "HTTP 502"),
    ],
)
def test_errors_are_classified_with_a_fix_and_no_token(
    fake: _FakeWebApi, sink: SlackSink, failure: dict[str, Any], cls: type[DeliveryError], says: str
) -> None:
    fake.fail_next("chat.postMessage", **failure)
    with pytest.raises(DeliveryError) as caught:
        sink.send(message())
    assert type(caught.value) is cls
    assert says in str(caught.value)
    assert TOKEN not in str(caught.value) and "SECRET" not in str(caught.value)
    assert len(fake.calls) == 1


def test_channel_errors_name_the_channel(fake: _FakeWebApi, sink: SlackSink) -> None:
    fake.fail_next("chat.postMessage", error="not_in_channel")
    with pytest.raises(PermanentDeliveryError, match=f"the bot is not in {CHANNEL}"):
        sink.send(message())


def test_429_honours_retry_after_with_exactly_one_request(
    fake: _FakeWebApi, sink: SlackSink
) -> None:
    fake.fail_next("chat.postMessage", status=429, error="ratelimited", retry_after=7)
    with pytest.raises(RetryableDeliveryError) as caught:
        sink.send(message())
    assert caught.value.retry_after == 7.0
    assert len(fake.calls) == 1  # no retry handler inside slack_sdk
    assert fake.messages == {}


def test_ratelimited_without_header_waits_one_second(fake: _FakeWebApi, sink: SlackSink) -> None:
    fake.fail_next("chat.postMessage", error="ratelimited")
    with pytest.raises(RetryableDeliveryError) as caught:
        sink.send(message())
    assert caught.value.retry_after == 1.0


def test_unreachable_slack_is_retryable_after_one_attempt(fake: _FakeWebApi) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]  # closed again: nothing listens there
    client = build_slack_client(TOKEN, f"http://127.0.0.1:{port}/api/")
    sink = SlackSink(client, CHANNEL, Renderer(), clock=lambda: NOW)
    with pytest.raises(RetryableDeliveryError, match="cannot reach Slack") as caught:
        sink.send(message())
    assert TOKEN not in str(caught.value)


def test_timeout_is_retryable(fake: _FakeWebApi, sink: SlackSink) -> None:
    fake.delay = 1.0
    sink._client.timeout = 0.2  # type: ignore[assignment]
    with pytest.raises(RetryableDeliveryError, match="cannot reach Slack"):
        sink.send(message())


def test_client_makes_one_attempt_per_call() -> None:
    client = build_slack_client(TOKEN, "https://slack.example/api")
    assert client.retry_handlers == []
    assert 0 < client.timeout <= 30
    assert client.base_url == "https://slack.example/api/"


def test_reply_failure_after_update_is_retryable_and_the_rerun_is_harmless(
    fake: _FakeWebApi, sink: SlackSink
) -> None:
    receipt = sink.send(message())
    approved = message("approved", actor="U0AAA", via="slack", approved_by="U0AAA", receipt=receipt)
    fake.fail_next("chat.postMessage", error="internal_error")
    with pytest.raises(RetryableDeliveryError):
        sink.send(approved)
    assert "Approved by <@U0AAA>" in texts(parent(fake)["blocks"])  # the update went through

    assert sink.send(approved) == receipt  # the dispatcher's retry
    posted = parent(fake)
    assert [h["blocks"] for h in posted["history"][1:]] == [posted["blocks"]]  # same update twice
    assert receipt is not None
    assert len(fake.replies[CHANNEL, receipt.data["ts"]]) == 1


def test_update_failure_is_mapped(fake: _FakeWebApi, sink: SlackSink) -> None:
    receipt = sink.send(message())
    fake.fail_next("chat.update", error="invalid_auth")
    with pytest.raises(PermanentDeliveryError, match=r"chat\.update .*slack\.bot_token"):
        sink.send(message("started", event(status="Started"), receipt=receipt))
    assert fake.replies == {}


def test_deleted_message_gets_a_new_parent_and_receipt(fake: _FakeWebApi, sink: SlackSink) -> None:
    receipt = sink.send(message())
    assert receipt is not None
    fake.messages.clear()  # someone deleted it in Slack
    new = sink.send(
        message("approved", actor="U0AAA", via="slack", approved_by="U0AAA", receipt=receipt)
    )
    assert new is not None and new != receipt
    posted = fake.messages[CHANNEL, new.data["ts"]]
    assert "Approved by <@U0AAA>" in texts(posted["blocks"]) and actions(posted["blocks"]) == []


# -- templates ------------------------------------------------------------------------------


def test_check_templates_passes_for_the_builtin_ones(sink: SlackSink) -> None:
    sink.check_templates()


def test_user_template_replaces_message_j2(fake: _FakeWebApi, tmp_path: Path) -> None:
    (tmp_path / "slack").mkdir()
    (tmp_path / "slack" / "message.j2").write_text(
        '[{"type": "section", "text": {"type": "mrkdwn", "text": {{ ("Ours: " ~ e.description|mrkdwn)|tojson }}}}]'
    )
    sink = make_sink(fake, tmp_path)
    sink.check_templates()
    sink.send(message(ev=event(description="a <b>")))
    assert parent(fake)["blocks"] == [
        {"type": "section", "text": {"type": "mrkdwn", "text": "Ours: a &lt;b&gt;"}}
    ]


@pytest.mark.parametrize(
    ("name", "source", "says"),
    [
        ("message.j2", "[{% if %}]", "slack/message.j2"),
        ("message.j2", '[{"type": }]', "slack/message.j2 did not produce valid JSON"),
        ("message.j2", '{"type": "section"}', "slack/message.j2 must produce a JSON list"),
        ("message.j2", "[{{ no_such_name }}]", "slack/message.j2"),
        ("reply.j2", "{% for %}", "reply.j2"),
        ("text.j2", "{{ e.event_type|no_such_filter }}", "text.j2"),
    ],
)
def test_broken_template_fails_check_templates_naming_it(
    fake: _FakeWebApi, tmp_path: Path, name: str, source: str, says: str
) -> None:
    (tmp_path / "slack").mkdir()
    (tmp_path / "slack" / name).write_text(source)
    sink = make_sink(fake, tmp_path)
    with pytest.raises(PermanentDeliveryError, match="slack: template") as caught:
        sink.check_templates()
    assert says in str(caught.value)
    earlier = Receipt(f"{CHANNEL}:1.2", {"channel": CHANNEL, "ts": "1.2"})
    attempts = [message("started", receipt=earlier)]
    if name != "reply.j2":  # a first post renders no reply
        attempts.append(message())
    for attempt in attempts:
        with pytest.raises(PermanentDeliveryError, match="slack: template"):
            sink.send(attempt)
    assert fake.calls == []  # nothing reaches Slack, not even half an update


def test_the_first_message_names_the_reminders_its_notice_can_never_reach(
    fake: _FakeWebApi, sink: SlackSink
) -> None:
    missed = (Lead(REMIND, 10**8), Lead(REMIND_AFTER, 10**8))
    first = Transition("scheduled", event(), NOW, unreachable=missed)
    receipt = sink.send(Message(transition=first, vm_name="vm1", policy="ask"))
    assert receipt is not None
    shown = texts(fake.messages[CHANNEL, receipt.data["ts"]]["blocks"])
    assert ":alarm_clock: Reminders that can never come (NotBefore is " in shown
    assert "100000000 s before NotBefore; 100000000 s after it was first announced" in shown

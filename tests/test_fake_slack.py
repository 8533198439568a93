"""The fake Slack, driven by the real slack_sdk and slack_bolt clients over real sockets."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any
from urllib.error import URLError
from urllib.parse import parse_qs
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError
from slack_sdk.signature import SignatureVerifier
from slack_sdk.socket_mode import SocketModeClient
from slack_sdk.socket_mode.request import SocketModeRequest
from slack_sdk.socket_mode.response import SocketModeResponse

from fakes.slack import FakeSlack, block_errors

OPS = "C0123456789"
QUIET = "C0999999999"
ONCALL = "S0456EFGH"
# Both WebClient and the socket client would honour a proxy.
pytestmark = pytest.mark.usefixtures("no_proxy", "no_threads_left")


def approve_blocks(event_id: str) -> list[dict[str, Any]]:
    return [
        {
            "type": "section",
            "block_id": "what",
            "text": {"type": "mrkdwn", "text": f"*Reboot* {event_id}"},
        },
        {
            "type": "actions",
            "block_id": f"decide:{event_id}",
            "elements": [
                {
                    "type": "button",
                    "action_id": "approve",
                    "value": event_id,
                    "style": "primary",
                    "text": {"type": "plain_text", "text": "Approve"},
                }
            ],
        },
    ]


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    fake = FakeSlack(
        channels={OPS: "ops", QUIET: "quiet"},
        usergroups={ONCALL: ["U0AAA", "U0BBB"]},
        not_in_channel=(QUIET,),
        users={"U0AAA": "alice"},
    )
    with fake:
        yield fake


@pytest.fixture
def client(slack: FakeSlack) -> WebClient:
    return WebClient(token="xoxb-test", base_url=slack.url, retry_handlers=[], timeout=5)


def api_error(call: Any) -> SlackApiError:
    with pytest.raises(SlackApiError) as info:
        call()
    return info.value


# -------------------------------------------------------------------- Web API


def test_post_update_reply_and_ephemeral_are_what_people_see(
    slack: FakeSlack, client: WebClient
) -> None:
    metadata = {"event_type": "scheduled_event", "event_payload": {"event_id": "E1"}}
    posted = client.chat_postMessage(
        channel=OPS, text="Reboot E1", blocks=approve_blocks("E1"), metadata=metadata
    )
    assert posted["ok"] and posted["channel"] == OPS
    ts = posted["ts"]
    assert posted["message"]["blocks"] == approve_blocks("E1")
    message = slack.messages[(OPS, ts)]
    assert (message.text, message.blocks, message.metadata) == (
        "Reboot E1",
        approve_blocks("E1"),
        metadata,
    )

    updated = client.chat_update(channel=OPS, ts=ts, text="Approved E1", blocks=[])
    assert updated["ts"] == ts and updated["text"] == "Approved E1"
    assert message.text == "Approved E1" and message.blocks is None  # updated in place
    assert message.metadata == metadata  # kept when chat.update does not send it
    assert [(v.text, v.blocks) for v in message.history] == [("Reboot E1", approve_blocks("E1"))]

    reply = client.chat_postMessage(channel=OPS, thread_ts=ts, text="approved by alice")
    assert [r.text for r in slack.replies(OPS, ts)] == ["approved by alice"]
    assert slack.replies(OPS, ts)[0].thread_ts == ts and (OPS, reply["ts"]) not in slack.messages
    second = client.chat_postMessage(
        channel="#ops", thread_ts=reply["ts"], text="(a reply's ts threads too)"
    )
    assert second["channel"] == OPS and len(slack.replies(OPS, ts)) == 2
    assert float(second["ts"]) > float(reply["ts"]) > float(ts)

    eph = client.chat_postEphemeral(channel=OPS, user="U0AAA", text="only you")
    assert eph["message_ts"]
    assert slack.ephemerals == [(OPS, "U0AAA", "only you", None)]

    posts = slack.calls_to("chat.postMessage")
    assert len(posts) == 3 and posts[0].token == "xoxb-test" and posts[0].status == 200
    assert (
        posts[0].params["blocks"] == approve_blocks("E1")
        and posts[0].params["metadata"] == metadata
    )
    assert "token" not in posts[0].params


def test_form_encoded_calls_decode_json_fields(slack: FakeSlack, client: WebClient) -> None:
    blocks = [{"type": "section", "text": {"type": "plain_text", "text": "form"}}]
    client.api_call(
        "chat.postMessage", params={"channel": OPS, "text": "form", "blocks": json.dumps(blocks)}
    )
    call = slack.calls_to("chat.postMessage")[-1]
    assert call.params["blocks"] == blocks and call.params["channel"] == OPS


def test_lookups_and_scope_header(slack: FakeSlack, client: WebClient) -> None:
    auth = client.auth_test()
    assert (auth["team_id"], auth["user_id"], auth["bot_id"]) == ("T0FAKE", "U0BOT", "B0FAKE")
    assert set(auth.headers["x-oauth-scopes"].split(",")) == {
        "chat:write",
        "usergroups:read",
        "users:read",
        "channels:read",
        "groups:read",
        "channels:history",
        "groups:history",
    }
    info = client.conversations_info(channel=OPS)["channel"]
    assert (info["id"], info["name"], info["is_member"]) == (OPS, "ops", True)
    assert client.conversations_info(channel=QUIET)["channel"]["is_member"] is False
    assert client.usergroups_users_list(usergroup=ONCALL)["users"] == ["U0AAA", "U0BBB"]
    # users.info as Slack documents it: the user object with its name and profile.
    user = client.users_info(user="U0AAA")["user"]
    assert (user["id"], user["name"], user["profile"]["display_name"]) == (
        "U0AAA",
        "alice",
        "alice",
    )
    assert api_error(lambda: client.users_info(user="U0NOPE")).response["error"] == "user_not_found"


@pytest.mark.filterwarnings("ignore:The top-level `text` argument is missing:UserWarning")
@pytest.mark.parametrize(
    ("call", "error"),
    [
        (lambda c: c.chat_postMessage(channel="C0NOPE", text="x"), "channel_not_found"),
        (lambda c: c.chat_postMessage(channel=QUIET, text="x"), "not_in_channel"),
        (lambda c: c.chat_postMessage(channel=OPS, text=""), "no_text"),
        (
            lambda c: c.chat_postMessage(channel=OPS, text="x", blocks=[{"text": "no type"}]),
            "invalid_blocks",
        ),
        (
            lambda c: c.chat_postMessage(channel=OPS, text="x", blocks=[{"type": "divider"}] * 51),
            "invalid_blocks",
        ),
        (
            lambda c: c.chat_postMessage(
                channel=OPS,
                text="x",
                blocks=[{"type": "section", "text": {"type": "mrkdwn", "text": "y" * 3001}}],
            ),
            "invalid_blocks",
        ),
        (
            lambda c: c.chat_postMessage(channel=OPS, text="x", thread_ts="1.000001"),
            "thread_not_found",
        ),
        (lambda c: c.chat_update(channel=OPS, ts="1.000001", text="x"), "message_not_found"),
        (
            lambda c: c.chat_postEphemeral(channel="C0NOPE", user="U0AAA", text="x"),
            "channel_not_found",
        ),
        (lambda c: c.conversations_info(channel="C0NOPE"), "channel_not_found"),
        (lambda c: c.usergroups_users_list(usergroup="S0NOPE"), "no_such_subteam"),
        (lambda c: c.api_call("chat.frobnicate"), "unknown_method"),
        (lambda c: c.chat_postMessage(channel=OPS, text="x", token="xoxb-wrong"), "invalid_auth"),
        (
            lambda c: c.chat_postMessage(channel=OPS, text="x", token="xapp-1-test"),
            "not_allowed_token_type",
        ),
        (lambda c: c.apps_connections_open(app_token="xoxb-test"), "not_allowed_token_type"),
    ],
)
def test_errors_as_documented(client: WebClient, call: Any, error: str) -> None:
    e = api_error(lambda: call(client))
    assert (
        e.response.status_code == 200 and e.response["ok"] is False and e.response["error"] == error
    )


def test_invalid_blocks_carry_pointers(client: WebClient) -> None:
    e = api_error(
        lambda: client.chat_postMessage(channel=OPS, text="x", blocks=[{"type": "bogus"}])
    )
    assert e.response["errors"] == ["unsupported type: bogus [json-pointer:/blocks/0/type]"]
    assert block_errors(approve_blocks("E1")) == []


def test_not_authed_and_missing_scope(slack: FakeSlack) -> None:
    anonymous = WebClient(base_url=slack.url, retry_handlers=[])
    assert api_error(anonymous.auth_test).response["error"] == "not_authed"
    with FakeSlack(scopes=("channels:read",)) as narrow:
        client = WebClient(token="xoxb-test", base_url=narrow.url, retry_handlers=[])
        e = api_error(lambda: client.chat_postMessage(channel=OPS, text="x"))
        assert (e.response["error"], e.response["needed"], e.response["provided"]) == (
            "missing_scope",
            "chat:write",
            "channels:read",
        )
        assert narrow.messages == {}


def test_chat_write_public_posts_without_joining() -> None:
    with FakeSlack(not_in_channel=(OPS,), scopes=("chat:write", "chat:write.public")) as fake:
        client = WebClient(token="xoxb-test", base_url=fake.url, retry_handlers=[])
        assert client.chat_postMessage(channel=OPS, text="x")["ok"]


def test_rate_limit_is_429_with_retry_after(slack: FakeSlack, client: WebClient) -> None:
    slack.fail_next("chat.postMessage", error="ratelimited", retry_after=3, count=2)
    for _ in range(2):
        e = api_error(lambda: client.chat_postMessage(channel=OPS, text="x"))
        assert (e.response.status_code, e.response["error"]) == (429, "ratelimited")
        assert e.response.headers["Retry-After"] == "3"
    assert slack.messages == {}
    assert client.chat_postMessage(channel=OPS, text="x")["ok"]
    assert [c.status for c in slack.calls_to("chat.postMessage")] == [429, 429, 200]


def test_injected_failures(slack: FakeSlack, client: WebClient) -> None:
    slack.fail_next("chat.postMessage", error="internal_error")
    e = api_error(lambda: client.chat_postMessage(channel=OPS, text="x"))
    assert (e.response.status_code, e.response["error"]) == (200, "internal_error")

    slack.fail_next("*", status=503)
    e = api_error(client.auth_test)
    assert e.response.status_code == 503
    assert e.response["error"].startswith("Received a response in a non-JSON format: <html>")

    slack.fail_next("chat.update", status=502, body="")
    e = api_error(lambda: client.chat_update(channel=OPS, ts="1.0", text="x"))
    assert e.response.status_code == 502 and e.response["ok"] is False

    # applied=True: Slack posted it but the answer was lost (a retry would post twice)
    slack.fail_next("chat.postMessage", status=500, applied=True)
    api_error(lambda: client.chat_postMessage(channel=OPS, text="lost answer"))
    assert [m.text for m in slack.messages.values()] == ["lost answer"]


def test_set_down(slack: FakeSlack, client: WebClient) -> None:
    slack.set_down(True)
    assert api_error(client.auth_test).response.status_code == 503
    slack.set_down(True, mode="close")
    with pytest.raises((URLError, ConnectionError)):  # http.client.RemoteDisconnected
        client.auth_test()
    slack.set_down(False)
    assert client.auth_test()["ok"]
    assert [c.status for c in slack.calls_to("auth.test")] == [503, 0, 200]


# -------------------------------------------------------------------- Socket Mode


def socket_client(
    slack: FakeSlack,
    received: list[SocketModeRequest],
    *,
    ack: bool = True,
    ping_interval: float = 0.5,
) -> SocketModeClient:
    sm = SocketModeClient(
        app_token="xapp-1-test",
        web_client=WebClient(base_url=slack.url, retry_handlers=[]),
        ping_interval=ping_interval,  # also how often it checks the connection and reconnects
    )

    def listener(client: SocketModeClient, req: SocketModeRequest) -> None:
        received.append(req)
        if ack:
            client.send_socket_mode_response(SocketModeResponse(envelope_id=req.envelope_id))

    sm.socket_mode_request_listeners.append(listener)
    return sm


def reconnected(slack: FakeSlack, sm: SocketModeClient, old_session: str | None) -> bool:
    """The client has switched to a new session. The fake sees the new connection a moment
    before that; closing the client in between leaks the new connection (a slack_sdk race)."""
    return slack.wait_until(lambda: sm.is_connected() and sm.session_id() != old_session, 5)


def test_builtin_socket_client_receives_clicks_and_reconnects(
    slack: FakeSlack, client: WebClient
) -> None:
    ts = client.chat_postMessage(channel=OPS, text="Reboot E1", blocks=approve_blocks("E1"))["ts"]
    received: list[SocketModeRequest] = []
    sm = socket_client(slack, received)
    try:
        sm.connect()
        assert slack.wait_connected(timeout=5)
        assert slack.frames == []  # the client has sent only pings so far, no text frames
        env_id = slack.send_block_actions(action_id="approve", user_id="U0AAA", channel=OPS)
        assert slack.wait_ack(env_id, timeout=3) == {"envelope_id": env_id}
        req = received[0]
        assert (req.type, req.envelope_id, req.accepts_response_payload) == (
            "interactive",
            env_id,
            False,
        )
        p = req.payload
        assert p["type"] == "block_actions" and p["api_app_id"] == "A0FAKE"
        assert p["user"] == {
            "id": "U0AAA",
            "username": "alice",
            "name": "alice",
            "team_id": "T0FAKE",
        }
        assert p["container"] == {
            "type": "message",
            "message_ts": ts,
            "channel_id": OPS,
            "is_ephemeral": False,
        }
        assert p["channel"] == {"id": OPS, "name": "ops"}
        assert p["message"]["ts"] == ts and p["message"]["blocks"] == approve_blocks("E1")
        action = p["actions"][0]
        assert (action["action_id"], action["value"], action["block_id"], action["type"]) == (
            "approve",
            "E1",
            "decide:E1",
            "button",
        )
        assert p["response_url"].startswith(slack.url.removesuffix("api/")) and p["trigger_id"]

        session = sm.session_id()
        assert slack.disconnect_all(reason="refresh_requested", close_after=0.3) == 1
        assert slack.wait_reconnected(2, timeout=5) and reconnected(slack, sm, session)
        assert len(slack.calls_to("apps.connections.open")) == 2
        env_id = slack.send_block_actions(value="E1", message_ts=ts)
        assert slack.wait_ack(env_id, timeout=3) == {"envelope_id": env_id}
        assert [r.payload["actions"][0]["value"] for r in received] == ["E1", "E1"]
    finally:
        sm.close()


def test_hello_frame_and_ticket_check(slack: FakeSlack) -> None:
    from websockets.exceptions import InvalidStatus
    from websockets.sync.client import connect

    url = WebClient(base_url=slack.url, retry_handlers=[]).apps_connections_open(
        app_token="xapp-1-test"
    )["url"]
    assert url.startswith("ws://127.0.0.1:") and "/link/?ticket=" in url
    with connect(url) as ws:
        hello = json.loads(ws.recv(timeout=2))
        assert (hello["type"], hello["num_connections"], hello["connection_info"]) == (
            "hello",
            1,
            {"app_id": "A0FAKE"},
        )
        ws.send(json.dumps({"envelope_id": "not-sent-by-us"}))
        assert slack.wait_ack("not-sent-by-us", timeout=2) == {"envelope_id": "not-sent-by-us"}
    with pytest.raises(InvalidStatus), connect(url.split("?")[0] + "?ticket=forged"):
        pass


@pytest.mark.slow
def test_unacked_envelope_server_close_and_network_drop(slack: FakeSlack) -> None:
    received: list[SocketModeRequest] = []
    sm = socket_client(slack, received, ack=False, ping_interval=0.1)
    try:
        sm.connect()
        assert slack.wait_connected(timeout=5)
        gone = {"ts": "1700000000.000100", "text": "gone"}  # a message the fake never stored
        env_id = slack.send_block_actions(value="E9", message=gone)
        assert slack.wait_until(lambda: len(received) == 1, 3)
        assert slack.wait_ack(env_id, timeout=0.2) is None
        assert received[0].payload["message"]["text"] == "gone"

        session = sm.session_id()
        slack.close_all()  # a close frame: noticed at once, reconnected by the client's monitor
        assert slack.wait_reconnected(2, timeout=5) and reconnected(slack, sm, session)

        session = sm.session_id()
        assert slack.drop_all() == 1  # no close frame: noticed after 5 failed pings
        assert slack.wait_reconnected(3, timeout=5) and reconnected(slack, sm, session)
        slack.send_block_actions(value="E9", message=gone)
        assert slack.wait_until(lambda: len(received) == 2, 3)
    finally:
        sm.close()


def test_no_connection_means_no_delivery(slack: FakeSlack) -> None:
    with pytest.raises(RuntimeError):
        slack.send_block_actions(value="E1", message={"ts": "1.0", "text": "x"}, wait=0.1)


def test_bolt_socket_mode_handler_acks_and_responds(slack: FakeSlack, client: WebClient) -> None:
    from slack_bolt import Ack, App, Respond
    from slack_bolt.adapter.socket_mode import SocketModeHandler

    ts = client.chat_postMessage(channel=OPS, text="Reboot E2", blocks=approve_blocks("E2"))["ts"]
    executor = ThreadPoolExecutor(max_workers=2)
    app = App(
        client=WebClient(token="xoxb-test", base_url=slack.url, retry_handlers=[]),
        token_verification_enabled=False,
        request_verification_enabled=False,
        listener_executor=executor,
    )
    clicked: list[dict[str, Any]] = []

    @app.action("approve")
    def approve(ack: Ack, body: dict[str, Any], respond: Respond) -> None:
        ack()
        clicked.append(body)
        respond(text=f"Approved {body['actions'][0]['value']}", replace_original=True)

    handler = SocketModeHandler(
        app, "xapp-1-test", web_client=WebClient(base_url=slack.url, retry_handlers=[])
    )
    try:
        handler.connect()
        assert slack.wait_connected(timeout=5)
        env_id = slack.send_block_actions(value="E2", user_id="U0BBB")
        assert slack.wait_ack(env_id, timeout=3) == {"envelope_id": env_id}
        assert clicked[0]["user"]["id"] == "U0BBB"
        assert slack.wait_until(lambda: slack.messages[(OPS, ts)].text == "Approved E2", 3)
        assert slack.responses[0]["replace_original"] is True
        assert slack.messages[(OPS, ts)].blocks is None
    finally:
        handler.close()
        executor.shutdown(wait=True)


# -------------------------------------------------------------------- HTTP mode


def test_signature_matches_slack_sdk_verifier() -> None:
    body = FakeSlack.block_actions_form({"type": "block_actions", "actions": []})
    headers = FakeSlack.signed_request(body, "s3cret")
    verifier = SignatureVerifier("s3cret")
    assert verifier.is_valid(
        body, headers["X-Slack-Request-Timestamp"], headers["X-Slack-Signature"]
    )
    assert not SignatureVerifier("other").is_valid_request(body, headers)
    assert json.loads(parse_qs(body)["payload"][0]) == {"type": "block_actions", "actions": []}
    stale = FakeSlack.signed_request(body, "s3cret", timestamp=int(time.time()) - 600)
    assert not verifier.is_valid_request(body, stale)


class _QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


def test_bolt_http_mode_accepts_what_the_fake_posts(slack: FakeSlack, client: WebClient) -> None:
    from slack_bolt import Ack, App
    from slack_bolt.adapter.wsgi import SlackRequestHandler

    client.chat_postMessage(channel=OPS, text="Reboot E3", blocks=approve_blocks("E3"))
    executor = ThreadPoolExecutor(max_workers=2)
    app = App(
        client=WebClient(token="xoxb-test", base_url=slack.url, retry_handlers=[]),
        signing_secret="s3cret",
        token_verification_enabled=False,
        listener_executor=executor,
    )
    values: list[str] = []

    @app.action("approve")
    def approve(ack: Ack, action: dict[str, Any]) -> None:
        values.append(action["value"])
        ack()

    server = make_server("127.0.0.1", 0, SlackRequestHandler(app), handler_class=_QuietHandler)
    thread = threading.Thread(target=server.serve_forever, kwargs={"poll_interval": 0.05})
    thread.start()
    try:
        url = f"http://127.0.0.1:{server.server_port}/slack/events"
        payload = slack.block_actions_payload(value="E3")
        status, _, _ = slack.post_interaction(url, payload, "s3cret")
        assert (status, values) == (200, ["E3"])
        status, _, _ = slack.post_interaction(url, payload, "wrong-secret")
        assert status == 401 and values == ["E3"]
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
        executor.shutdown(wait=True)

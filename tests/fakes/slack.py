"""A fake Slack for tests: the Web API over HTTP and Socket Mode over a websocket, on 127.0.0.1.

Drive it with the real slack_sdk / slack_bolt clients::

    with FakeSlack(channels={"C0123456789": "ops"}) as slack:
        client = WebClient(token=slack.bot_token, base_url=slack.url, retry_handlers=[])
        client.chat_postMessage(channel="C0123456789", text="hi")
        assert [m.text for m in slack.messages.values()] == ["hi"]

It is written from Slack's documentation, not from what sebridge happens to send: it keeps what a
person would see (messages, thread replies, ephemerals, what apps POSTed to response_url), answers
errors the way Slack documents them, and delivers block_actions envelopes the way Socket Mode
does. The Web API half lives in ``slack_web``, the Socket Mode half in ``slack_socket``.
"""

from __future__ import annotations

import hashlib
import hmac
import json
import secrets
import threading
import time
import uuid
from collections.abc import Callable, Collection, Mapping
from types import TracebackType
from typing import Any
from urllib.error import HTTPError
from urllib.parse import urlencode
from urllib.request import Request, urlopen

from .slack_socket import FakeSocketMode, ReceivedFrame, SentEnvelope
from .slack_web import FakeCall, FakeEphemeral, FakeMessage, FakeWebApi, block_errors, start_http

__all__ = [
    "FakeCall",
    "FakeEphemeral",
    "FakeMessage",
    "FakeSlack",
    "ReceivedFrame",
    "SentEnvelope",
    "block_errors",
]

DEFAULT_SCOPES = (
    "chat:write",
    "usergroups:read",
    "users:read",
    "channels:read",
    "groups:read",
    "channels:history",
    "groups:history",
)


class FakeSlack:
    def __init__(
        self,
        bot_token: str = "xoxb-test",
        app_token: str = "xapp-1-test",
        channels: Mapping[str, str] | None = None,
        usergroups: Mapping[str, Collection[str]] | None = None,
        scopes: Collection[str] = DEFAULT_SCOPES,
        not_in_channel: Collection[str] = (),
        *,
        members: Mapping[str, Collection[str]] | None = None,
        users: Mapping[str, str] | None = None,
        team_id: str = "T0FAKE",
        app_id: str = "A0FAKE",
        bot_user_id: str = "U0BOT",
        bot_id: str = "B0FAKE",
        verification_token: str = "fake-verification-token",
        ws_ping_interval: float | None = 0.5,
    ) -> None:
        self.bot_token, self.app_token = bot_token, app_token
        self.team_id, self.app_id = team_id, app_id
        self.users = dict(users or {})
        self.verification_token = verification_token
        self._init = {
            "channels": dict(channels if channels is not None else {"C0123456789": "ops"}),
            "usergroups": dict(usergroups or {}),
            "scopes": tuple(scopes),
            "not_in_channel": tuple(not_in_channel),
            "members": members,
            "bot_user_id": bot_user_id,
            "bot_id": bot_id,
            "users": self.users,  # shared: a test may name a user later
        }
        self._ws_ping_interval = ws_ping_interval
        self._socket: FakeSocketMode | None = None
        self._web: FakeWebApi | None = None
        self._httpd: Any = None
        self._http_thread: threading.Thread | None = None

    # ---------------------------------------------------------------- lifecycle

    def start(self) -> FakeSlack:
        if self._web is not None:
            return self
        self._socket = FakeSocketMode(app_id=self.app_id, ping_interval=self._ws_ping_interval)
        self._web = FakeWebApi(
            bot_token=self.bot_token,
            app_token=self.app_token,
            team_id=self.team_id,
            app_id=self.app_id,
            issue_socket_url=self._socket.issue_url,
            **self._init,
        )
        self._httpd, self._http_thread = start_http(self._web)
        return self

    def stop(self) -> None:
        """Close every websocket (close frame 1001), stop both servers and join their threads."""
        if self._socket is not None:
            self._socket.stop()
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._http_thread is not None:
            self._http_thread.join(5)

    def __enter__(self) -> FakeSlack:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def web(self) -> FakeWebApi:
        if self._web is None:
            raise RuntimeError(
                "FakeSlack is not started: use it as a context manager or call start()"
            )
        return self._web

    @property
    def socket(self) -> FakeSocketMode:
        if self._socket is None:
            raise RuntimeError(
                "FakeSlack is not started: use it as a context manager or call start()"
            )
        return self._socket

    # ---------------------------------------------------------------- Web API view

    @property
    def url(self) -> str:
        """Web API base URL for ``WebClient(base_url=...)``, e.g. ``http://127.0.0.1:PORT/api/``."""
        return self.web.base_url + "api/"

    @property
    def calls(self) -> list[FakeCall]:
        with self.web.lock:
            return list(self.web.calls)

    def calls_to(self, method: str) -> list[FakeCall]:
        return [c for c in self.calls if c.method == method]

    @property
    def messages(self) -> dict[tuple[str, str], FakeMessage]:
        """Top-level messages by (channel, ts); replies are in `replies`. Objects update in place."""
        with self.web.lock:
            return dict(self.web.messages)

    def replies(self, channel: str, ts: str) -> list[FakeMessage]:
        with self.web.lock:
            return list(self.web.threads.get((channel, ts), ()))

    def find(self, channel: str, ts: str) -> FakeMessage | None:
        """A top-level message or a thread reply by its ts."""
        return self.web.find(channel, ts)

    @property
    def deleted(self) -> list[FakeMessage]:
        with self.web.lock:
            return list(self.web.deleted)

    @property
    def ephemerals(self) -> list[FakeEphemeral]:
        with self.web.lock:
            return list(self.web.ephemerals)

    @property
    def responses(self) -> list[dict[str, Any]]:
        with self.web.lock:
            return list(self.web.responses)

    def add_message(
        self, channel: str, text: str, *, user: str = "U0AAA", thread_ts: str | None = None
    ) -> FakeMessage:
        """A message a person posted (the app cannot chat.update it: cant_update_message)."""
        message = FakeMessage(channel, self.web.next_ts(), text, thread_ts=thread_ts, user=user)
        self.web.store(message)
        return message

    def fail_next(
        self,
        method: str,
        error: str = "internal_error",
        *,
        status: int | None = None,
        retry_after: int | None = None,
        count: int = 1,
        body: str | None = None,
        applied: bool = False,
        extra: Mapping[str, Any] | None = None,
        send_retry_after: bool = True,
    ) -> None:
        """Make the next `count` calls of `method` ("*" for any) fail.

        status: HTTP status; default 429 for error="ratelimited" (with Retry-After, default 1,
        unless send_retry_after=False: Slack always sends one, a proxy between may not), else
        200 with ``{"ok": false, "error": error, **extra}``. A 5xx status answers an HTML
        page unless `body` (raw text, "" for empty) is given. applied=True performs the call
        first (the message IS posted) and then answers the failure, as when a response is lost.
        """
        self.web.fail_next(
            method,
            error,
            status=status,
            retry_after=retry_after,
            count=count,
            body=body,
            applied=applied,
            extra=extra,
            send_retry_after=send_retry_after,
        )

    def hold_next(self, method: str) -> threading.Event:
        """Perform the next call of `method`, then hold its answer until the returned event
        is set (30 s at most): its caller can be killed after Slack did what it asked and
        before it heard so."""
        return self.web.hold_next(method)

    def set_down(self, down: bool = True, *, mode: str = "503") -> None:
        """Every Web API request answers 503 with an HTML body (mode="503") or has its
        connection closed without an answer (mode="close"), until set_down(False)."""
        if mode not in ("503", "close"):
            raise ValueError("mode is '503' or 'close'")
        self.web.down = mode if down else None

    def wait_until(self, predicate: Callable[[], bool], timeout: float = 5.0) -> bool:
        deadline = time.monotonic() + timeout
        while True:
            if predicate():
                return True
            if time.monotonic() >= deadline:
                return False
            time.sleep(0.01)

    # ---------------------------------------------------------------- Socket Mode view

    @property
    def socket_connections(self) -> int:
        return self.socket.open_connections

    @property
    def connections_opened(self) -> int:
        """Websocket connections accepted since start (a reconnect adds one)."""
        return self.socket.connections_opened

    @property
    def frames(self) -> list[ReceivedFrame]:
        """Text frames the app sent (acks, anything else), oldest first; pings are not frames here."""
        return self.socket.received()

    def wait_connected(self, timeout: float = 5.0, count: int = 1) -> bool:
        return self.socket.wait_connected(timeout, count)

    def wait_reconnected(self, total: int, timeout: float = 5.0) -> bool:
        """True once `total` connections have been opened since start and one is open.

        The fake sees a new connection a moment before the builtin client switches to it: wait
        for ``client.is_connected()`` and a new ``client.session_id()`` before closing the client,
        or its reconnect can finish after close() and leak the new connection."""
        return self.socket.wait_opened(total, timeout)

    def wait_ack(self, envelope_id: str, timeout: float = 3.0) -> dict[str, Any] | None:
        return self.socket.wait_ack(envelope_id, timeout)

    def ack_latency(self, envelope_id: str) -> float | None:
        return self.socket.ack_latency(envelope_id)

    def disconnect_all(
        self, reason: str = "refresh_requested", *, close_after: float | None = None
    ) -> int:
        """Send ``{"type": "disconnect", "reason": ...}`` on every open connection; with
        `close_after`, close those connections (code 1001) that many seconds later."""
        return self.socket.disconnect_all(reason, close_after)

    def close_all(self, code: int = 1001, reason: str = "") -> int:
        """Close every open websocket with a close frame and no warning."""
        return self.socket.close_all(code, reason)

    def drop_all(self) -> int:
        """Cut every websocket at the TCP level with no close frame, as a network failure does.

        The builtin slack_sdk client only notices after 5 failed pings (about 5 x ping_interval)."""
        return self.socket.drop_all()

    def send_envelope(
        self, payload: dict[str, Any], *, type: str = "interactive", wait: float = 2.0
    ) -> str:
        envelope_id = str(uuid.uuid4())
        envelope = {
            "envelope_id": envelope_id,
            "payload": payload,
            "type": type,
            "accepts_response_payload": type == "slash_commands",
        }
        self.socket.send_envelope(envelope, wait)
        return envelope_id

    def send_block_actions(
        self,
        action_id: str = "approve",
        value: str | None = None,
        user_id: str = "U0AAA",
        channel: str | None = None,
        message_ts: str | None = None,
        message: dict[str, Any] | None = None,
        *,
        block_id: str | None = None,
        wait: float = 2.0,
    ) -> str:
        """A person clicks a button: deliver a block_actions envelope; returns its envelope_id.

        Raises RuntimeError if no connection opens within `wait` seconds."""
        payload = self.block_actions_payload(
            action_id, value, user_id, channel, message_ts, message, block_id=block_id
        )
        return self.send_envelope(payload, wait=wait)

    # ---------------------------------------------------------------- interaction payloads

    def block_actions_payload(
        self,
        action_id: str = "approve",
        value: str | None = None,
        user_id: str = "U0AAA",
        channel: str | None = None,
        message_ts: str | None = None,
        message: dict[str, Any] | None = None,
        *,
        block_id: str | None = None,
    ) -> dict[str, Any]:
        """The block_actions payload Slack sends (docs: reference/interaction-payloads/block_actions-payload).

        With message_ts=None the newest stored message in `channel` holding a button with this
        action_id (and this value, if given) is the one clicked; the stored message fills the
        payload's ``message``, the button's ``block_id``/``text``/``value``."""
        web = self.web
        channel = channel or next(iter(web.channels))
        stored = web.find(channel, message_ts) if message_ts else None
        if message_ts is None:
            with web.lock:
                candidates = [
                    m
                    for m in [
                        *web.messages.values(),
                        *(r for rs in web.threads.values() for r in rs),
                    ]
                    if m.channel == channel and _button(m.blocks, action_id, value) is not None
                ]
            if not candidates and message is None:
                raise ValueError(
                    f"no message in {channel} has a button {action_id!r} (value {value!r})"
                )
            if candidates:
                stored = max(candidates, key=lambda m: float(m.ts))
                message_ts = stored.ts
        if message is None and stored is not None:
            message = stored.as_dict()
        message_ts = message_ts or (message or {}).get("ts") or web.next_ts()
        found = _button((message or {}).get("blocks"), action_id, value)
        element_block, element = found if found else (block_id or "actions", {})
        name = self.users.get(user_id, user_id.lower())
        container: dict[str, Any] = {
            "type": "message",
            "message_ts": message_ts,
            "channel_id": channel,
            "is_ephemeral": False,
        }
        if message and message.get("thread_ts"):
            container["thread_ts"] = message["thread_ts"]
        payload: dict[str, Any] = {
            "type": "block_actions",
            "user": {"id": user_id, "username": name, "name": name, "team_id": self.team_id},
            "api_app_id": self.app_id,
            "token": self.verification_token,
            "container": container,
            "trigger_id": f"{int(time.time())}.{secrets.randbelow(10**10)}.{secrets.token_hex(16)}",
            "team": {"id": self.team_id, "domain": "fake-workspace"},
            "enterprise": None,
            "is_enterprise_install": False,
            "channel": {"id": channel, "name": web.channels.get(channel, channel)},
            "state": {"values": {}},
            "response_url": web.register_response_url(channel, message_ts, user_id),
            "actions": [
                {
                    "action_id": action_id,
                    "block_id": block_id or element_block,
                    "text": element.get(
                        "text", {"type": "plain_text", "text": "Approve", "emoji": True}
                    ),
                    "value": value if value is not None else element.get("value", ""),
                    "type": element.get("type", "button"),
                    "action_ts": f"{time.time():.6f}",
                }
            ],
        }
        if "style" in element:
            payload["actions"][0]["style"] = element["style"]
        if message is not None:
            payload["message"] = message
        return payload

    # ---------------------------------------------------------------- HTTP mode helpers

    @staticmethod
    def signed_request(
        body: bytes | str, signing_secret: str, timestamp: int | None = None
    ) -> dict[str, str]:
        """The headers Slack signs a request with: v0 HMAC-SHA256 over ``v0:{ts}:{body}``."""
        raw = body.encode("utf-8") if isinstance(body, str) else body
        ts = str(int(time.time()) if timestamp is None else timestamp)
        digest = hmac.new(
            signing_secret.encode("utf-8"), b"v0:" + ts.encode() + b":" + raw, hashlib.sha256
        )
        return {"X-Slack-Request-Timestamp": ts, "X-Slack-Signature": "v0=" + digest.hexdigest()}

    @staticmethod
    def block_actions_form(payload: dict[str, Any]) -> str:
        """The body Slack POSTs to an HTTP-mode request URL: ``payload=<urlencoded json>``."""
        return urlencode({"payload": json.dumps(payload, separators=(",", ":"))})

    def post_interaction(
        self,
        url: str,
        payload: dict[str, Any],
        signing_secret: str,
        *,
        timestamp: int | None = None,
        timeout: float = 5.0,
    ) -> tuple[int, dict[str, str], bytes]:
        """POST `payload` to an HTTP-mode request URL exactly as Slack would; (status, headers, body)."""
        body = self.block_actions_form(payload).encode("utf-8")
        headers = {
            "Content-Type": "application/x-www-form-urlencoded",
            "User-Agent": "Slackbot 1.0 (+https://api.slack.com/robots)",
            **self.signed_request(body, signing_secret, timestamp),
        }
        request = Request(url, data=body, headers=headers, method="POST")
        try:
            with urlopen(request, timeout=timeout) as response:
                return response.status, dict(response.headers.items()), response.read()
        except HTTPError as e:
            return e.code, dict(e.headers.items()), e.read()


def _button(
    blocks: list[dict[str, Any]] | None, action_id: str, value: str | None
) -> tuple[str, dict[str, Any]] | None:
    """(block_id, element) of the interactive element with this action_id (and value) in `blocks`."""
    for i, block in enumerate(blocks or ()):
        elements = list(block.get("elements") or ())
        if isinstance(block.get("accessory"), dict):
            elements.append(block["accessory"])
        for element in elements:
            if (
                isinstance(element, dict)
                and element.get("action_id") == action_id
                and (value is None or element.get("value") == value)
            ):
                return str(block.get("block_id") or f"b{i}"), element
    return None

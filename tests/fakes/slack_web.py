"""The Web API half of the fake Slack: an HTTP server on 127.0.0.1 that answers like slack.com/api.

Written from Slack's method reference (docs.slack.dev/reference/methods/...): every answer is JSON
``{"ok": true, ...}`` or ``{"ok": false, "error": "..."}`` with HTTP 200, rate limits are HTTP 429
with ``Retry-After``, and bot-token answers carry ``x-oauth-scopes``. The server also takes the
POSTs that apps send to an interaction's ``response_url``.
"""

from __future__ import annotations

import copy
import json
import secrets
import socketserver
import threading
import time
from collections.abc import Callable, Collection, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any, NamedTuple
from urllib.parse import parse_qsl, urlsplit

JSON_FIELDS = ("blocks", "attachments", "metadata", "user_auth_blocks")
BOT_METHODS = frozenset(
    {
        "auth.test",
        "chat.postMessage",
        "chat.update",
        "chat.postEphemeral",
        "conversations.info",
        "conversations.history",
        "conversations.replies",
        "usergroups.users.list",
        "users.info",
    }
)
APP_METHODS = frozenset({"apps.connections.open"})
SCOPES_NEEDED: dict[str, tuple[str, ...]] = {  # any one of these is enough
    "chat.postMessage": ("chat:write",),
    "chat.update": ("chat:write",),
    "chat.postEphemeral": ("chat:write",),
    "conversations.info": ("channels:read", "groups:read"),
    "conversations.history": ("channels:history", "groups:history"),
    "conversations.replies": ("channels:history", "groups:history"),
    "usergroups.users.list": ("usergroups:read",),
    "users.info": ("users:read",),
}
HTML_5XX = "<html><head><title>{code}</title></head><body><h1>{code} Service Unavailable</h1></body></html>"
MAX_TEXT = 40_000
RESPONSE_URL_USES = 5  # Slack: a response_url may be used up to 5 times within 30 minutes


BLOCK_TYPES = frozenset(
    {
        "actions",
        "context",
        "context_actions",
        "divider",
        "file",
        "header",
        "image",
        "input",
        "markdown",
        "rich_text",
        "section",
        "table",
        "video",
    }
)


def _text_errors(obj: Any, where: str, limit: int, *, plain_only: bool = False) -> list[str]:
    if not isinstance(obj, dict) or obj.get("type") not in ("plain_text", "mrkdwn"):
        return [f"must provide an object with type plain_text or mrkdwn [json-pointer:{where}]"]
    if plain_only and obj["type"] != "plain_text":
        return [f"must be a plain_text object [json-pointer:{where}/type]"]
    text = obj.get("text")
    if not isinstance(text, str) or not text:
        return [f"must be more than 0 characters [json-pointer:{where}/text]"]
    if len(text) > limit:
        return [f"must be less than {limit + 1} characters [json-pointer:{where}/text]"]
    return []


def _element_errors(element: Any, where: str) -> list[str]:
    if not isinstance(element, dict) or not isinstance(element.get("type"), str):
        return [f"missing required field: type [json-pointer:{where}]"]
    errors: list[str] = []
    if len(str(element.get("action_id", ""))) > 255:
        errors.append(f"must be less than 256 characters [json-pointer:{where}/action_id]")
    if element["type"] == "button":
        errors += _text_errors(element.get("text"), f"{where}/text", 75, plain_only=True)
        if len(str(element.get("value", ""))) > 2000:
            errors.append(f"must be less than 2001 characters [json-pointer:{where}/value]")
        if "style" in element and element["style"] not in ("primary", "danger"):
            errors.append(f"must be one of primary, danger [json-pointer:{where}/style]")
        if "confirm" in element:
            errors += _confirm_errors(element["confirm"], f"{where}/confirm")
    return errors


def _confirm_errors(confirm: Any, where: str) -> list[str]:
    """A confirmation dialog object (docs.slack.dev/reference/block-kit/composition-objects/
    confirmation-dialog-object): title, text, confirm and deny required, each within its limit."""
    if not isinstance(confirm, dict):
        return [f"must be an object [json-pointer:{where}]"]
    errors = _text_errors(confirm.get("title"), f"{where}/title", 100, plain_only=True)
    errors += _text_errors(confirm.get("text"), f"{where}/text", 300)
    for button in ("confirm", "deny"):
        errors += _text_errors(confirm.get(button), f"{where}/{button}", 30, plain_only=True)
    if "style" in confirm and confirm["style"] not in ("primary", "danger"):
        errors.append(f"must be one of primary, danger [json-pointer:{where}/style]")
    extra = set(confirm) - {"title", "text", "confirm", "deny", "style"}
    if extra:
        errors.append(f"unexpected fields {sorted(extra)} [json-pointer:{where}]")
    return errors


def block_errors(blocks: list[Any]) -> list[str]:
    """The Block Kit limits Slack enforces on messages (docs.slack.dev/reference/block-kit/blocks)."""
    errors: list[str] = []
    if len(blocks) > 50:
        errors.append("no more than 50 items allowed [json-pointer:/blocks]")
    block_ids: set[str] = set()
    for i, block in enumerate(blocks):
        where = f"/blocks/{i}"
        if not isinstance(block, dict) or not isinstance(block.get("type"), str):
            errors.append(f"missing required field: type [json-pointer:{where}]")
            continue
        kind = block["type"]
        if kind not in BLOCK_TYPES:
            errors.append(f"unsupported type: {kind} [json-pointer:{where}/type]")
            continue
        if "block_id" in block:
            block_id = block["block_id"]
            if not isinstance(block_id, str) or not 0 < len(block_id) <= 255:
                errors.append(f"must be 1 to 255 characters [json-pointer:{where}/block_id]")
            elif block_id in block_ids:
                errors.append(f"duplicate block_id [json-pointer:{where}/block_id]")
            else:
                block_ids.add(block_id)
        if kind == "section":
            fields = block.get("fields")
            if "text" not in block and not fields:
                errors.append(f"must provide either text or fields [json-pointer:{where}]")
            if "text" in block:
                errors += _text_errors(block["text"], f"{where}/text", 3000)
            if fields is not None:
                if not isinstance(fields, list) or len(fields) > 10:
                    errors.append(f"no more than 10 items allowed [json-pointer:{where}/fields]")
                else:
                    for j, f in enumerate(fields):
                        errors += _text_errors(f, f"{where}/fields/{j}", 2000)
        elif kind == "header":
            errors += _text_errors(block.get("text"), f"{where}/text", 150, plain_only=True)
        elif kind in ("actions", "context"):
            elements = block.get("elements")
            most = 25 if kind == "actions" else 10
            if not isinstance(elements, list) or not 0 < len(elements) <= most:
                errors.append(f"must have 1 to {most} items [json-pointer:{where}/elements]")
            elif kind == "actions":
                for j, element in enumerate(elements):
                    errors += _element_errors(element, f"{where}/elements/{j}")
    return errors


@dataclass
class FakeCall:
    """One Web API request as the fake received it, and what it answered."""

    method: str
    params: dict[str, Any]
    token: str | None
    at: float
    status: int = 0
    response: dict[str, Any] | str | None = None


@dataclass
class FakeMessage:
    """A message as people in the channel see it now; ``history`` holds the earlier versions."""

    channel: str
    ts: str
    text: str
    blocks: list[dict[str, Any]] | None = None
    metadata: dict[str, Any] | None = None
    thread_ts: str | None = None
    # A thread reply also shown in the channel (chat.postMessage reply_broadcast).
    broadcast: bool = False
    history: list[FakeMessage] = field(default_factory=list)
    user: str = ""
    bot_id: str | None = None
    app_id: str | None = None
    team: str = ""

    def as_dict(self) -> dict[str, Any]:
        """The message object Slack returns (chat.postMessage ``message``, block_actions ``message``)."""
        d: dict[str, Any] = {"type": "message", "user": self.user, "text": self.text, "ts": self.ts}
        if self.bot_id:
            d.update(bot_id=self.bot_id, app_id=self.app_id, team=self.team)
        if self.blocks:
            d["blocks"] = copy.deepcopy(self.blocks)
        if self.metadata:
            d["metadata"] = copy.deepcopy(self.metadata)
        if self.thread_ts:
            d["thread_ts"] = self.thread_ts
        if self.broadcast:
            d["subtype"] = "thread_broadcast"
        if self.history:
            d["edited"] = {"user": self.user, "ts": self.history[-1].ts}
        return d


class FakeEphemeral(NamedTuple):
    channel: str
    user: str
    text: str
    blocks: list[dict[str, Any]] | None


@dataclass
class _Failure:
    error: str
    status: int
    retry_after: int | None
    body: str | None
    applied: bool
    extra: dict[str, Any]
    count: int


class ApiError(Exception):
    def __init__(self, error: str, **extra: Any) -> None:
        super().__init__(error)
        self.body: dict[str, Any] = {"ok": False, "error": error, **extra}


@dataclass
class _ResponseUrl:
    channel: str
    message_ts: str | None
    user: str
    uses: int = 0


class FakeWebApi:
    """State and behaviour of the Web API; `FakeSlack` owns one and serves it over HTTP."""

    def __init__(
        self,
        *,
        bot_token: str,
        app_token: str,
        channels: Mapping[str, str],
        usergroups: Mapping[str, Collection[str]],
        scopes: Collection[str],
        not_in_channel: Collection[str],
        members: Mapping[str, Collection[str]] | None,
        team_id: str,
        bot_user_id: str,
        bot_id: str,
        app_id: str,
        issue_socket_url: Callable[[], str],
        users: dict[str, str] | None = None,
    ) -> None:
        # Member id -> user name (users.info; the click payload's `user.name`).
        self.users = users if users is not None else {}
        self.bot_token, self.app_token = bot_token, app_token
        self.channels = dict(channels)
        self.usergroups = {k: list(v) for k, v in usergroups.items()}
        self.scopes = tuple(scopes)
        self.not_in_channel = set(not_in_channel)
        self.members = {k: set(v) for k, v in members.items()} if members is not None else None
        self.team_id, self.bot_user_id, self.bot_id, self.app_id = (
            team_id,
            bot_user_id,
            bot_id,
            app_id,
        )
        self.issue_socket_url = issue_socket_url
        self.lock = threading.RLock()
        self.calls: list[FakeCall] = []
        self.messages: dict[tuple[str, str], FakeMessage] = {}
        self.threads: dict[tuple[str, str], list[FakeMessage]] = {}
        self.deleted: list[FakeMessage] = []
        self.ephemerals: list[FakeEphemeral] = []
        self.responses: list[dict[str, Any]] = []
        self.down: str | None = None  # None, "503" or "close"
        self._failures: dict[str, list[_Failure]] = {}
        self._holds: dict[str, threading.Event] = {}
        self._response_urls: dict[str, _ResponseUrl] = {}
        self._last_us = 0
        self.base_url = ""  # set once the HTTP server is bound

    # ---------------------------------------------------------------- test controls

    def fail_next(
        self,
        method: str,
        error: str,
        *,
        status: int | None,
        retry_after: int | None,
        count: int,
        body: str | None,
        applied: bool,
        extra: Mapping[str, Any] | None,
        send_retry_after: bool = True,
    ) -> None:
        if status is None:
            status = 429 if error == "ratelimited" else 200
        if status == 429 and retry_after is None and send_retry_after:
            retry_after = 1
        failure = _Failure(error, status, retry_after, body, applied, dict(extra or {}), count)
        with self.lock:
            self._failures.setdefault(method, []).append(failure)

    def hold_next(self, method: str) -> threading.Event:
        release = threading.Event()
        with self.lock:
            self._holds[method] = release
        return release

    def _take_failure(self, method: str) -> _Failure | None:
        with self.lock:
            for key in (method, "*"):
                queue = self._failures.get(key)
                if queue:
                    failure = queue[0]
                    failure.count -= 1
                    if failure.count <= 0:
                        queue.pop(0)
                    return failure
        return None

    def next_ts(self) -> str:
        with self.lock:
            self._last_us = max(int(time.time() * 1_000_000), self._last_us + 1)
            return f"{self._last_us // 1_000_000}.{self._last_us % 1_000_000:06d}"

    def find(self, channel: str, ts: str) -> FakeMessage | None:
        with self.lock:
            if (channel, ts) in self.messages:
                return self.messages[(channel, ts)]
            for replies in self.threads.values():
                for reply in replies:
                    if reply.channel == channel and reply.ts == ts:
                        return reply
        return None

    def register_response_url(self, channel: str, message_ts: str | None, user: str) -> str:
        key = secrets.token_hex(12)
        with self.lock:
            self._response_urls[key] = _ResponseUrl(channel, message_ts, user)
        return f"{self.base_url}actions/{self.team_id}/{int(time.time())}/{key}"

    # ---------------------------------------------------------------- request handling

    def handle(
        self, method: str, params: dict[str, Any], token: str | None
    ) -> tuple[int, dict[str, str], Any]:
        """Answer one Web API call: (HTTP status, extra headers, JSON dict or raw text body)."""
        call = FakeCall(method=method, params=params, token=token, at=time.time())
        with self.lock:
            self.calls.append(call)
        headers: dict[str, str] = {}
        if token == self.bot_token:
            headers["x-oauth-scopes"] = ",".join(self.scopes)
            if method in SCOPES_NEEDED:
                headers["x-accepted-oauth-scopes"] = ",".join(SCOPES_NEEDED[method])
        if self.down is not None:  # "close": the HTTP handler answers nothing and hangs up
            call.status = 503 if self.down == "503" else 0
            call.response = HTML_5XX.format(code=503) if call.status else None
            return call.status, {}, call.response
        failure = self._take_failure(method)
        status, body = 200, None
        if failure is None or failure.applied:
            try:
                body = self._dispatch(method, params, token)
            except ApiError as e:
                body = e.body
        if failure is not None:
            status = failure.status
            if failure.retry_after is not None:
                headers["Retry-After"] = str(failure.retry_after)
            if failure.body is not None:
                body = failure.body
            elif status >= 500:
                body = HTML_5XX.format(code=status)
            else:
                body = {"ok": False, "error": failure.error, **failure.extra}
        call.status, call.response = status, body
        with self.lock:
            release = self._holds.pop(method, None)
        if release is not None:  # done; the answer waits (its caller may die meanwhile)
            release.wait(30)
        return status, headers, body

    def _dispatch(self, method: str, params: dict[str, Any], token: str | None) -> dict[str, Any]:
        handler = getattr(self, "_m_" + method.replace(".", "_"), None)
        if method not in BOT_METHODS | APP_METHODS or handler is None:
            raise ApiError("unknown_method", req_method=method)
        if not token:
            raise ApiError("not_authed")
        if token not in (self.bot_token, self.app_token):
            raise ApiError("invalid_auth")
        if (token == self.app_token) != (method in APP_METHODS):
            raise ApiError("not_allowed_token_type")
        needed = SCOPES_NEEDED.get(method, ())
        if needed and not set(needed) & set(self.scopes):
            raise ApiError("missing_scope", needed=",".join(needed), provided=",".join(self.scopes))
        with self.lock:
            result: dict[str, Any] = handler(params)
        return {"ok": True, **result}

    def _channel(self, value: Any, *, by_name: bool = False) -> str:
        name = str(value or "")
        if name in self.channels:
            return name
        if by_name:
            for cid, cname in self.channels.items():
                if cname == name.removeprefix("#"):
                    return cid
        raise ApiError("channel_not_found")

    def _check_postable(self, channel: str) -> None:
        if channel in self.not_in_channel and "chat:write.public" not in self.scopes:
            raise ApiError("not_in_channel")

    def _content(self, params: dict[str, Any], *, required: bool) -> dict[str, Any]:
        """Validate text/blocks/metadata as chat.* methods do; return the fields that were given."""
        out: dict[str, Any] = {}
        if "blocks" in params and params["blocks"] is not None:
            blocks = params["blocks"]
            if not isinstance(blocks, list):
                raise ApiError("invalid_blocks_format")
            errors = block_errors(blocks)
            if errors:
                raise ApiError(
                    "invalid_blocks",
                    errors=errors,
                    response_metadata={"messages": [f"[ERROR] {e}" for e in errors]},
                )
            out["blocks"] = blocks
        if params.get("text") is not None:
            text = str(params["text"])
            if len(text) > MAX_TEXT:
                raise ApiError("msg_too_long")
            out["text"] = text
        if (
            required
            and not out.get("text")
            and not out.get("blocks")
            and not params.get("attachments")
        ):
            raise ApiError("no_text")
        if "metadata" in params and params["metadata"] is not None:
            metadata = params["metadata"]
            if not isinstance(metadata, dict):
                raise ApiError("invalid_metadata_format")
            if metadata and (
                not isinstance(metadata.get("event_type"), str)
                or not isinstance(metadata.get("event_payload"), dict)
            ):
                raise ApiError("invalid_metadata_schema")
            out["metadata"] = metadata
        return out

    def _new_message(
        self, channel: str, content: dict[str, Any], thread_ts: str | None
    ) -> FakeMessage:
        return FakeMessage(
            channel=channel,
            ts=self.next_ts(),
            text=content.get("text", ""),
            blocks=copy.deepcopy(content.get("blocks")) or None,
            metadata=copy.deepcopy(content.get("metadata")) or None,
            thread_ts=thread_ts,
            user=self.bot_user_id,
            bot_id=self.bot_id,
            app_id=self.app_id,
            team=self.team_id,
        )

    def store(self, message: FakeMessage) -> None:
        with self.lock:
            if message.thread_ts is None:
                self.messages[(message.channel, message.ts)] = message
            else:
                self.threads.setdefault((message.channel, message.thread_ts), []).append(message)

    def _parent_ts(self, channel: str, thread_ts: str) -> str:
        if (channel, thread_ts) in self.messages:
            return thread_ts
        reply = self.find(channel, thread_ts)
        if reply is not None and reply.thread_ts:  # a reply's ts threads under its parent
            return reply.thread_ts
        raise ApiError("thread_not_found")

    # ---------------------------------------------------------------- methods

    def _m_auth_test(self, params: dict[str, Any]) -> dict[str, Any]:
        return {
            "url": "https://fake-workspace.slack.com/",
            "team": "Fake Workspace",
            "user": "sebridge",
            "team_id": self.team_id,
            "user_id": self.bot_user_id,
            "bot_id": self.bot_id,
            "is_enterprise_install": False,
        }

    def _m_apps_connections_open(self, params: dict[str, Any]) -> dict[str, Any]:
        return {"url": self.issue_socket_url()}

    def _m_chat_postMessage(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params.get("channel"), by_name=True)
        self._check_postable(channel)
        content = self._content(params, required=True)
        thread_ts = params.get("thread_ts") or None
        if thread_ts is not None:
            thread_ts = self._parent_ts(channel, str(thread_ts))
        message = self._new_message(channel, content, thread_ts)
        # reply_broadcast only means something with thread_ts (Slack ignores it otherwise).
        broadcast = params.get("reply_broadcast") in (True, "true", "1", 1)
        message.broadcast = thread_ts is not None and broadcast
        self.store(message)
        return {"channel": channel, "ts": message.ts, "message": message.as_dict()}

    def _m_chat_update(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params.get("channel"))
        message = self.find(channel, str(params.get("ts") or ""))
        if message is None:
            raise ApiError("message_not_found")
        if message.bot_id != self.bot_id:
            raise ApiError("cant_update_message")
        content = self._content(params, required=True)
        snapshot = copy.deepcopy(message)
        snapshot.history = []
        message.history.append(snapshot)
        if "text" in content:
            message.text = content["text"]
        if "blocks" in params and params["blocks"] is not None:  # [] removes the blocks
            message.blocks = copy.deepcopy(content.get("blocks")) or None
        if "metadata" in content:  # {} removes the metadata
            message.metadata = copy.deepcopy(content["metadata"]) or None
        return {
            "channel": channel,
            "ts": message.ts,
            "text": message.text,
            "message": message.as_dict(),
        }

    def _m_chat_postEphemeral(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params.get("channel"), by_name=True)
        self._check_postable(channel)
        user = str(params.get("user") or "")
        if not user:
            raise ApiError("user_not_found")
        if self.members is not None and user not in self.members.get(channel, ()):
            raise ApiError("user_not_in_channel")
        content = self._content(params, required=True)
        self.ephemerals.append(
            FakeEphemeral(
                channel, user, content.get("text", ""), copy.deepcopy(content.get("blocks"))
            )
        )
        return {"message_ts": self.next_ts()}

    def _m_conversations_info(self, params: dict[str, Any]) -> dict[str, Any]:
        channel = self._channel(params.get("channel"))
        private = channel.startswith("G")
        name = self.channels[channel]
        info: dict[str, Any] = {
            "id": channel,
            "name": name,
            "name_normalized": name,
            "is_channel": not private,
            "is_group": private,
            "is_im": False,
            "is_mpim": False,
            "is_private": private,
            "is_archived": False,
            "is_general": False,
            "is_shared": False,
            "is_ext_shared": False,
            "is_org_shared": False,
            "is_member": channel not in self.not_in_channel,
            "created": 1_700_000_000,
            "creator": "U0ADMIN",
        }
        return {"channel": info}

    def _readable(self, params: dict[str, Any]) -> str:
        channel = self._channel(params.get("channel"))
        if channel in self.not_in_channel:
            raise ApiError("not_in_channel")
        return channel

    @staticmethod
    def _listed(messages: list[FakeMessage], params: dict[str, Any]) -> list[dict[str, Any]]:
        """Messages within oldest..latest (exclusive unless inclusive), metadata only on request."""
        oldest = float(params.get("oldest") or 0)
        latest = float(params.get("latest") or "inf")
        inclusive = str(params.get("inclusive", "")).lower() in ("1", "true")
        shown = []
        for m in messages:
            ts = float(m.ts)
            inside = oldest <= ts <= latest if inclusive else oldest < ts < latest
            if inside:
                d = m.as_dict()
                if str(params.get("include_all_metadata", "")).lower() not in ("1", "true"):
                    d.pop("metadata", None)
                shown.append(d)
        return shown[: int(params.get("limit") or 100)]

    def _m_conversations_history(self, params: dict[str, Any]) -> dict[str, Any]:
        """Top-level messages, newest first (docs: conversations.history)."""
        channel = self._readable(params)
        with self.lock:
            mine = sorted(
                (m for (c, _), m in self.messages.items() if c == channel),
                key=lambda m: float(m.ts),
                reverse=True,
            )
        return {"messages": self._listed(mine, params), "has_more": False}

    def _m_conversations_replies(self, params: dict[str, Any]) -> dict[str, Any]:
        """A thread: its parent, then the replies, oldest first (docs: conversations.replies)."""
        channel = self._readable(params)
        ts = str(params.get("ts") or "")
        with self.lock:
            parent = self.messages.get((channel, ts))
            if parent is None:
                raise ApiError("thread_not_found")
            thread = [parent, *self.threads.get((channel, ts), [])]
        listed = self._listed(thread, {**params, "oldest": 0, "latest": None})
        oldest = float(params.get("oldest") or 0)
        replies = [m for m in listed[1:] if float(m["ts"]) > oldest]
        return {"messages": [listed[0], *replies], "has_more": False}

    def _m_usergroups_users_list(self, params: dict[str, Any]) -> dict[str, Any]:
        group = str(params.get("usergroup") or "")
        if group not in self.usergroups:
            raise ApiError("no_such_subteam")
        return {"users": list(self.usergroups[group])}

    def _m_users_info(self, params: dict[str, Any]) -> dict[str, Any]:
        """users.info as Slack documents it (docs: methods/users.info): the user object,
        its `name`, and its profile's `real_name` and `display_name`; `user_not_found` for
        an id the workspace does not know."""
        user = str(params.get("user") or "")
        if user not in self.users:
            raise ApiError("user_not_found")
        name = self.users[user]
        return {
            "user": {
                "id": user,
                "team_id": self.team_id,
                "name": name,
                "deleted": False,
                "real_name": name.title(),
                "is_bot": False,
                "profile": {"real_name": name.title(), "display_name": name},
            }
        }

    # ---------------------------------------------------------------- response_url

    def handle_response_url(self, key: str, body: dict[str, Any]) -> tuple[int, str]:
        """What Slack does with a POST to an interaction's response_url (docs: "Handling user interaction")."""
        with self.lock:
            target = self._response_urls.get(key)
            if target is None:
                return 404, "no_service"
            if target.uses >= RESPONSE_URL_USES:
                return 404, "used_url"
            target.uses += 1
            self.responses.append(body)
            original = self.find(target.channel, target.message_ts) if target.message_ts else None
            if body.get("delete_original") in (True, "true"):
                if original is not None:
                    self.messages.pop((original.channel, original.ts), None)
                    for replies in self.threads.values():
                        if original in replies:
                            replies.remove(original)
                    self.deleted.append(original)
                return 200, "ok"
            try:
                content = self._content(body, required=True)
            except ApiError as e:
                return 400, str(e.body["error"])
            if body.get("replace_original") in (True, "true") and original is not None:
                snapshot = copy.deepcopy(original)
                snapshot.history = []
                original.history.append(snapshot)
                original.text = content.get("text", "")
                original.blocks = copy.deepcopy(content.get("blocks")) or None
            elif body.get("response_type") == "in_channel":
                self.store(self._new_message(target.channel, content, body.get("thread_ts")))
            else:
                self.ephemerals.append(
                    FakeEphemeral(
                        target.channel,
                        target.user,
                        content.get("text", ""),
                        copy.deepcopy(content.get("blocks")),
                    )
                )
            return 200, "ok"


# -------------------------------------------------------------------- HTTP plumbing


class _HttpServer(ThreadingHTTPServer):
    daemon_threads = False  # so server_close() joins the request threads: no threads left behind
    block_on_close = True
    api: FakeWebApi

    def server_bind(self) -> None:
        # HTTPServer.server_bind resolves the host name (getfqdn), which can be slow; skip it.
        socketserver.TCPServer.server_bind(self)
        self.server_name, self.server_port = self.server_address[:2]


def _decode_params(raw: bytes, content_type: str, query: str) -> tuple[dict[str, Any], str | None]:
    """Merge query and body the way Slack reads them; JSON-string fields are decoded."""
    params: dict[str, Any] = dict(parse_qsl(query, keep_blank_values=True))
    body_token: str | None = None
    if raw:
        if content_type.startswith("application/json"):
            try:
                data = json.loads(raw.decode("utf-8"))
            except ValueError:
                data = {}
            if isinstance(data, dict):
                data.pop("token", None)  # Slack ignores a token inside a JSON body
                params.update(data)
        else:
            form = dict(parse_qsl(raw.decode("utf-8"), keep_blank_values=True))
            params.update(form)
    body_token = params.pop("token", None)
    for name in JSON_FIELDS:
        value = params.get(name)
        if isinstance(value, str):
            try:
                params[name] = json.loads(value) if value else None
            except ValueError:
                params[name] = value  # left as a string: the method answers *_format errors
    return params, body_token


class _Handler(BaseHTTPRequestHandler):
    server: _HttpServer
    protocol_version = "HTTP/1.0"

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def do_GET(self) -> None:
        self._serve()

    def do_POST(self) -> None:
        self._serve()

    def _serve(self) -> None:
        api = self.server.api
        length = int(self.headers.get("Content-Length") or 0)
        raw = self.rfile.read(length) if length else b""
        parts = urlsplit(self.path)
        if parts.path.startswith("/actions/"):
            try:
                body = json.loads(raw.decode("utf-8") or "{}")
            except ValueError:
                body = dict(parse_qsl(raw.decode("utf-8")))
            status, text = api.handle_response_url(parts.path.rsplit("/", 1)[-1], body)
            self._send(status, {}, text, "text/html")
            return
        if not parts.path.startswith("/api/"):
            self._send(404, {}, "not found", "text/html")
            return
        params, body_token = _decode_params(raw, self.headers.get("Content-Type", ""), parts.query)
        auth = self.headers.get("Authorization", "")
        token = auth[7:].strip() if auth.startswith("Bearer ") else body_token
        status, headers, body = api.handle(parts.path[len("/api/") :], params, token)
        if status == 0:  # set_down(mode="close"): hang up without an answer
            self.close_connection = True
            return
        if isinstance(body, dict):
            self._send(status, headers, json.dumps(body), "application/json; charset=utf-8")
        else:
            self._send(status, headers, body or "", "text/html")

    def _send(self, status: int, headers: dict[str, str], body: str, content_type: str) -> None:
        data = body.encode("utf-8")
        try:
            self.send_response(status)
            self.send_header("Content-Type", content_type)
            self.send_header("Content-Length", str(len(data)))
            for name, value in headers.items():
                self.send_header(name, value)
            self.end_headers()
            self.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the caller died waiting (hold_next)
            self.close_connection = True


def start_http(api: FakeWebApi) -> tuple[_HttpServer, threading.Thread]:
    httpd = _HttpServer(("127.0.0.1", 0), _Handler)
    httpd.api = api
    api.base_url = f"http://127.0.0.1:{httpd.server_address[1]}/"
    thread = threading.Thread(target=httpd.serve_forever, kwargs={"poll_interval": 0.01})
    thread.name = "fake-slack-http"
    thread.start()
    return httpd, thread

"""A fake Microsoft Teams: a Workflows webhook and a legacy Office 365 connector on 127.0.0.1.

Written from Microsoft's documentation of both:
- Workflows ("Post to a channel when a webhook request is received"): the
  trigger URL carries `sig` (401 DirectApiInvalidAuthorizationSignature when
  wrong, 404 WorkflowNotFound for a deleted flow); any JSON body is answered
  202 with an empty body before the flow runs. The flow then posts each
  attachment of contentType application/vnd.microsoft.card.adaptive; anything
  else (a MessageCard) or a card over 28 KB fails inside the flow and is never
  shown, without the caller hearing of it.
- Connector (`/webhookb2/...`): a MessageCard (or an Adaptive Card in a
  message envelope) is answered 200 with the body "1"; a card with neither
  summary nor text gets 400 "Summary or Text is required."; above 28 KB, 413.
Both can be told to fail the next requests (`fail_next(429, retry_after=2)`), or to hang
(`hold_next()`).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
import uuid
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any
from urllib.parse import parse_qs, urlsplit

MAX_MESSAGE = 28 * 1024
ADAPTIVE = "application/vnd.microsoft.card.adaptive"


@dataclass
class Post:
    """One request a webhook received, and what it answered."""

    kind: str  # "workflows" or "connector"
    body: Any  # parsed JSON (None when it was not JSON)
    size: int
    status: int
    headers: dict[str, str] = field(default_factory=dict)
    at: float = 0.0  # time.time() when the request had arrived in full


@dataclass
class Shown:
    """A card that appeared in the channel."""

    kind: str  # "adaptive" or "messagecard"
    card: dict[str, Any]


class FakeTeams:
    """Both webhook kinds on one local server; `posts` and `shown` record what happened."""

    def __init__(self) -> None:
        self.sig = secrets.token_urlsafe(32)
        self.workflow = uuid.uuid4().hex
        self.connector = (
            f"{uuid.uuid4()}@{uuid.uuid4()}/IncomingWebhook/{uuid.uuid4().hex}/{uuid.uuid4()}"
        )
        self.posts: list[Post] = []
        self.shown: list[Shown] = []
        self.deleted = False
        self._failures: list[tuple[int, str, dict[str, str]]] = []
        self._holds: list[threading.Event] = []
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-teams", daemon=True
        )

    # ---- lifecycle

    def __enter__(self) -> FakeTeams:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    @property
    def workflows_url(self) -> str:
        return (
            f"{self.base}/workflows/{self.workflow}/triggers/manual/paths/invoke"
            f"?api-version=2016-06-01&sp=%2Ftriggers%2Fmanual%2Frun&sv=1.0&sig={self.sig}"
        )

    @property
    def connector_url(self) -> str:
        return f"{self.base}/webhookb2/{self.connector}"

    # ---- scripting

    def fail_next(
        self, status: int, body: str = "", *, times: int = 1, retry_after: float | None = None
    ) -> None:
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        with self._lock:
            self._failures.extend([(status, body, headers)] * times)

    def hold_next(self) -> threading.Event:
        """Answer the next request only once the returned event is set (30 s at most): a
        webhook that hangs, for the client's timeout."""
        release = threading.Event()
        with self._lock:
            self._holds.append(release)
        return release

    def wait_shown(self, count: int, timeout: float = 10.0) -> list[Shown]:
        """Wait until `count` cards were shown; returns them all."""
        with self._changed:
            self._changed.wait_for(lambda: len(self.shown) >= count, timeout)
            if len(self.shown) < count:
                raise AssertionError(
                    f"{len(self.shown)} cards shown, waited for {count}: {self.shown}"
                )
            return list(self.shown)

    # ---- the two webhooks

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        length = int(request.headers.get("Content-Length") or 0)
        raw = request.rfile.read(length)
        arrived = time.time()
        parts = urlsplit(request.path)
        try:
            body = json.loads(raw)
        except ValueError:
            body = None
        if parts.path.startswith("/workflows/"):
            status, text, headers = self._workflows(
                parts.path, parse_qs(parts.query), body, len(raw)
            )
            kind = "workflows"
        elif parts.path.startswith("/webhookb2/"):
            status, text, headers = self._connector(parts.path, body, len(raw))
            kind = "connector"
        else:
            status, text, headers = 404, "Not Found", {}
            kind = "other"
        with self._changed:
            self.posts.append(Post(kind, body, len(raw), status, headers, arrived))
            self._changed.notify_all()
            hold = self._holds.pop(0) if self._holds else None
        if hold is not None:
            hold.wait(30)
        try:
            self._answer(request, status, text, headers)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
            request.close_connection = True

    def _answer(
        self, request: BaseHTTPRequestHandler, status: int, text: str, headers: dict[str, str]
    ) -> None:
        data = text.encode()
        request.send_response(status)
        content_type = (
            "application/json; charset=utf-8"
            if text.startswith("{")
            else "text/plain; charset=utf-8"
        )
        for name, value in {
            "Content-Length": str(len(data)),
            "Content-Type": content_type,
            **headers,
        }.items():
            request.send_header(name, value)
        request.end_headers()
        request.wfile.write(data)

    def _failure(self) -> tuple[int, str, dict[str, str]] | None:
        with self._lock:
            return self._failures.pop(0) if self._failures else None

    def _workflows(
        self, path: str, query: dict[str, list[str]], body: Any, size: int
    ) -> tuple[int, str, dict[str, str]]:
        if self.deleted or path != f"/workflows/{self.workflow}/triggers/manual/paths/invoke":
            return 404, _error("WorkflowNotFound", "The workflow could not be found."), {}
        if query.get("sig") != [self.sig]:
            return (
                401,
                _error(
                    "DirectApiInvalidAuthorizationSignature",
                    "The provided authorization signature is not valid for the request.",
                ),
                {},
            )
        failure = self._failure()
        if failure:
            return failure
        if body is None:
            return (
                400,
                _error("InvalidRequestContent", "The request content is not valid JSON."),
                {},
            )
        # 202 first; the flow runs afterwards and fails quietly on what it cannot post.
        for attachment in body.get("attachments") or [] if isinstance(body, dict) else []:
            if attachment.get("contentType") == ADAPTIVE and size <= MAX_MESSAGE:
                self._show("adaptive", attachment.get("content") or {})
        return 202, "", {}

    def _connector(self, path: str, body: Any, size: int) -> tuple[int, str, dict[str, str]]:
        if self.deleted or path != f"/webhookb2/{self.connector}":
            return 404, "Not Found", {}
        failure = self._failure()
        if failure:
            return failure
        if size > MAX_MESSAGE:
            return 413, "Payload too large", {}
        if not isinstance(body, dict):
            return 400, "Bad payload received by generic incoming webhook.", {}
        if body.get("type") == "message" and body.get("attachments"):
            for attachment in body["attachments"]:
                self._show("adaptive", attachment.get("content") or {})
            return 200, "1", {}
        if not body.get("summary") and not body.get("text"):
            return 400, "Summary or Text is required.", {}
        self._show("messagecard", body)
        return 200, "1", {}

    def _show(self, kind: str, card: dict[str, Any]) -> None:
        with self._changed:
            self.shown.append(Shown(kind, card))
            self._changed.notify_all()


def _error(code: str, message: str) -> str:
    return json.dumps({"error": {"code": code, "message": message}})

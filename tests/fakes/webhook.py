"""A fake JSON webhook on 127.0.0.1: the throwaway integration's (tests/throwaway/jsonpost)
and, given signing keys, a Standard Webhooks receiver (integrations/webhook).

Its URL carries a secret in its path and query, as real webhook URLs do. It
answers 204 to every POST to that URL (404 to any other), records each JSON
body it took, and can be told to answer the next POST otherwise
(`fail_next(503, retry_after=2, body=...)`) or to hang (`hold_next()`).
With `keys`, it verifies every POST the way a receiver does, with the
`standardwebhooks` verifier (any of the keys: a rotation), and answers 401 to
one that does not verify (a tampered body, a wrong key, a stale timestamp),
before any told answer. Every POST is kept (`posts`: headers, raw body, the
status answered, when it arrived).
"""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

from standardwebhooks import Webhook
from standardwebhooks.webhooks import WebhookVerificationError


@dataclass(frozen=True)
class Post:
    """One POST as it arrived, and what the fake answered."""

    headers: dict[str, str]  # names lowercased
    raw: bytes
    status: int
    at: float  # time.time() on arrival


@dataclass
class _Answer:
    status: int
    body: str = ""
    headers: dict[str, str] = field(default_factory=dict)
    hold: threading.Event | None = None


class FakeWebhook:
    """`with FakeWebhook() as hook:`; `hook.bodies` holds what it took, in order."""

    def __init__(self, keys: Sequence[str] = ()) -> None:
        self.token = secrets.token_urlsafe(24)
        self.sig = secrets.token_urlsafe(32)
        self.bodies: list[Any] = []
        self.sizes: list[int] = []
        self.posts: list[Post] = []
        self._verifiers = [Webhook(key) for key in keys]
        self._next: list[_Answer] = []
        self._lock = threading.Lock()
        fake = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, format: str, *args: Any) -> None:
                pass

            def do_POST(self) -> None:
                fake._handle(self)

        self._server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._server.daemon_threads = True
        self._thread = threading.Thread(
            target=self._server.serve_forever, args=(0.05,), name="fake-webhook", daemon=True
        )

    def __enter__(self) -> FakeWebhook:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        with self._lock:
            for answer in self._next:
                if answer.hold is not None:
                    answer.hold.set()
        self._server.shutdown()
        self._server.server_close()
        self._thread.join(5)

    @property
    def port(self) -> int:
        return int(self._server.server_address[1])

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}/hooks/{self.token}?sig={self.sig}"

    def fail_next(self, status: int, *, retry_after: float | None = None, body: str = "") -> None:
        """Answer the next POST with `status` (and Retry-After, when given) instead of 204."""
        headers = {"Retry-After": f"{retry_after:g}"} if retry_after is not None else {}
        with self._lock:
            self._next.append(_Answer(status, body, headers))

    def hold_next(self) -> threading.Event:
        """Answer the next POST (204) only once the returned event is set (30 s at most)."""
        release = threading.Event()
        with self._lock:
            self._next.append(_Answer(204, hold=release))
        return release

    def verifies(self, headers: dict[str, str], raw: bytes) -> bool:
        """Whether one of the keys verifies this delivery (no keys: every one does)."""
        if not self._verifiers:
            return True
        for verifier in self._verifiers:
            try:
                verifier.verify(raw, headers, json_parse=False)
            except (WebhookVerificationError, ValueError):
                continue
            return True
        return False

    def _handle(self, request: BaseHTTPRequestHandler) -> None:
        raw = request.rfile.read(int(request.headers.get("Content-Length") or 0))
        headers = {k.lower(): v for k, v in request.headers.items()}
        with self._lock:
            if request.path != f"/hooks/{self.token}?sig={self.sig}":
                answer = _Answer(404, "no such hook")
            elif not self.verifies(headers, raw):
                answer = _Answer(401, "signature does not verify")
            elif self._next:
                answer = self._next.pop(0)
            else:
                answer = _Answer(204)
            self.posts.append(Post(headers, raw, answer.status, time.time()))
            if 200 <= answer.status <= 299:
                self.bodies.append(json.loads(raw))
                self.sizes.append(len(raw))
        if answer.hold is not None:
            answer.hold.wait(30)
        data = answer.body.encode()
        try:
            request.send_response(answer.status)
            for name, value in {"Content-Length": str(len(data)), **answer.headers}.items():
                request.send_header(name, value)
            request.end_headers()
            request.wfile.write(data)
        except (BrokenPipeError, ConnectionResetError):  # the client gave up waiting
            request.close_connection = True

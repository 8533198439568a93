"""The Socket Mode half of the fake Slack: a websocket server on 127.0.0.1 (plain ws://).

Written from Slack's Socket Mode guide (docs.slack.dev/apis/events-api/using-socket-mode): the app
calls apps.connections.open with its app-level token, opens the returned URL, gets a ``hello``,
then receives envelopes ``{"envelope_id", "payload", "type", "accepts_response_payload"}`` and
acknowledges each with ``{"envelope_id": ...[, "payload": ...]}``. Slack sends ``{"type":
"disconnect", "reason": ...}`` before it closes a connection ("warning", "refresh_requested",
"link_disabled"); the app is expected to open a new one.
"""

from __future__ import annotations

import contextlib
import json
import socket
import threading
import time
import uuid
from dataclasses import dataclass
from http import HTTPStatus
from typing import Any
from urllib.parse import parse_qs, urlsplit

from websockets.exceptions import ConnectionClosed
from websockets.http11 import Request, Response
from websockets.sync.server import Server, ServerConnection, serve


@dataclass
class ReceivedFrame:
    """A text frame the app sent us: ``data`` is the decoded JSON, or the raw text."""

    connection: int
    at: float
    data: Any


@dataclass
class SentEnvelope:
    envelope: dict[str, Any]
    connection: int
    at: float


class FakeSocketMode:
    def __init__(self, *, app_id: str, ping_interval: float | None) -> None:
        self.app_id = app_id
        self._cond = threading.Condition()
        self._open: dict[int, ServerConnection] = {}
        self._next_id = 0
        self._tickets: set[str] = set()
        self._handler_threads: list[threading.Thread] = []
        self._timers: list[threading.Timer] = []
        self.frames: list[ReceivedFrame] = []
        self.acks: dict[str, tuple[dict[str, Any], float]] = {}
        self.envelopes: dict[str, SentEnvelope] = {}
        self.connections_opened = 0
        self.rejected_handshakes = 0
        self._stopped = False
        self._server: Server = serve(
            self._handle,
            "127.0.0.1",
            0,
            process_request=self._check_ticket,
            compression=None,
            ping_interval=ping_interval,
            ping_timeout=10,
            close_timeout=0.5,
        )
        self.port: int = self._server.socket.getsockname()[1]
        self._thread = threading.Thread(target=self._server.serve_forever, name="fake-slack-ws")
        self._thread.start()

    # ---------------------------------------------------------------- server side

    def issue_url(self) -> str:
        ticket = uuid.uuid4().hex
        with self._cond:
            self._tickets.add(ticket)
        return f"ws://127.0.0.1:{self.port}/link/?ticket={ticket}&app_id={self.app_id}"

    def _check_ticket(self, connection: ServerConnection, request: Request) -> Response | None:
        parts = urlsplit(request.path)
        ticket = parse_qs(parts.query).get("ticket", [""])[0]
        with self._cond:
            if parts.path.rstrip("/") == "/link" and ticket in self._tickets and not self._stopped:
                return None
            self.rejected_handshakes += 1
        return connection.respond(HTTPStatus.UNAUTHORIZED, "invalid ticket\n")

    def _handle(self, connection: ServerConnection) -> None:
        with self._cond:
            self._handler_threads.append(threading.current_thread())
            self._next_id += 1
            conn_id = self._next_id
            self._open[conn_id] = connection
            self.connections_opened += 1
            hello = {
                "type": "hello",
                "num_connections": len(self._open),
                "debug_info": {
                    "host": f"applink-fake-{conn_id}",
                    "build_number": 1,
                    "approximate_connection_time": 18060,
                },
                "connection_info": {"app_id": self.app_id},
            }
            self._cond.notify_all()
        try:
            connection.send(json.dumps(hello))
            for message in connection:
                text = message if isinstance(message, str) else message.decode("utf-8", "replace")
                try:
                    data: Any = json.loads(text)
                except ValueError:
                    data = text
                with self._cond:
                    at = time.time()
                    self.frames.append(ReceivedFrame(conn_id, at, data))
                    if isinstance(data, dict) and isinstance(data.get("envelope_id"), str):
                        self.acks.setdefault(data["envelope_id"], (data, at))
                    self._cond.notify_all()
        except ConnectionClosed:
            pass  # the builtin client drops the TCP connection without a close frame
        finally:
            with self._cond:
                self._open.pop(conn_id, None)
                self._cond.notify_all()

    # ---------------------------------------------------------------- test controls

    @property
    def open_connections(self) -> int:
        with self._cond:
            return len(self._open)

    def received(self) -> list[ReceivedFrame]:
        with self._cond:
            return list(self.frames)

    def wait_connected(self, timeout: float, count: int = 1) -> bool:
        with self._cond:
            return self._cond.wait_for(lambda: len(self._open) >= count, timeout)

    def wait_opened(self, total: int, timeout: float) -> bool:
        with self._cond:
            return self._cond.wait_for(
                lambda: self.connections_opened >= total and len(self._open) > 0, timeout
            )

    def send_envelope(self, envelope: dict[str, Any], wait: float) -> None:
        with self._cond:
            self._cond.wait_for(lambda: bool(self._open), wait)
            if not self._open:
                raise RuntimeError("no Socket Mode connection is open: nothing would receive this")
            conn_id = max(self._open)  # the newest connection, as after a reconnect
            connection = self._open[conn_id]
            self.envelopes[envelope["envelope_id"]] = SentEnvelope(envelope, conn_id, time.time())
        try:
            connection.send(json.dumps(envelope))
        except ConnectionClosed as e:
            raise RuntimeError(f"the Socket Mode connection closed while sending: {e}") from e

    def wait_ack(self, envelope_id: str, timeout: float) -> dict[str, Any] | None:
        with self._cond:
            self._cond.wait_for(lambda: envelope_id in self.acks, timeout)
            found = self.acks.get(envelope_id)
        return found[0] if found else None

    def ack_latency(self, envelope_id: str) -> float | None:
        with self._cond:
            sent, ack = self.envelopes.get(envelope_id), self.acks.get(envelope_id)
        return ack[1] - sent.at if sent and ack else None

    def disconnect_all(self, reason: str, close_after: float | None) -> int:
        with self._cond:
            targets = list(self._open.values())
        frame = json.dumps(
            {"type": "disconnect", "reason": reason, "debug_info": {"host": "applink-fake"}}
        )
        for connection in targets:
            with contextlib.suppress(ConnectionClosed):
                connection.send(frame)
        if close_after is not None:
            timer = threading.Timer(close_after, self._close, args=(targets, 1001, reason))
            timer.start()
            with self._cond:
                self._timers.append(timer)
        return len(targets)

    def close_all(self, code: int = 1001, reason: str = "") -> int:
        with self._cond:
            targets = list(self._open.values())
        self._close(targets, code, reason)
        return len(targets)

    def drop_all(self) -> int:
        """Cut every connection at the TCP level, with no close frame (a network failure)."""
        with self._cond:
            targets = list(self._open.values())
        for connection in targets:
            with contextlib.suppress(OSError):
                connection.socket.shutdown(socket.SHUT_RDWR)
        return len(targets)

    @staticmethod
    def _close(targets: list[ServerConnection], code: int, reason: str) -> None:
        for connection in targets:
            with contextlib.suppress(Exception):  # already gone is fine
                connection.close(code, reason)

    def stop(self) -> None:
        with self._cond:
            if self._stopped:
                return
            self._stopped = True
            timers = list(self._timers)
        for timer in timers:
            timer.cancel()
            timer.join(2)
        self._server.shutdown()
        self._thread.join(5)
        self.close_all(1001, "server stopping")
        with self._cond:
            threads = list(self._handler_threads)
        for thread in threads:
            thread.join(5)
        self._server.socket.close()

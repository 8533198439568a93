"""The HTTP side of IMDS: its endpoints, faults and rate limit, and the control API's transport.

HTTP/1.1 with keep-alive; every response carries a Content-Length (errors
too), and every request body is read in full first so a kept-alive
connection never falls out of step.
"""

from __future__ import annotations

import socket
import struct
import threading
from http.server import BaseHTTPRequestHandler
from typing import Any, Protocol, cast
from urllib.parse import parse_qs, urlsplit

from sebridge.imds.simulator.compute import (
    INSTANCE_API_VERSIONS,
    NEWEST_INSTANCE_VERSIONS,
    compute_document,
)
from sebridge.imds.simulator.control import PREFIX, handle_control
from sebridge.imds.simulator.document import (
    API_VERSIONS,
    NEWEST,
    NEWEST_VERSIONS,
    StartRequestError,
    encode,
    parse_start_requests,
    posted_ids,
)
from sebridge.imds.simulator.faults import PROXY_LOGIN_PAGE, Fault, FaultQueue, RateLimiter
from sebridge.imds.simulator.records import PostRecord, RequestRecord
from sebridge.imds.simulator.state import SimulatorState

__all__ = ["ImdsHandler", "ImdsServer"]

EVENTS_PATH = "/metadata/scheduledevents"
JSON_TYPE = "application/json; charset=utf-8"
MAX_BODY = 1 << 20
NO_HEADER = "Bad request. Required metadata header not specified"
BAD_VERSION = (
    "Bad request. api-version is invalid or was not specified in the request. "
    "For more information refer to aka.ms/azureimds"
)


class ImdsServer(Protocol):
    """What ImdsHandler needs of the server it answers for (server.SimulatorHTTPServer)."""

    state: SimulatorState
    faults: FaultQueue
    rate_limiter: RateLimiter | None
    stopping: threading.Event  # set on stop(): requests held by a fault give up

    def track(self, connection: socket.socket, is_open: bool) -> None:
        """Remember (is_open) or forget an open client connection."""


class ImdsHandler(BaseHTTPRequestHandler):
    """One connection's requests: `/metadata/...` like IMDS, `/simulator/...` for control."""

    protocol_version = "HTTP/1.1"
    server_version = "sebridge-simulator"
    _status = 0  # answered status, 0 while none (or none at all: hang, reset)
    _error: str | None = None  # answered error message, for the record of POSTs
    _recorded = False
    _muted = False  # "hang_after": the request is carried out, its answer never written
    _received = 0.0
    _path = "/"
    _body: bytes | None = None

    @property
    def imds(self) -> ImdsServer:
        """The server (socketserver types it as any BaseServer)."""
        return cast(ImdsServer, self.server)

    def setup(self) -> None:
        """Track the connection so stop() can close it; send small answers without delay."""
        super().setup()
        # Headers and body go out in two writes; without this, Nagle's algorithm
        # and the client's delayed ACK stall every kept-alive response by ~40 ms.
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.imds.track(self.connection, True)

    def finish(self) -> None:
        """Forget the connection."""
        try:
            super().finish()
        finally:
            self.imds.track(self.connection, False)

    def log_message(self, format: str, *args: Any) -> None:
        """Silence the per-request stderr lines; the simulator keeps its own records."""

    def do_GET(self) -> None:
        """Handle GET."""
        self._dispatch()

    do_POST = do_PUT = do_DELETE = do_PATCH = do_GET

    # -- plumbing -------------------------------------------------------------

    def _dispatch(self) -> None:
        self._received = self.imds.state.clock()
        self._status, self._error, self._recorded, self._muted = 0, None, False, False
        self._path = urlsplit(self.path).path.rstrip("/") or "/"
        self._body = self._read_body()
        try:
            if self._body is None:
                return
            path, body = self._path, self._body
            if path == "/metadata" or path.startswith("/metadata/"):
                self._metadata(path, body)
            elif path == PREFIX.rstrip("/") or path.startswith(PREFIX):
                state, faults = self.imds.state, self.imds.faults
                self._send_json(*handle_control(self.command, path, body, state, faults))
            else:
                self._send_json(404, {"error": f"Not found: {path}"})
        finally:
            self._record()  # requests answered with nothing (hang, reset)

    def _record(self) -> None:
        """Record the request once, before its answer is written, so a client that
        has read the answer always finds the request in the records."""
        if self._recorded:
            return
        self._recorded = True
        records = self.imds.state.records
        client = (str(self.client_address[0]), int(self.client_address[1]))
        records.add_request(
            RequestRecord(self._received, self.command, self._path, client, self._status)
        )
        if self.command == "POST" and self._path == EVENTS_PATH:
            body = self._body or b""
            text = body.decode("utf-8", errors="replace")
            post = PostRecord(
                self._received, tuple(posted_ids(body)), self._status, text, self._error
            )
            records.add_post(post)

    def _read_body(self) -> bytes | None:
        if "chunked" in self.headers.get("Transfer-Encoding", "").lower():
            self._refuse(411, "Length Required: send the body with a Content-Length")
            return None
        try:
            length = int(self.headers.get("Content-Length", "0"))
        except ValueError:
            self._refuse(400, "Bad request. Invalid Content-Length")
            return None
        if not 0 <= length <= MAX_BODY:
            self._refuse(413, "Request body too large")
            return None
        return self.rfile.read(length) if length else b""

    def _refuse(self, status: int, message: str) -> None:
        # The unread body would be taken for the next request: close instead.
        self.close_connection = True
        self._send_json(status, {"error": message}, {"Connection": "close"})

    def _send(
        self, status: int, body: bytes, content_type: str, headers: dict[str, str] | None = None
    ) -> None:
        self._status = status
        self._record()
        if self._muted:
            return
        self.send_response(status)
        if body:
            self.send_header("Content-Type", content_type)
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        if status != 204:  # a 204 must not carry Content-Length (RFC 9110)
            self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def _send_json(self, status: int, value: Any, headers: dict[str, str] | None = None) -> None:
        if isinstance(value, dict) and isinstance(value.get("error"), str):
            self._error = value["error"]
        body = b"" if status in (204, 304) else encode(value)
        self._send(status, body, JSON_TYPE, headers)

    # -- IMDS -------------------------------------------------------------------

    def _metadata(self, path: str, body: bytes) -> None:
        state = self.imds.state
        limiter = self.imds.rate_limiter
        if limiter is not None and not limiter.allow(state.clock()):
            state.note(f"rate limit: 429 to {self.command} {path}")
            self._send_json(429, {"error": "Too many requests"}, {"Retry-After": "1"})
            return
        fault = self.imds.faults.take(self.command, path)
        if fault is not None:
            state.note(f"fault {fault.describe()} served to {self.command} {path}")
            if self._serve_fault(fault):
                return
        self._imds(path, body)

    def _serve_fault(self, fault: Fault) -> bool:
        """Answer (or don't) as the fault says; False means carry on normally."""
        if fault.kind == "500":
            self._send_json(500, {"error": "Internal server error"})
        elif fault.kind == "429":
            self._send_json(429, {"error": "Too many requests"}, {"Retry-After": "1"})
        elif fault.kind == "status":
            self._send_json(fault.status, {"error": f"Simulated HTTP {fault.status}"})
        elif fault.kind == "malformed":
            full = encode(self.imds.state.document(NEWEST))
            self._send(200, full[: len(full) // 2], JSON_TYPE)
        elif fault.kind == "oversized":
            full = encode(self.imds.state.document(NEWEST))
            padded = full + b" " * max(0, fault.size - len(full))  # whitespace: still JSON
            try:
                self._send(200, padded, JSON_TYPE)
            except OSError:  # the client stopped reading, as it should
                self.close_connection = True
        elif fault.kind == "html":
            self._send(200, PROXY_LOGIN_PAGE.encode(), "text/html; charset=utf-8")
        elif fault.kind == "reset":
            # Linger 0 makes close() send RST instead of FIN: an abrupt reset.
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            self.close_connection = True
            self.connection.close()
        elif fault.kind == "hang_after":  # done, and the answer lost on its way back
            self._muted = True
            self._imds(self._path, self._body or b"")
            self.imds.stopping.wait(fault.seconds)
            self.close_connection = True
        else:  # "hang" and "slow_first" hold the request; stop() cuts the wait short
            stopped = self.imds.stopping.wait(fault.seconds)
            if fault.kind == "slow_first" and not stopped:
                return False
            self.close_connection = True
        return True

    def _imds(self, path: str, body: bytes) -> None:
        if self.headers.get("Metadata", "").strip().lower() != "true":
            self._send_json(400, {"error": NO_HEADER})
            return
        query = parse_qs(urlsplit(self.path).query)
        version = (query.get("api-version") or [""])[0]
        if path == EVENTS_PATH and self.command in ("GET", "POST"):
            if version not in API_VERSIONS:
                self._bad_version(NEWEST_VERSIONS)
            elif self.command == "GET":
                self._send(200, encode(self.imds.state.document(version)), JSON_TYPE)
            else:
                self._start_requests(body, version)
        elif path in ("/metadata/instance", "/metadata/instance/compute") and self.command == "GET":
            if version not in INSTANCE_API_VERSIONS:
                self._bad_version(NEWEST_INSTANCE_VERSIONS)
                return
            state = self.imds.state
            compute = compute_document(state.vm_name, state.tags, version)
            document = compute if path.endswith("/compute") else {"compute": compute}
            self._send_json(200, document)
        else:
            self._send_json(404, {"error": f"Not found: {path}"})

    def _bad_version(self, newest: tuple[str, ...]) -> None:
        self._send_json(400, {"error": BAD_VERSION, "newest-versions": list(newest)})

    def _start_requests(self, body: bytes, version: str) -> None:
        try:
            ids = parse_start_requests(body)
        except StartRequestError as exc:
            self._send_json(400, {"error": str(exc)})
            return
        error = self.imds.state.approve(ids, version)
        if error is not None:
            self._send_json(400, {"error": error})
        else:
            self._send(200, b"", JSON_TYPE)

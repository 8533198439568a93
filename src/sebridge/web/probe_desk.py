"""Probes that arrive at the door complete, answered on a thread of their own.

The door (web/door.py) peeks at what each new connection has sent. When that is a
whole probe request (`GET` or `HEAD` of /healthz or /readyz, HTTP/1.0 or 1.1, no body,
nothing after it), the connection is handed here: the probe's finding is asked
(engine/probe.py: at once when fresh, else at most its wait), the answer written with
the same headers the server's own route gives it, and the connection closed. Anything
else (a query string, a body, a second request behind the first, a head not yet
complete when it was accepted, a head over PEEK bytes) is not a probe for the door:
waitress reads it, and its probe is queued first there (web/probes_first.py).

A thread of its own, not the door's: a check that hangs (a frozen database) makes its
asker wait up to 2 s, and the door must keep letting the others in meanwhile.
See docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

import logging
import queue
import re
import socket
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from waitress.utilities import build_http_date

from sebridge.web.answers import json_answer
from sebridge.web.probes_first import PROBE_PATHS

__all__ = ["PEEK", "ProbeDesk", "ProbeRequest", "probe_request"]

log = logging.getLogger(__name__)

PEEK = 4096  # bytes of a new connection the door looks at; a probe's head is ~100
Health = Callable[[], tuple[int, dict[str, Any]]]

_REQUEST_LINE = re.compile(
    rb"(GET|HEAD) (%b) HTTP/(1\.[01])"
    % b"|".join(re.escape(path.encode()) for path in sorted(PROBE_PATHS))
)
# Headers that announce a body or an exchange before it: such a request is waitress's.
_NOT_A_PROBE = frozenset((b"content-length", b"transfer-encoding", b"expect"))


@dataclass(frozen=True)
class ProbeRequest:
    """A whole probe request, as the client sent it."""

    method: str
    path: str
    version: str  # "1.0" or "1.1": the answer's
    length: int  # bytes, up to and including the blank line


def probe_request(head: bytes) -> ProbeRequest | None:
    """The probe request `head` (what a new connection sent so far) holds, exactly and
    nothing more; None for anything else."""
    end = head.find(b"\r\n\r\n")
    if end < 0 or end + 4 != len(head):
        return None  # not complete yet, or more behind it
    line, *fields = head[:end].split(b"\r\n")
    matched = _REQUEST_LINE.fullmatch(line)
    if matched is None:
        return None
    for field in fields:
        name, colon, _ = field.partition(b":")
        if not colon or not name or name != name.strip() or name.lower() in _NOT_A_PROBE:
            return None  # malformed (waitress says 400), or a body to come
    method, path, version = (part.decode("ascii") for part in matched.groups())
    return ProbeRequest(method, path, version, len(head))


class ProbeDesk:
    """Answers the probe connections handed to it, in turn, on the `http-probes` thread.

    Args:
        probes: path -> the probe's (status, JSON body), as the server's route has it.
    """

    def __init__(self, probes: Mapping[str, Health]) -> None:
        self._probes = dict(probes)
        self._waiting: queue.SimpleQueue[tuple[socket.socket, ProbeRequest] | None] = (
            queue.SimpleQueue()
        )
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        self._thread = threading.Thread(target=self._run, name="http-probes", daemon=True)
        self._thread.start()

    def stop(self) -> None:
        """Answer the probes already handed over, then end (up to 5 s: a hanging check)."""
        thread = self._thread
        if thread is None:
            return
        self._waiting.put(None)
        thread.join(5)
        self._thread = None

    def take(self, connection: socket.socket, request: ProbeRequest) -> None:
        """Answer `request` on `connection` (then closed) as soon as the desk can."""
        self._waiting.put((connection, request))

    def _run(self) -> None:
        while (item := self._waiting.get()) is not None:
            self._answer(*item)
        while True:  # stopped: nothing handed over after stop() is left open
            try:
                left = self._waiting.get_nowait()
            except queue.Empty:
                return
            if left is not None:
                left[0].close()

    def _answer(self, connection: socket.socket, request: ProbeRequest) -> None:
        try:
            status, body = self._probes[request.path]()
        except Exception:  # a probe's bug: one 500 for the prober, the traceback for us
            log.exception("%s %s failed", request.method, request.path)
            status, body = 500, {"error": "internal error"}
        line, headers, data = json_answer(status, body)
        head = "".join(
            [
                f"HTTP/{request.version} {line}\r\n",
                *(f"{name}: {value}\r\n" for name, value in headers),
                "Connection: close\r\n",
                f"Date: {build_http_date(time.time())}\r\n",
                "Server: sebridge\r\n\r\n",
            ]
        ).encode("latin-1")
        try:  # nothing here waits for a prober (MSG_DONTWAIT)
            # The request's bytes are read first: a socket closed with unread data
            # resets the connection, and the prober could lose the answer to it.
            connection.recv(request.length, socket.MSG_DONTWAIT)
            connection.send(head if request.method == "HEAD" else head + data, socket.MSG_DONTWAIT)
        except OSError:
            pass  # the prober has gone: nothing to answer
        finally:
            connection.close()

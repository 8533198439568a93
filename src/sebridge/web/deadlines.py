"""Request deadlines for waitress: each request's headers and body must arrive in time.

Waitress closes a connection only after `channel_timeout` seconds without a
byte, so a client that sends one header line every few seconds (or a body a
few bytes at a time) keeps its connection forever, and a few hundred of them
fill `connection_limit`: waitress then stops accepting, and /healthz,
/approve and /slack/events go unanswered (docs/ARCHITECTURE.md, "Threads").

Here every connection has two deadlines, counted from when it began waiting
for a request (accepted, or its last answer written), whatever it sends:
its headers within `header_timeout`, then its body within `body_timeout`.
The server's maintenance pass (waitress's, once a second, on its loop) closes a
connection past either. At the connection limit waitress stops accepting; the
same pass then closes the connections that have waited longest for a complete
request, so waitress accepts again within a second and a flood of silent or
trickling connections (reconnecting as fast as they are closed) cannot hold out
a client that sends its request at once for long. Overridden: the channel's
received() and service(), the server's maintenance(); waitress's accepting, its
loop and its task queue are as shipped.
"""

from __future__ import annotations

import logging
import resource
import time
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer

from sebridge.kernel.wsgi import WsgiApp

__all__ = ["DeadlineServer", "deadline_server", "room_for"]

log = logging.getLogger(__name__)

ROOM = 64  # connections closed at most per maintenance pass at the limit
SPARE_FILES = 256  # descriptors kept for everything but HTTP connections (store, sinks, logs)


class DeadlineChannel(HTTPChannel):  # type: ignore[misc]  # waitress has no types
    """A connection that knows since when it waits for its request, and for its body."""

    header_timeout = 10.0
    body_timeout = 30.0

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.waiting_since = time.monotonic()
        self._body_of: object = None  # the request whose body is awaited
        self._body_since = 0.0

    def received(self, data: bytes) -> bool:
        """Waitress's parsing; then note when the current request's headers were complete."""
        result = bool(super().received(data))
        request = self.request
        if request is not None and request.headers_finished and self._body_of is not request:
            self._body_of, self._body_since = request, time.monotonic()
        if self.requests:  # a request is complete: the app's time from here, not the client's
            self.waiting_since = time.monotonic()
        return result

    def service(self) -> None:
        """Answer (on a worker thread); the next request's deadlines start when it is done."""
        try:
            super().service()
        finally:
            self.waiting_since = time.monotonic()

    def overdue(self, now: float) -> bool:
        """Whether the client has had its time for the request it is sending."""
        if self.requests or self.total_outbufs_len or self.will_close:
            return False  # being answered: the app's time, or a slow reader (channel_timeout)
        request = self.request
        if request is not None and request.headers_finished and request is self._body_of:
            return now - self._body_since > self.body_timeout
        return now - self.waiting_since > self.header_timeout


class DeadlineServer(TcpWSGIServer):  # type: ignore[misc]  # waitress has no types
    """Waitress's TCP server whose maintenance pass (waitress's own, once a
    `cleanup_interval`) also closes connections past their deadlines and, at the
    connection limit, those that have waited longest for their request."""

    channel_class = DeadlineChannel
    _full_said = False  # the limit was reached and the log said so (once per process)

    def maintenance(self, now: float) -> None:
        """Waitress's idle check, then each connection's header and body deadlines, then
        room at the connection limit (waitress accepts again once under it)."""
        super().maintenance(now)
        mono = time.monotonic()
        for channel in list(self.active_channels.values()):
            if isinstance(channel, DeadlineChannel) and channel.overdue(mono):
                channel.will_close = True  # closed by the loop this pass, waitress's own way
        if len(self._map) >= self.adj.connection_limit:  # waitress's test: it stopped accepting
            self._make_room()

    def _make_room(self) -> None:
        """Close the connections that have waited longest for a complete request (up to
        ROOM of them, on the loop's thread: the loop skips a descriptor no longer in its
        map), so the clients queued behind a full server are let in."""
        limit = self.adj.connection_limit
        if not self._full_said:
            log.warning(
                "%d HTTP connections open (the limit): closing those waiting longest for "
                "their request to make room",
                len(self.active_channels),
            )
            self._full_said = True
        waiting = sorted(
            (
                c
                for c in self.active_channels.values()
                if isinstance(c, DeadlineChannel) and not (c.requests or c.total_outbufs_len)
            ),
            key=lambda c: c.waiting_since,
        )
        for channel in waiting[: max(1, min(ROOM, limit // 4))]:
            channel.handle_close()


def room_for(connections: int) -> int:
    """How many connections fit in the process's descriptors, after raising its soft limit
    towards the hard one (systemd's default soft limit is 1,024, its hard 524,288)."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    wanted = connections + SPARE_FILES
    if soft != resource.RLIM_INFINITY and soft < wanted:
        raised = wanted if hard == resource.RLIM_INFINITY else min(wanted, hard)
        try:
            resource.setrlimit(resource.RLIMIT_NOFILE, (raised, hard))
            soft = raised
        except (ValueError, OSError):
            pass  # keep what we have, and fit in it
    if soft == resource.RLIM_INFINITY:
        return connections
    fits = max(1, min(connections, soft - SPARE_FILES))
    if fits < connections:
        log.warning(
            "room for %d HTTP connections only (open files limit %d); raise LimitNOFILE",
            fits,
            soft,
        )
    return fits


def deadline_server(
    app: WsgiApp, *, header_timeout: float, body_timeout: float, **adjustments: Any
) -> DeadlineServer:
    """A DeadlineServer on the first address `adjustments` (waitress's settings: host,
    port, threads, channel_timeout...) listen on, serving `app`."""
    adj = Adjustments(**adjustments)
    channel = type(
        "DeadlineChannel",
        (DeadlineChannel,),
        {"header_timeout": header_timeout, "body_timeout": body_timeout},
    )
    server_class = type("DeadlineServer", (DeadlineServer,), {"channel_class": channel})
    server: DeadlineServer = server_class(app, map={}, adj=adj, sockinfo=adj.listen[0])
    return server

"""Request deadlines for waitress: each request's headers and body must arrive in time.

Waitress closes a connection only after `channel_timeout` seconds without a
byte, so a client that sends one header line every few seconds (or a body a
few bytes at a time) keeps its connection forever, and a few hundred of them
fill `connection_limit`: waitress then stops accepting, and /healthz,
/approve and /slack/events go unanswered (docs/ARCHITECTURE.md, "Threads").

Here every connection has two deadlines, counted from when it began waiting
for a request (accepted, or its last answer written), whatever it sends:
its headers within `header_timeout`, then its body within `body_timeout`.
The server's maintenance pass (once a second, on waitress's loop) closes a
connection past either. And at the connection limit the server does not stop
accepting: each connection accepted over it closes the one that has waited
longest for a complete request, and the listen backlog is drained in
batches, so a flood of silent or trickling connections (reconnecting as fast
as they are closed) cannot hold out a client that sends its request at once.
"""

from __future__ import annotations

import logging
import resource
import socket
import time
from collections.abc import Callable
from typing import Any

from waitress.adjustments import Adjustments
from waitress.channel import HTTPChannel
from waitress.server import TcpWSGIServer

from sebridge.kernel.wsgi import WsgiApp
from sebridge.web.probes_first import ProbesFirst

__all__ = ["DeadlineServer", "deadline_server", "room_for"]

log = logging.getLogger(__name__)

ACCEPT_BATCH = 64
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
    """Waitress's TCP server, closing connections past their deadlines and, at the
    connection limit, the one that has waited longest for its request."""

    channel_class = DeadlineChannel
    _full_said = False  # the limit was reached and the log said so (once per process)
    _next_cleanup = 0.0

    # Whether another thread accepts the connections (web/door.py) while it runs.
    accepted_elsewhere: Callable[[], bool] = staticmethod(lambda: False)

    def readable(self) -> bool:
        """Waitress's own, except that the connection limit does not stop accepting: each
        connection accepted over it closes the one waiting longest (adopt). While the
        door accepts, the loop does not."""
        now = time.time()
        if now >= self._next_cleanup:
            self._next_cleanup = now + self.adj.cleanup_interval
            self.maintenance(now)
        return bool(self.accepting) and not self.accepted_elsewhere() and not self.crowded()

    def crowded(self) -> bool:
        """At the hard cap, for when every connection is being answered and none can make
        room: the next connections wait in the kernel's queue."""
        return bool(len(self._map) >= 2 * self.adj.connection_limit)

    def handle_accept(self) -> None:
        """Accept what waits in the listen backlog (up to ACCEPT_BATCH at a time: a client
        queued behind a crowd waits for the crowd), making room for each over the limit."""
        for _ in range(ACCEPT_BATCH):
            try:
                accepted = self.accept()
            except OSError:
                return  # as waitress: a connection gone before it was accepted
            if accepted is None:
                return  # nothing more waits
            self.adopt([accepted])

    def adopt(self, accepted: list[tuple[socket.socket, Any]]) -> None:
        """Serve each accepted (connection, address) (on the loop's thread), making room
        for each over the connection limit."""
        for connection, address in accepted:
            try:
                self.set_socket_options(connection)
            except OSError:  # the client has gone already
                connection.close()
                continue
            self.channel_class(self, connection, self.fix_addr(address), self.adj, map=self._map)
            if len(self.active_channels) > self.adj.connection_limit:
                self._make_room()

    def maintenance(self, now: float) -> None:
        """Waitress's idle check, then each connection's header and body deadlines."""
        super().maintenance(now)
        mono = time.monotonic()
        for channel in list(self.active_channels.values()):
            if isinstance(channel, DeadlineChannel) and channel.overdue(mono):
                channel.will_close = True  # closed by the loop this pass, waitress's own way

    def _make_room(self) -> None:
        """Close the connection that has waited longest for a complete request, at once (on
        the loop's thread: the loop skips a descriptor no longer in its map)."""
        waiting = [
            c
            for c in self.active_channels.values()
            if isinstance(c, DeadlineChannel) and not (c.requests or c.total_outbufs_len)
        ]
        if not self._full_said:
            log.warning(
                "%d HTTP connections open (the limit): closing those waiting longest for "
                "their request to make room",
                len(self.active_channels),
            )
            self._full_said = True
        if waiting:
            min(waiting, key=lambda c: c.waiting_since).handle_close()


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
    dispatcher = ProbesFirst()  # /healthz and /readyz never wait behind a crowd
    dispatcher.set_thread_count(adj.threads)
    try:
        server: DeadlineServer = server_class(
            app, map={}, adj=adj, sockinfo=adj.listen[0], dispatcher=dispatcher
        )
    except BaseException:
        dispatcher.set_thread_count(0)  # its threads end; nothing to wait for
        raise
    return server

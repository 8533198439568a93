"""The HTTP server: binding, a serving loop that stops at once, and open connections.

Requests are answered by `handler.ImdsHandler`, one thread per connection
(HTTP/1.1 keep-alive), daemon threads so a stuck client never blocks exit.
"""

from __future__ import annotations

import contextlib
import selectors
import socket
import sys
import threading
from http.server import ThreadingHTTPServer
from typing import TYPE_CHECKING, Any

from sebridge.imds.simulator.faults import FaultQueue, RateLimiter
from sebridge.imds.simulator.handler import ImdsHandler, ImdsServer
from sebridge.imds.simulator.state import SimulatorState

__all__ = ["SimulatorHTTPServer"]


class SimulatorHTTPServer(ThreadingHTTPServer):
    """A threading HTTP server holding the simulator's state, faults and open connections."""

    daemon_threads = True

    def __init__(
        self,
        address: tuple[str, int],
        state: SimulatorState,
        faults: FaultQueue,
        rate_limiter: RateLimiter | None,
    ) -> None:
        """Bind to `address` (port 0 picks a free port)."""
        self.state = state
        self.faults = faults
        self.rate_limiter = rate_limiter
        # Set on stop(): wakes requests held by "hang" and "slow_first" faults.
        self.stopping = threading.Event()
        self._connections: set[socket.socket] = set()
        self._connections_lock = threading.Lock()
        # Written to by stop_serving() to wake the serving loop at once.
        self._wake_reader, self._wake_writer = socket.socketpair()
        if ":" in address[0]:
            self.address_family = socket.AF_INET6
        try:
            super().__init__(address, ImdsHandler)
        except OSError:
            self._wake_reader.close()
            self._wake_writer.close()
            raise

    def serve_until_stopped(self) -> None:
        """Serve until stop_serving(); unlike serve_forever(), it wakes at once, not by polling."""
        # Non-blocking, so handle_request() never waits for a client that gave up.
        self.socket.setblocking(False)
        with selectors.DefaultSelector() as selector:
            selector.register(self.socket, selectors.EVENT_READ)
            selector.register(self._wake_reader, selectors.EVENT_READ)
            while not self.stopping.is_set():
                ready = {key.fileobj for key, _ in selector.select()}
                if self.socket in ready and not self.stopping.is_set():
                    self.handle_request()

    def stop_serving(self) -> None:
        """Make serve_until_stopped() return and requests held by faults give up."""
        self.stopping.set()
        with contextlib.suppress(OSError):
            self._wake_writer.send(b"\0")

    def server_close(self) -> None:
        """Close the listening socket and the wake-up pair."""
        super().server_close()
        self._wake_reader.close()
        self._wake_writer.close()

    def track(self, connection: socket.socket, is_open: bool) -> None:
        """Remember or forget an open client connection."""
        with self._connections_lock:
            (self._connections.add if is_open else self._connections.discard)(connection)

    def close_connections(self) -> None:
        """Shut down every open connection, so idle keep-alive clients see the server go."""
        with self._connections_lock:
            connections = list(self._connections)
        for connection in connections:
            with contextlib.suppress(OSError):  # already closed by the client
                connection.shutdown(socket.SHUT_RDWR)

    def handle_error(self, request: Any, client_address: Any) -> None:
        """Stay quiet about clients that went away; report anything else."""
        if not isinstance(sys.exc_info()[1], ConnectionError | TimeoutError):
            super().handle_error(request, client_address)


if TYPE_CHECKING:  # mypy checks here that the server is all ImdsHandler needs
    _serves_imds: type[ImdsServer] = SimulatorHTTPServer

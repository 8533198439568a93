"""A deadline for a whole call: connect, send and every read together.

A socket timeout bounds each read, not the answer: a receiver that drips one
byte every 1.5 s keeps a 2 s timeout from ever firing, and held the webhook
sink 99 s (an SMTP banner so dripped, 84 s). So a call runs under a `Deadline`:
a timer that, when the call's time is up, shuts the call's socket down; the
read blocked on it returns at once, the library raises, and the sink says the
receiver did not answer within its timeout (`expired`). A timer thread per
call: deliveries are seconds apart, and the thread sleeps until it fires or
the call ends.

The deadline learns the call's sockets from the connections themselves: ours
(kernel/http_client.py) and the libraries' (integrations/library_deadlines.py)
`tell()` the thread's watching `Cutoff`s each time they connect or send; the
SMTP client hands its socket over (`sockets`). IMDS's client ends its calls at
stop with a `Cutoff` of its own (docs/ARCHITECTURE.md, "Threads").
"""

from __future__ import annotations

import contextlib
import socket
import threading
import weakref
from collections.abc import Callable, Iterator
from types import TracebackType

__all__ = ["Cutoff", "Deadline", "tell"]

_watching = threading.local()  # .cutoffs: the Cutoffs this thread's calls tell, innermost last


class Cutoff:
    """The connections told while it watched; `cut()` shuts each down now, and one told
    later as soon as it is told (a connection still connecting: when it sends)."""

    def __init__(self) -> None:
        self._told: weakref.WeakSet[object] = weakref.WeakSet()
        self._lock = threading.Lock()
        self._cut = False

    def tell(self, connection: object) -> None:
        """`connection`: a socket, or what keeps one in `sock` (read when it is shut)."""
        with self._lock:
            self._told.add(connection)
            if not self._cut:
                return
        _shut(connection)

    def cut(self) -> None:
        with self._lock:
            self._cut = True
            told = list(self._told)
        for connection in told:
            _shut(connection)

    @contextlib.contextmanager
    def watching(self) -> Iterator[None]:
        """What connects or sends on this thread within the block is told to this cutoff."""
        outer: tuple[Cutoff, ...] = getattr(_watching, "cutoffs", ())
        _watching.cutoffs = (*outer, self)
        try:
            yield
        finally:
            _watching.cutoffs = outer


def tell(connection: object) -> None:
    """A connection of this thread is about to connect or send: every cutoff watching the
    thread learns it."""
    for cutoff in getattr(_watching, "cutoffs", ()):
        cutoff.tell(connection)


def _shut(connection: object) -> None:
    """A read waiting on its socket, on any thread, sees the connection end; the thread that
    owns it closes it."""
    sock = getattr(connection, "sock", connection)  # a connection's socket, or a socket
    if isinstance(sock, socket.socket):
        with contextlib.suppress(OSError):  # not connected (yet, or any more)
            sock.shutdown(socket.SHUT_RDWR)


class Deadline:
    """`with Deadline(seconds):` shuts down, after `seconds`, what the block's connections
    told (`tell`) and what `sockets()` returns (a socket, or None before there is one);
    `expired` says whether it did."""

    def __init__(
        self, seconds: float, sockets: Callable[[], socket.socket | None] | None = None
    ) -> None:
        self.seconds = seconds
        self._sockets = sockets
        self._cutoff = Cutoff()
        self._watch = self._cutoff.watching()
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.name = "sink-deadline"
        self._timer.daemon = True
        self.expired = False

    def __enter__(self) -> Deadline:
        self._watch.__enter__()
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._timer.cancel()
        self._watch.__exit__(kind, exc, tb)

    def _expire(self) -> None:
        self.expired = True
        self._cutoff.cut()
        sock = self._sockets() if self._sockets is not None else None
        if sock is not None:
            _shut(sock)

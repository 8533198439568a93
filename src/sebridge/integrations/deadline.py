"""A deadline for a sink's whole call: connect, send and every read together.

A socket timeout bounds each read, not the answer: a receiver that drips one
byte every 1.5 s keeps a 2 s timeout from ever firing, and held the webhook
sink 99 s (an SMTP banner so dripped, 84 s). So a call runs under a `Deadline`:
a timer that, when the call's time is up, shuts the call's socket down; the
read blocked on it returns at once, the library raises, and the sink says the
receiver did not answer within its timeout (`expired`). A timer thread per
call: deliveries are seconds apart, and the thread sleeps until it fires or
the call ends.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Callable
from types import TracebackType

__all__ = ["Deadline"]


class Deadline:
    """`with Deadline(seconds, sockets):` shuts down what `sockets()` returns (the call's
    socket, or None before it has one) after `seconds`; `expired` says whether it did."""

    def __init__(self, seconds: float, sockets: Callable[[], socket.socket | None]) -> None:
        self.seconds = seconds
        self._sockets = sockets
        self._timer = threading.Timer(seconds, self._expire)
        self._timer.name = "sink-deadline"
        self._timer.daemon = True
        self.expired = False

    def __enter__(self) -> Deadline:
        self._timer.start()
        return self

    def __exit__(
        self,
        kind: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self._timer.cancel()

    def _expire(self) -> None:
        self.expired = True
        sock = self._sockets()
        if sock is not None:
            with contextlib.suppress(OSError):  # closed meanwhile: nothing left to wait on
                sock.shutdown(socket.SHUT_RDWR)

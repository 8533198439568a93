"""A lost PostgreSQL connection, opened again on a thread of its own.

A database host that drops packets makes each connection attempt wait
`connect_timeout` (10 s by default). The poll, the heartbeat and the
dispatcher share the work connection; none of them may wait with the attempt,
so they fail at once while it runs (store/postgres.py says so in the error)
and take the new connection when it is there.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from typing import Any

import psycopg

from sebridge.kernel.errors import StoreError

__all__ = ["RECONNECT_SECONDS", "Reconnect"]

# A lost work connection is tried again at most this often.
RECONNECT_SECONDS = 1.0


class Reconnect:
    """At most one connection attempt at a time, on a thread of its own, at most once a
    RECONNECT_SECONDS; what it opened waits to be taken, what went wrong is kept."""

    def __init__(self, open_: Callable[[], psycopg.Connection[Any]]) -> None:
        self.error: str | None = None
        self._open = open_
        self._fresh: psycopg.Connection[Any] | None = None
        self._thread: threading.Thread | None = None
        self._started = -RECONNECT_SECONDS

    def start(self) -> None:
        """Start an attempt, unless one runs or the last began under RECONNECT_SECONDS ago."""
        running = self._thread is not None and self._thread.is_alive()
        if running or time.monotonic() - self._started < RECONNECT_SECONDS:
            return
        self._started = time.monotonic()
        self._thread = threading.Thread(target=self._attempt, name="store-reconnect", daemon=True)
        self._thread.start()

    def take(self) -> psycopg.Connection[Any] | None:
        """The connection an attempt opened, once; else None."""
        fresh, self._fresh = self._fresh, None
        if fresh is not None:
            self.error = None
        return fresh

    def discard(self) -> None:
        """Close what an attempt opened and nobody took (the store is closing)."""
        fresh = self.take()
        if fresh is not None:
            fresh.close()

    def _attempt(self) -> None:
        try:
            self._fresh = self._open()
        except StoreError as exc:
            self.error = str(exc)

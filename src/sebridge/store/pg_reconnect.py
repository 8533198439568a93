"""A lost PostgreSQL connection, opened again on a thread of its own.

A database host that drops packets makes each connection attempt wait
`connect_timeout` (10 s by default). The poll, the heartbeat and the
dispatcher share the work connection; none of them may wait with the attempt,
so they fail at once while it runs (store/postgres.py says so in the error)
and take the new connection when it is there.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import psycopg

from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import StoreError
from sebridge.kernel.worker import Worker

__all__ = ["RECONNECT_SECONDS", "Reconnect"]

# A lost work connection is tried again at most this often.
RECONNECT_SECONDS = 1.0


class Reconnect:
    """At most one connection attempt at a time, on a thread of its own (`store-reconnect`,
    started at the first loss), at most once a RECONNECT_SECONDS; what it opened waits to
    be taken, what went wrong is kept."""

    def __init__(self, open_: Callable[[], psycopg.Connection[Any]], clock: Clock = utcnow) -> None:
        self.error: str | None = None
        self._open = open_
        self._clock = clock
        self._fresh: psycopg.Connection[Any] | None = None
        self._wanted = False
        self._last: datetime | None = None  # when the last attempt began
        self._worker = Worker("store-reconnect", self._round, clock=clock)

    def start(self) -> None:
        """Ask for a connection: an attempt begins now, or once the last one ended and
        began RECONNECT_SECONDS ago (asking again meanwhile changes nothing)."""
        self._wanted = True
        self._worker.start()
        self._worker.wake()

    def take(self) -> psycopg.Connection[Any] | None:
        """The connection an attempt opened, once; else None."""
        fresh, self._fresh = self._fresh, None
        if fresh is not None:
            self.error = None
        return fresh

    def discard(self) -> None:
        """Close what an attempt opened and nobody took (the store is closing); an attempt
        in flight closes what it opens."""
        self._worker.stop()
        fresh = self.take()
        if fresh is not None:
            fresh.close()

    def _round(self) -> datetime | None:
        """One attempt, if asked for and none waits to be taken; None: until asked again."""
        if not self._wanted or self._fresh is not None:
            self._wanted = False
            return None
        now = self._clock()
        if self._last is not None and now < self._last + timedelta(seconds=RECONNECT_SECONDS):
            return self._last + timedelta(seconds=RECONNECT_SECONDS)
        self._wanted = False
        self._last = now
        try:
            fresh = self._open()
        except StoreError as exc:  # an expected outcome: the store's user reads it
            self.error = str(exc)
            return None
        if self._worker.stopping:  # the store closed meanwhile: nobody will take it
            fresh.close()
        else:
            self._fresh = fresh
        return None

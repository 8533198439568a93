"""Every deadline of a PostgreSQL session: the server's, TCP's, and the client's own.

connect_options(): the server ends a statement after STATEMENT_TIMEOUT and a
wait for another agent's row lock after 5 s, and a session idle inside a
transaction (its agent frozen or cut off mid-transaction) after 30 s, so its
row locks do not hold the fleet up; TCP fails unacknowledged data after 10 s
and notices a vanished idle peer within about 15 s. JIT is off: compiling
took 0.5 s of a claim whose plan looked costly and ran in 1 ms.

StatementDeadline: the server's statement_timeout ends a statement that runs
too long, and tcp_user_timeout a connection whose packets go unacknowledged.
Neither helps
when the server (or something in between) stops answering while the
connection stays up: a stopped postgres process, a frozen proxy, a VM paused
mid-migration. Their kernels still acknowledge what we send, so the
statement waits for an answer forever, holding the store's lock, and every
thread that wants the store waits behind it (docs/ARCHITECTURE.md,
"Guarantees").

So one watchdog thread per connection shuts the socket down when a statement
has waited past its deadline (somewhat longer than statement_timeout: a
server that answers says so itself first). libpq then sees the connection
end, the statement fails, and the store reconnects in the background
(store/pg_reconnect.py) like after any lost connection.
"""

from __future__ import annotations

import contextlib
import os
import socket
import threading
import time
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

from psycopg.conninfo import conninfo_to_dict

from sebridge.kernel.worker import Worker

__all__ = [
    "DEADLINE_SECONDS",
    "MIGRATION_SECONDS",
    "STATEMENT_TIMEOUT",
    "StatementDeadline",
    "Watch",
    "connect_options",
]

STATEMENT_TIMEOUT = 10.0
# The client's own deadline: past it, the server is taken for frozen.
DEADLINE_SECONDS = STATEMENT_TIMEOUT + 2.0
# A migration's statements (agents starting at once wait for each other's).
MIGRATION_SECONDS = 120.0
# libpq's TCP settings; store.url may override each.
_DEAD_PEER = {
    "tcp_user_timeout": 10000,
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 5,
}
_SESSION = (
    f"-c statement_timeout={int(STATEMENT_TIMEOUT * 1000)} -c lock_timeout=5000 "
    "-c idle_in_transaction_session_timeout=30000 -c jit=off"
)


def connect_options(url: str) -> dict[str, Any]:
    """psycopg.connect()'s keyword arguments for `url`: autocommit, our deadlines, and
    whatever the URL sets itself (it wins, its `options` after ours)."""
    given = conninfo_to_dict(url)
    options: dict[str, Any] = {
        "autocommit": True,
        "connect_timeout": given.get("connect_timeout", 10),
        "application_name": given.get("application_name", "sebridge"),
    }
    for key, value in _DEAD_PEER.items():
        options[key] = given.get(key, value)
    options["options"] = f"{_SESSION} {given.get('options', '')}".strip()
    return options


class Watch:
    """One statement under watch; `cut` once its socket was shut down at the deadline."""

    __slots__ = ("cut", "deadline", "fd", "since")

    def __init__(self, deadline: float, fd: int) -> None:
        self.since = time.monotonic()
        self.deadline = deadline
        self.fd = fd
        self.cut = False


class StatementDeadline:
    """Shuts down the socket of a statement that outlives its deadline; one worker
    (`store-deadline`, kernel/worker.py) watches every statement of a store (the work
    connection's, a reconnect's), asleep until the earliest deadline.

    Args:
        seconds: how long a statement may wait for its answer.
    """

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._lock = threading.Lock()
        self._watches: set[Watch] = set()
        # Deadlines are monotonic: a wall clock set back must not make a statement wait on.
        self._worker = Worker("store-deadline", self._round, clock=_monotonic)

    @contextlib.contextmanager
    def bound(self, fd: int, seconds: float | None = None) -> Iterator[Watch]:
        """Watch the statement run inside this block on socket `fd`."""
        watch = Watch(time.monotonic() + (seconds or self.seconds), fd)
        with self._lock:
            self._watches.add(watch)
        self._worker.start()  # once, at the store's first statement
        self._worker.wake()
        try:
            yield watch
        finally:
            with self._lock:
                self._watches.discard(watch)

    def longest_wait(self) -> float:
        """Seconds the longest-waiting statement has waited for its answer (0: none waits)."""
        with self._lock:
            oldest = min((w.since for w in self._watches), default=None)
        return 0.0 if oldest is None else time.monotonic() - oldest

    def stop(self) -> None:
        """No more watching (the store closed): a statement after this is not bounded."""
        self._worker.stop()

    def _round(self) -> datetime | None:
        """Cut every statement past its deadline; due again at the earliest one left."""
        now = time.monotonic()
        with self._lock:
            late = [w for w in self._watches if w.deadline <= now]
            self._watches.difference_update(late)
            first = min((w.deadline for w in self._watches), default=None)
        for watch in late:
            watch.cut = True
            _shut_down(watch.fd)
        return None if first is None else _as_time(first)


def _monotonic() -> datetime:
    return _as_time(time.monotonic())


def _as_time(monotonic: float) -> datetime:
    """A monotonic reading as the worker's due time (its clock is _monotonic)."""
    return datetime.fromtimestamp(monotonic, UTC)


def _shut_down(fd: int) -> None:
    """End the connection under libpq's feet: its wait for the answer returns at once."""
    with contextlib.suppress(OSError):
        sock = socket.socket(fileno=os.dup(fd))
        with sock:
            sock.shutdown(socket.SHUT_RDWR)

"""Duties on PostgreSQL: session advisory locks on a connection of their own.

A duty of N slots is N lock keys; an agent holds at most one of them.
One thread per agent owns the duty connection:

- While it wants a duty, it sends one statement that tries every wanted
  key server-side twice a second and returns as soon as it holds one (or
  after WAIT_SECONDS): a dead holder's key is taken within about half a
  second, and a waiting agent costs one round trip per WAIT_SECONDS (the
  statement and the look at which locks it then holds go together). The
  statement holds a snapshot while it runs, so it is bounded: vacuum is
  never held back longer than WAIT_SECONDS.
- Once it holds every duty it wants, it sends nothing: TCP keepalives (ours
  and, through `options`, the server's) notice a dead peer; the server
  frees a dead agent's locks when its session ends.
- When the connection is lost every duty is let go at once (its locks went
  with the session), and taken again after reconnecting (after a back-off:
  kernel/worker.py). So is a callback's failure: the connection is closed,
  another agent may take the duty meanwhile.
"""

from __future__ import annotations

import contextlib
import logging
import select
from datetime import datetime
from typing import Any

import psycopg

from sebridge.kernel.worker import AT_ONCE, Worker
from sebridge.store.duties import LOCK_KEY, Duties, Duty
from sebridge.store.pg_deadline import BoundedConnection

__all__ = ["AdvisoryDuties"]

log = logging.getLogger(__name__)

WAIT_SECONDS = 120
# How long past a statement's own wait the server may take to answer (pg_deadline.py).
_ANSWER_SECONDS = 2.0
# A lost connection is opened again after this, doubling while it fails, up to the cap.
RECONNECT_SECONDS = 2.0
RECONNECT_CAP = 10.0
# Ours and the server's: a peer that vanished without closing is noticed in ~15 s.
_KEEPALIVE: dict[str, Any] = {
    "keepalives": 1,
    "keepalives_idle": 5,
    "keepalives_interval": 2,
    "keepalives_count": 5,
    "options": "-c tcp_keepalives_idle=5 -c tcp_keepalives_interval=2 -c tcp_keepalives_count=5",
}
_HELD_KEYS = (
    f"SELECT {LOCK_KEY} FROM pg_locks l "
    "WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.pid = pg_backend_pid() AND l.granted"
)


class AdvisoryDuties(Duties):
    """Duties held through advisory locks on the store's PostgreSQL database."""

    def __init__(self, url: str, location: str) -> None:
        super().__init__()
        self._url = url
        self._location = location
        self._conn: BoundedConnection | None = None
        self._failing = False
        self._worker = Worker(
            "duties",
            self._round,
            expected=(psycopg.Error,),
            logger=log,
            backoff_base=RECONNECT_SECONDS,
            backoff_cap=RECONNECT_CAP,
        )

    def start(self) -> None:
        """Start taking duties in the background."""
        if self.all():
            self._worker.start()

    def stop(self) -> None:
        """Stop waiting and close the connection: the server frees our locks."""
        self._worker.stop()
        conn = self._conn
        if conn is not None:  # ends a wait statement now, not within WAIT_SECONDS
            with contextlib.suppress(Exception):
                conn.cancel_safe(timeout=2)
        if self._worker.join(5):
            self._let_go()
        super().stop()

    def _round(self) -> datetime:
        """One step: connect if need be, then take wanted duties or watch the connection.
        Any failure lets every duty go (its connection closed) before the worker backs off."""
        try:
            if self._conn is None:
                self._conn = BoundedConnection.connect(
                    self._url, autocommit=True, connect_timeout=10, **_KEEPALIVE
                )
                self._conn.deadline = WAIT_SECONDS + _ANSWER_SECONDS
                if self._failing:
                    log.info("duties: the store %s answers again", self._location)
                    self._failing = False
            if not self._worker.stopping:
                self._hold(self._conn)
        except Exception as exc:
            self._let_go()
            if isinstance(exc, psycopg.Error) and not self._worker.stopping and not self._failing:
                log.warning(
                    "duties: lost the store %s (%s); duties let go until it answers",
                    self._location,
                    " ".join(str(exc).split()),
                )
                self._failing = True
            raise
        if self._worker.stopping:  # stop() may have given up waiting for this round
            self._let_go()
        return AT_ONCE  # holding is waiting: the next step waits on the connection again

    def _let_go(self) -> None:
        """Let go of the locks, close the connection and let every duty go. The locks are
        let go first (pg_advisory_unlock_all): a closed session's go only as its backend
        exits, after close() returns, and an agent started again at once would wait."""
        conn, self._conn = self._conn, None
        if conn is not None:
            with contextlib.suppress(psycopg.Error):
                if not conn.closed:
                    conn.deadline = _ANSWER_SECONDS
                    conn.execute("SELECT pg_advisory_unlock_all()")
            with contextlib.suppress(psycopg.Error):
                conn.close()
        for duty in self.all():
            duty.set_held(False)

    def _hold(self, conn: psycopg.Connection[Any]) -> None:
        """Take wanted duties (one wait statement); once all are held, watch the connection
        for a second."""
        wanted = [d for d in self.all() if not d.held()]
        if not wanted:
            # Nothing to send: wait for the server to speak (it only does when it
            # ends the session) or for the socket to die.
            ready, _, _ = select.select([conn.fileno()], [], [], 1.0)
            if ready:
                conn.execute("SELECT 1")  # raises if the session is gone
            return
        keys = [k for d in wanted for k in d.lock_keys()]
        # The wait and the look at what we hold, as one simple query: one round trip
        # per WAIT_SECONDS (a fleet's waiting agents are most of its idle traffic).
        cursor = conn.execute(f"{_wait_statement(keys)}; {_HELD_KEYS}")
        cursor.nextset()
        held = {int(r[0]) for r in cursor.fetchall()}
        for duty in wanted:
            if held & set(duty.lock_keys()):
                log.info("took the %s duty", duty.name)
                duty.set_held(True)


def _wait_statement(keys: list[int]) -> str:
    """A DO block: try each key twice a second; return holding the first one free."""
    array = ",".join(str(k) for k in keys)
    return (
        "DO $$ DECLARE k bigint; BEGIN "
        f"FOR i IN 1..{WAIT_SECONDS * 2} LOOP "
        f"FOREACH k IN ARRAY ARRAY[{array}]::bigint[] LOOP "
        "IF pg_try_advisory_lock(k) THEN RETURN; END IF; END LOOP; "
        "PERFORM pg_sleep(0.5); END LOOP; END $$"
    )


__all__ += ["Duty"]

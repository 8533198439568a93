"""Other processes' commits on PostgreSQL, heard as they happen: LISTEN on a connection
and a thread of their own.

The NOTIFY triggers (store/postgres.py) name the table a commit wrote: `outbox`
(rows to deliver) or `approvals` (an approval to carry out). The thread waits
on the socket, which costs the server nothing, and hands each batch of table
names to its callback at once: an approval stored by another agent (a Slack
click on the agent holding the socket) is carried out within milliseconds,
not at the next poll. A lost connection is opened again in the background
(after a back-off: kernel/worker.py), and then every table counts as written
(a commit may have gone unheard).
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from datetime import datetime
from typing import Any

import psycopg

from sebridge.kernel.worker import AT_ONCE, Worker

__all__ = ["CHANNEL", "EVERY_TABLE", "WriteListener"]

log = logging.getLogger(__name__)

CHANNEL = "sebridge"
# The tables whose commits may send NOTIFY (each names itself; store/postgres.py
# says which writes do); after a gap in listening, all of them.
EVERY_TABLE = frozenset(("outbox", "approvals", "hook_runs", "hook_retries"))
# A lost connection is opened again after this, doubling while it fails, up to the cap
# (the heartbeat looks for unannounced work meanwhile).
RECONNECT_SECONDS = 2.0
RECONNECT_CAP = 10.0
# How often a waiting round ends to see whether it should stop (no round trip).
_STOP_CHECK_SECONDS = 0.5


class WriteListener:
    """Calls `on_write(tables)` soon after any process commits to those tables.

    Args:
        connect: opens a new autocommit connection (raises psycopg.Error).
        location: the store, for log lines (no password).
        scrub: an error's text without the password.
    """

    def __init__(
        self,
        connect: Callable[[], psycopg.Connection[Any]],
        location: str,
        scrub: Callable[[BaseException], str],
        on_write: Callable[[frozenset[str]], None],
    ) -> None:
        self._connect = connect
        self._location = location
        self._scrub = scrub
        self._on_write = on_write
        self._failing = False
        self._conn: psycopg.Connection[Any] | None = None
        self._worker = Worker(
            "store-listen",
            self._round,
            expected=(psycopg.Error,),
            describe=scrub,
            logger=log,
            backoff_base=RECONNECT_SECONDS,
            backoff_cap=RECONNECT_CAP,
        )

    def start(self) -> None:
        """Listen from now on: the first LISTEN is sent before this returns (a commit
        made after it is heard); if it cannot be, the thread keeps trying."""
        try:
            self._conn = self._listening()
        except psycopg.Error as exc:
            self._lost(exc)
        self._worker.start()

    def stop(self) -> None:
        """Stop listening and close the connection (within about half a second)."""
        if self._worker.stop(2 * _STOP_CHECK_SECONDS + 1):
            self._close()  # the thread's, ended (or never run): nobody else uses it

    def _listening(self) -> psycopg.Connection[Any]:
        conn = self._connect()
        try:
            conn.execute(f"LISTEN {CHANNEL}")
        except psycopg.Error:
            conn.close()
            raise
        return conn

    def _round(self) -> datetime:
        """One batch of notifications (or half a second without one), heard; a failure
        closes the connection, and the worker backs off before the next round opens one."""
        try:
            tables = self._batch()
        except Exception as exc:  # a connection that failed once is not used again
            self._close()
            self._lost(exc)
            raise
        finally:
            if self._worker.stopping:
                self._close()
        if tables:
            self._heard(tables)
        return AT_ONCE  # listening is waiting: the next round waits on the socket again

    def _batch(self) -> frozenset[str]:
        if self._conn is None:
            self._conn = self._listening()
            if self._failing:
                log.info("listening to the store %s again", self._location)
                self._failing = False
            return EVERY_TABLE  # what was committed while nobody listened
        # The first notification ends the wait; what came with it, or is already on the
        # socket, joins the same batch: one wake for a burst of commits.
        conn = self._conn
        tables = {n.payload for n in conn.notifies(timeout=_STOP_CHECK_SECONDS, stop_after=1)}
        if tables:
            tables.update(n.payload for n in conn.notifies(timeout=0))
        return frozenset(tables)

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()

    def _lost(self, exc: Exception) -> None:
        if self._worker.stopping or self._failing:
            return
        log.warning(
            "lost the LISTEN connection to the store %s (%s); reconnecting, and what was "
            "written meanwhile is looked at when it is back",
            self._location,
            self._scrub(exc),
        )
        self._failing = True

    def _heard(self, tables: frozenset[str]) -> None:
        try:
            self._on_write(tables)
        except Exception:  # the callback's bug must not end the listening
            log.exception("acting on a store write (%s) failed", ", ".join(sorted(tables)))

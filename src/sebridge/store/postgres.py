"""The PostgreSQL dialect (psycopg 3): store.url = "postgresql://user@host/db".

Fleet mode: any number of daemons (one per VM, each its own imds.vm_name)
share one database. Nothing holds the database alone: transitions are keyed
by what they say (the first insert wins), and outbox rows and approvals are
claimed row by row, so every delivery and every StartRequests happens once.
Single-holder duties (Slack's Socket Mode, the Jira search, pruning) are
session advisory locks on a connection of their own (store/pg_duties.py).

- Placeholders: the shared SQL's `?` become psycopg's `%s`.
- Claims lock only the rows they take (`FOR UPDATE SKIP LOCKED`): writers
  do not queue behind each other. Migrations (and the first write of the
  daemon's name) take a transaction-level advisory lock at BEGIN, in the same
  round trip, so several agents starting at once migrate one after the other.
- Other processes' writes are heard as they happen, without a query:
  triggers on the tables someone waits for (outbox, approvals) send NOTIFY
  naming the table, delivered when the writer commits, and a LISTEN
  connection on a thread of its own (store/pg_listen.py) wakes the daemon.
- Every statement has deadlines, the server's and our own (store/pg_deadline.py);
  a lost connection is opened again on a thread of its own (store/pg_reconnect.py):
  meanwhile statements fail at once, and the daemon says so once.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict

from sebridge.kernel.errors import StoreError, StoreInUseError
from sebridge.kernel.redact import redact_url, scrub
from sebridge.store.database import Database, Held
from sebridge.store.duties import LOCK_KEY, THIS_DATABASE, Duties
from sebridge.store.pg_deadline import (
    DEADLINE_SECONDS,
    MIGRATION_SECONDS,
    StatementDeadline,
    connect_options,
)
from sebridge.store.pg_listen import WriteListener
from sebridge.store.pg_name import AgentName
from sebridge.store.pg_reconnect import Reconnect
from sebridge.store.pg_triggers import renew_triggers

__all__ = ["PostgresDatabase"]

log = logging.getLogger(__name__)

# Advisory lock keys (per database): any fixed 64-bit numbers of our own.
MIGRATE_LOCK = 0x5EB21D6E0001


class PostgresDatabase(Database):
    """One psycopg connection (autocommit, explicit transactions) shared by the threads."""

    DIALECT = "postgresql"
    COLUMNS_SQL = (
        "SELECT table_name, column_name FROM information_schema.columns "
        "WHERE table_schema = current_schema()"
    )
    INDEXES_SQL = "SELECT indexname, tablename FROM pg_indexes WHERE schemaname = current_schema()"
    # Each look is four round trips, NOTIFY wakes the dispatcher (a lost LISTEN connection
    # counts as a write) and the heartbeat asks after what no NOTIFY announces: an idle
    # fleet stays quiet.
    IDLE_CHECK_SECONDS = 3600.0

    def claimant_gone(self, column: str) -> str:
        """Every daemon holds its name (hold_exclusive) for as long as its session lives: a
        claimant that no longer holds it died (kill -9 included) or lost the database, and
        its claims pass to another agent at once instead of after the lease. Only this
        database's locks count: pg_locks lists the whole server's, and an agent of the
        same name on another database of the server is no claimant of ours."""
        return (
            "NOT EXISTS (SELECT 1 FROM pg_locks l WHERE l.locktype = 'advisory' "
            f"AND l.objsubid = 1 AND l.granted AND {THIS_DATABASE} AND {LOCK_KEY} = "
            f"(('x' || left(encode(sha256(convert_to('sebridge.agent.' || {column}, 'UTF8')), "
            "'hex'), 16))::bit(64) >> 1)::bigint)"
        )

    def __init__(self, url: str) -> None:
        super().__init__()
        self._url = url
        self.location = redact_url(url)
        self._password = _password(url)
        self._sql: dict[str, str] = {}
        self._listener: WriteListener | None = None
        self._on_write: Callable[[frozenset[str]], None] | None = None
        self._heard = 0
        self._name = AgentName(self.location)  # the daemon's, once held (hold_exclusive)
        self._reconnect = Reconnect(self._reopen)
        self._deadline = StatementDeadline(DEADLINE_SECONDS)
        self._statement_seconds = DEADLINE_SECONDS
        self._conn = self._open()

    # -- connections ---------------------------------------------------------------------------

    def _connect(self) -> psycopg.Connection[Any]:
        """A new autocommit connection with our defaults and deadlines (store.url may
        override each: pg_deadline.connect_options)."""
        return psycopg.connect(self._url, **connect_options(self._url))

    def _open(self) -> psycopg.Connection[Any]:
        """_connect(), its failure as a StoreError without the password."""
        try:
            return self._connect()
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to the store at {self.location}: {self._scrub(exc)}"
            ) from None

    def _usable(self) -> psycopg.Connection[Any]:
        """The connection; if the server dropped it (outside a transaction), the one a
        background attempt opened since, else StoreError at once (an attempt runs)."""
        if not self._conn.closed or self._depth:
            return self._conn
        fresh = self._reconnect.take()
        if fresh is None:
            self._reconnect.start()
            why = self._reconnect.error or f"store error ({self.location}): the connection was lost"
            raise StoreError(f"{why}; connecting again in the background")
        self._conn = fresh
        return fresh

    def close(self) -> None:
        """Close the connections and stop listening."""
        if self._listener is not None:
            self._listener.stop()
        with self._lock:
            self._conn.close()
            self._reconnect.discard()
        self._deadline.stop()

    # -- statements ----------------------------------------------------------------------------

    def _run(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        watch = None
        try:
            conn = self._usable()
            translated = self._sql.get(sql) if params else sql
            if translated is None:
                translated = self._sql[sql] = sql.replace("%", "%%").replace("?", "%s")
            # No placeholders: sent as is (DDL with $$ bodies, BEGIN; ...). Rows are
            # fetched with the answer, so the deadline covers the whole round trip.
            with self._deadline.bound(conn.pgconn.socket, self._statement_seconds) as watch:
                return conn.execute(translated, params or None)
        except psycopg.Error as failed:
            if self._conn.closed:  # lost, not refused: start connecting again now
                self._reconnect.start()
            frozen = watch is not None and watch.cut  # the server is taken for frozen
            why = f"no answer within {self._statement_seconds:g} s" if frozen else failed
            raise self._error(Exception(why)) from None

    def waiting_for(self) -> float:
        """Seconds the statement in flight has waited for the server (0: none in flight)."""
        return self._deadline.longest_wait()

    def _error(self, exc: Exception) -> StoreError:
        return StoreError(f"store error ({self.location}): {self._scrub(exc)}")

    def _begin(self, exclusive: bool) -> None:
        if not exclusive:
            self._run("BEGIN")
            return
        # Migrations: agents starting at once wait for each other's, and a migration may
        # build an index on a big table; the session's deadlines are for a tick's work.
        self._statement_seconds = MIGRATION_SECONDS
        try:  # without parameters psycopg sends one simple query: one round trip
            self._run(
                f"BEGIN; SET LOCAL statement_timeout = '{MIGRATION_SECONDS:g}s'; "
                f"SET LOCAL lock_timeout = '{MIGRATION_SECONDS:g}s'; "
                f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK})"
            )
        except BaseException:
            self._statement_seconds = DEADLINE_SECONDS
            raise

    def _commit(self) -> None:
        try:
            self._run("COMMIT")
        finally:
            self._statement_seconds = DEADLINE_SECONDS

    def _rollback(self) -> None:
        self._statement_seconds = DEADLINE_SECONDS
        conn = self._conn
        with contextlib.suppress(psycopg.Error, OSError), self._deadline.bound(conn.pgconn.socket):
            conn.execute("ROLLBACK")

    def _migrated(self) -> None:
        renew_triggers(self._run, self.all)

    # -- hearing other processes' writes -------------------------------------------------------

    def write_marker(self) -> tuple[int, ...]:
        """How many batches of commits to the outbox or approvals we heard of (this
        process's included, as a SQLite file's stat() sees them). Sends nothing: the
        listener (started by the first call) counts them as they arrive."""
        self._listen()
        return (self._heard,)

    def watch(self, on_write: Callable[[frozenset[str]], None]) -> bool:
        """Call on_write(tables) on the listener's thread as commits are heard."""
        self._on_write = on_write
        self._listen()
        return True

    def _listen(self) -> None:
        with self._lock:
            if self._listener is None:
                self._listener = WriteListener(
                    self._connect, self.location, self._scrub, self._heard_write
                )
                self._listener.start()

    def _heard_write(self, tables: frozenset[str]) -> None:
        self._heard += 1
        if self._on_write is not None:
            self._on_write(tables)

    def duties(self) -> Duties:
        """Duties held through advisory locks on a connection of their own (pg_duties.py)."""
        from sebridge.store.pg_duties import AdvisoryDuties

        return AdvisoryDuties(self._url, self.location)

    # -- fleet mode -----------------------------------------------------------------------------

    def hold_exclusive(self, agent: str) -> Held | None:
        """Hold this agent's name (a session advisory lock on the work connection, taken
        again when it is reopened: store/pg_name.py): a second daemon of the same
        imds.vm_name would share its sightings, and one's empty document would mark the
        other's events gone. Nothing else is held alone: agents of other names share it."""
        try:
            with self._deadline.bound(self._conn.pgconn.socket):
                held = self._name.take(self._conn, agent)
        except psycopg.Error as exc:
            raise StoreError(f"store error ({self.location}): {self._scrub(exc)}") from None
        if not held:
            raise StoreInUseError(self._name.taken_by(self._conn))
        return None  # let go with the connection

    def keep_name(self) -> None:
        """At each heartbeat: take the agent's name again if a reconnection found it still
        held (most likely by our own old session: store/pg_name.py)."""
        if self._name.agent is None or self._name.held:
            return
        with self._lock:
            if self._depth:
                return
            conn = self._usable()
            try:
                with self._deadline.bound(conn.pgconn.socket):
                    self._name.take_again(conn, reopened=False)
            except psycopg.Error as exc:
                raise self._error(exc) from None

    def _reopen(self) -> psycopg.Connection[Any]:
        """A new work connection, holding the agent's name again if this daemon holds it."""
        conn = self._open()
        if self._name.agent is not None:
            try:
                with self._deadline.bound(conn.pgconn.socket):
                    self._name.take_again(conn, reopened=True)
            except psycopg.Error as exc:
                conn.close()
                raise StoreError(f"store error ({self.location}): {self._scrub(exc)}") from None
        return conn

    def _scrub(self, exc: BaseException) -> str:
        """The error's text without the password, should libpq ever quote it."""
        text = " ".join(str(exc).split())  # libpq's messages span lines: logs want one
        return scrub(text, [self._password])


def _password(url: str) -> str:
    """The URL's password, whether in the user info or the query (?password=)."""
    try:
        return urlsplit(url).password or str(conninfo_to_dict(url).get("password") or "")
    except (ValueError, psycopg.Error):
        return ""

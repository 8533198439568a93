"""The PostgreSQL dialect (psycopg 3): store.url = "postgresql://user@host/db".

Fleet mode: any number of daemons (one per VM, each its own imds.vm_name)
share one database. Nothing holds the database alone: transitions are keyed
by what they say (the first insert wins), and outbox rows and approvals are
claimed row by row, so every delivery and every StartRequests happens once.
Single-holder duties (Slack's Socket Mode, the Jira search, pruning) are
session advisory locks on a connection of their own (store/pg_duties.py).

- Connections: a small pool (psycopg_pool): a thread takes one for a statement
  or a transaction. A connection found lost or frozen is dropped, and the pool's
  worker opens another in the background; until one is there, statements fail at
  once instead of waiting for the attempt.
- Placeholders: the shared SQL's `?` become psycopg's `%s`.
- Claims lock only the rows they take (`FOR UPDATE SKIP LOCKED`): writers
  do not queue behind each other. Migrations (and the first write of the
  daemon's name) take a transaction-level advisory lock at BEGIN, in the same
  round trip, so several agents starting at once migrate one after the other.
- Other processes' writes are heard as they happen, without a query:
  triggers on the tables someone waits for (outbox, approvals) send NOTIFY
  naming the table, delivered when the writer commits, and a LISTEN
  connection on a thread of its own (store/pg_listen.py) wakes the daemon.
- Every statement has deadlines, the server's and our own (store/pg_deadline.py).
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Sequence
from typing import Any
from urllib.parse import urlsplit

import psycopg
from psycopg.conninfo import conninfo_to_dict
from psycopg_pool import ConnectionPool, PoolTimeout

from sebridge.kernel.errors import StoreError, StoreInUseError
from sebridge.kernel.redact import redact_url, scrub
from sebridge.store.database import Database, Held, Row
from sebridge.store.duties import LOCK_KEY, THIS_DATABASE, Duties
from sebridge.store.pg_deadline import (
    DEADLINE_SECONDS,
    MIGRATION_SECONDS,
    BoundedConnection,
    connect_options,
)
from sebridge.store.pg_listen import WriteListener
from sebridge.store.pg_name import AgentName
from sebridge.store.pg_triggers import renew_triggers

__all__ = ["PostgresDatabase"]

log = logging.getLogger(__name__)
# The pool's own lines would repeat every failed attempt of an outage with libpq's text:
# the store says an outage itself, in two lines (kernel/outage.py).
logging.getLogger("psycopg.pool").setLevel(logging.ERROR)

# Advisory lock keys (per database): any fixed 64-bit numbers of our own.
MIGRATE_LOCK = 0x5EB21D6E0001
# The pool: one connection while idle, a few for threads that use the store at once.
POOL_MIN, POOL_MAX = 1, 4
# A connection beyond POOL_MIN unused this long is closed.
POOL_IDLE_SECONDS = 60.0
# How long a thread waits for a connection of the pool while all are in use; after a
# connection was lost, only a moment: the pool's worker opens another in the background,
# and statements fail at once meanwhile.
TAKE_SECONDS = DEADLINE_SECONDS
TAKE_AFTER_LOSS_SECONDS = 0.05
# How long the pool's worker keeps trying one connection before it starts over (its
# back-off doubles from 1 s up to this).
RECONNECT_SECONDS = 8.0


class PostgresDatabase(Database):
    """A small pool of psycopg connections (autocommit, explicit transactions)."""

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
        self._listen_lock = threading.Lock()
        self._on_write: Callable[[frozenset[str]], None] | None = None
        self._heard = 0
        self._lost = False  # a connection was lost; none answered since
        self._waits: dict[int, float] = {}  # statements in flight: thread id -> since
        self._name = AgentName(self._connect, self.location)  # the daemon's (hold_exclusive)
        self._connect().close()  # an unreachable store fails here, saying why
        self._pool: ConnectionPool[BoundedConnection] = ConnectionPool(
            url,
            connection_class=BoundedConnection,
            kwargs=connect_options(url),
            min_size=POOL_MIN,
            max_size=POOL_MAX,
            max_idle=POOL_IDLE_SECONDS,
            reconnect_timeout=RECONNECT_SECONDS,
            num_workers=1,
            name="store",
            open=False,
        )
        # Its first connection made before the first statement: one asked for meanwhile
        # would grow the pool by a second one, opened later, for nothing.
        try:
            self._pool.open(wait=True, timeout=float(connect_options(url)["connect_timeout"]))
        except PoolTimeout:
            self._pool.close(timeout=1.0)
            raise StoreError(
                f"cannot connect to the store at {self.location}: no connection within "
                f"{connect_options(url)['connect_timeout']} s"
            ) from None

    # -- connections ---------------------------------------------------------------------------

    def _connect(self) -> BoundedConnection:
        """A new autocommit connection with our defaults and deadlines (store.url may
        override each: pg_deadline.connect_options); StoreError without the password."""
        try:
            return BoundedConnection.connect(self._url, **connect_options(self._url))
        except psycopg.Error as exc:
            raise StoreError(
                f"cannot connect to the store at {self.location}: {self._scrub(exc)}"
            ) from None

    def _take(self) -> BoundedConnection:
        wait = TAKE_SECONDS
        if self._lost:
            # Since a loss: an idle connection if there is one, else fail at once while the
            # pool's worker connects (asking it to grow only when it gave up: no attempt
            # piles on another while the database hangs).
            stats = self._pool.get_stats()
            if not stats.get("pool_available") and stats.get("pool_size", 0) >= POOL_MIN:
                raise self._lost_error()
            wait = TAKE_AFTER_LOSS_SECONDS
        try:
            return self._pool.getconn(timeout=wait)
        except PoolTimeout:
            if self._lost:
                raise self._lost_error() from None
            raise StoreError(
                f"store error ({self.location}): no connection free within {wait:g} s"
            ) from None
        except psycopg.Error as exc:  # the pool is closed
            raise self._error(exc) from None

    def _lost_error(self) -> StoreError:
        return StoreError(
            f"store error ({self.location}): the connection was lost; connecting again in "
            "the background"
        )

    def _give(self, conn: BoundedConnection) -> None:
        if conn.closed:  # lost (or cut at its deadline), not refused
            self._lost = True
        conn.deadline = None
        self._pool.putconn(conn)  # a closed one is dropped, and another one opened

    def close(self) -> None:
        """Let the agent's name go, stop listening, close the connections."""
        self._name.release()
        with self._listen_lock:
            listener, self._listener = self._listener, None
        if listener is not None:
            listener.stop()
        self._pool.close(timeout=1.0)

    # -- statements ----------------------------------------------------------------------------

    def _run(self, sql: str, params: Sequence[Any] = ()) -> psycopg.Cursor[Any]:
        conn: BoundedConnection = self._conn()
        translated = self._translate(sql) if params else sql
        # No placeholders: sent as is (DDL with $$ bodies, BEGIN; ...). Rows are fetched
        # with the answer, so the deadline covers the whole round trip.
        me = threading.get_ident()
        self._waits[me] = time.monotonic()
        try:
            cursor = conn.execute(translated, params or None)
        except psycopg.Error as failed:
            raise self._error(failed) from None
        finally:
            self._waits.pop(me, None)
        self._lost = False
        return cursor

    def _translate(self, sql: str) -> str:
        translated = self._sql.get(sql)
        if translated is None:
            translated = self._sql[sql] = sql.replace("%", "%%").replace("?", "%s")
        return translated

    def waiting_for(self) -> float:
        """Seconds the longest statement in flight has waited for the server (0: none)."""
        oldest = min(self._waits.copy().values(), default=None)  # copied whole, at once
        return 0.0 if oldest is None else time.monotonic() - oldest

    def _error(self, exc: Exception) -> StoreError:
        return StoreError(f"store error ({self.location}): {self._scrub(exc)}")

    def _begin(self, exclusive: bool) -> None:
        if not exclusive:
            self._run("BEGIN")
            return
        # Migrations: agents starting at once wait for each other's, and a migration may
        # build an index on a big table; the session's deadlines are for a tick's work.
        conn: BoundedConnection = self._conn()
        conn.deadline = MIGRATION_SECONDS
        # Without parameters psycopg sends one simple query: one round trip.
        self._run(
            f"BEGIN; SET LOCAL statement_timeout = '{MIGRATION_SECONDS:g}s'; "
            f"SET LOCAL lock_timeout = '{MIGRATION_SECONDS:g}s'; "
            f"SELECT pg_advisory_xact_lock({MIGRATE_LOCK})"
        )

    def _commit(self) -> None:
        self._run("COMMIT")

    def _rollback(self) -> None:
        conn: BoundedConnection = self._conn()
        if conn.closed:
            return
        conn.deadline = _ROLLBACK_SECONDS
        try:
            conn.execute("ROLLBACK")
        except psycopg.Error:
            conn.close()  # the pool drops it

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
        with self._listen_lock:
            if self._listener is None:
                self._listener = WriteListener(
                    self._connect_raw, self.location, self._scrub, self._heard_write
                )
                self._listener.start()

    def _connect_raw(self) -> psycopg.Connection[Any]:
        """A connection for the listener (psycopg.Error as it is: the listener says it)."""
        return psycopg.connect(self._url, **connect_options(self._url))

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
        """Hold this agent's name (a session advisory lock on a connection of its own,
        taken again when it is reopened: store/pg_name.py): a second daemon of the same
        imds.vm_name would share its sightings, and one's empty document would mark the
        other's events gone. Nothing else is held alone: agents of other names share it."""
        try:
            held = self._name.take(agent)
        except psycopg.Error as exc:
            raise self._error(exc) from None
        if not held:
            raise StoreInUseError(self._name.taken_by())
        return None  # let go at close()

    def beat(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The heartbeat's statement, on the connection that holds the agent's name (taken
        again first if it was lost: store/pg_name.py); without a name, as any statement."""
        if self._name.agent is None:
            return self.one(sql, params)
        try:
            with self._name.session() as conn, self._using(conn):
                return self.one(sql, params)
        except psycopg.Error as exc:
            raise self._error(exc) from None

    def _scrub(self, exc: BaseException) -> str:
        """The error's text without the password, should libpq ever quote it."""
        text = " ".join(str(exc).split())  # libpq's messages span lines: logs want one
        return scrub(text, [self._password])


# A rollback's answer: a connection that gives none is closed instead.
_ROLLBACK_SECONDS = 2.0


def _password(url: str) -> str:
    """The URL's password, whether in the user info or the query (?password=)."""
    try:
        return urlsplit(url).password or str(conninfo_to_dict(url).get("password") or "")
    except (ValueError, psycopg.Error):
        return ""

"""The dialect seam: a small pool of connections, transactions, commit hooks and migrations.

SQL elsewhere in `store/` is written once, with `?` placeholders,
standard `INSERT ... ON CONFLICT` / `RETURNING`, and claims as
`SELECT ... FOR UPDATE [OF t] SKIP LOCKED`. A dialect (store/sqlite.py,
store/postgres.py) adapts what differs: placeholders, row locks (SQLite has
none: its write transaction locks the whole file), the auto-increment key
(`{id}` in the schema), its connections (a pool: a thread holds one for a
statement, or for a whole transaction), how a write transaction starts and
what it locks, how other processes' writes are noticed (polled, or heard),
whether the daemon holds the store alone (SQLite) or shares it (PostgreSQL),
and how single-holder duties are held. `connect.open_database()` picks the
dialect from store.url. See docs/ARCHITECTURE.md, "Seams".
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from sebridge.kernel.errors import StoreError
from sebridge.store.duties import Duties
from sebridge.store.schema import VERSION, upgrade

__all__ = ["Database", "Held", "Row", "written_table"]

log = logging.getLogger(__name__)

Row = tuple[Any, ...]

# The table a statement writes (INSERT INTO t, UPDATE t, DELETE FROM t), if it writes one.
# The statement's own write, after the queries of a WITH if any (lazily: the first of its
# closing parentheses that a write follows).
_WRITES = re.compile(
    r"^\s*(?:WITH\b.*?\)\s*)?(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)",
    re.IGNORECASE | re.DOTALL,
)


def written_table(sql: str) -> str | None:
    """The table `sql` writes, or None (a read, DDL, BEGIN...)."""
    found = _WRITES.match(sql)
    return found.group(1).lower() if found else None


class Held(Protocol):
    """Something held for as long as the store is open (the daemon's lock)."""

    def release(self) -> None:
        """Let go (idempotent)."""


class _Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class _Thread(threading.local):
    """What one thread holds: its connection (in a statement or a transaction), how deep
    its transactions nest, and what the outermost one does once committed."""

    conn: Any = None
    depth = 0
    after: list[Callable[[], None]]
    written: set[str]

    def __init__(self) -> None:
        self.after = []
        self.written = set()


class Database:
    """A small pool of connections: each thread holds one for a statement, or for a whole
    transaction (nested transactions join the outer one), so a slow statement holds up
    its own thread, not every part of the daemon.

    Subclasses provide the dialect: DIALECT, _take(), _give(), _run(), _begin(),
    _commit(), _rollback(), write_marker(), hold_exclusive(), close().
    """

    # Which of the schema's scripts this dialect runs (a key of store/schema.py's BASELINE).
    DIALECT = ""
    # (table, column) of every table in the store's schema (store/schema_check.py).
    COLUMNS_SQL = ""
    # (index, table) of every index in the store's schema (store/schema_check.py).
    INDEXES_SQL = ""
    # How often an idle dispatcher looks at the outbox unwoken (a safety net: the
    # daemon's tick wakes it whenever anyone writes). A local file's look is free.
    IDLE_CHECK_SECONDS = 60.0
    # What messages call the store: a file path, or the URL without its password.
    location = ""

    def __init__(self) -> None:
        self._thread = _Thread()
        self._on_commit: list[Callable[[frozenset[str]], None]] = []
        # The schema version migrate() found, when it moved it (0: it created the tables);
        # `sebridge check` says what it wrote.
        self.migrated_from: int | None = None

    @contextmanager
    def transaction(self, *, exclusive: bool = False) -> Iterator[Database]:
        """A write transaction on one connection: all of it or nothing. Nested calls (on
        the same thread) join the outer one.

        exclusive: one at a time across every process on the store (migrations).
        """
        here = self._thread
        if here.depth:
            here.depth += 1
            try:
                yield self
            finally:
                here.depth -= 1
            return
        with self._holding():
            here.depth = 1
            try:
                self._begin(exclusive)
                yield self
            except BaseException:
                self._rollback()
                raise
            else:
                self._commit()
            finally:
                here.depth = 0
                done, here.after = here.after, []
                written, here.written = frozenset(here.written), set()
        for action in done:
            action()
        self._committed(written)

    def after_commit(self, action: Callable[[], None]) -> None:
        """Call `action` once the current transaction has committed (never, if it rolls
        back); outside a transaction, now (each statement commits on its own)."""
        if self._thread.depth:
            self._thread.after.append(action)
            return
        action()

    def on_commit(self, callback: Callable[[frozenset[str]], None]) -> None:
        """Call `callback(tables)` after every commit of this process that wrote rows (a
        transaction, or a statement outside one), with the tables it wrote (INSERT, UPDATE
        or DELETE targets), on the committing thread. A callback that raises is logged:
        the commit stands."""
        self._on_commit.append(callback)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        return int(self._statement(sql, params, lambda cursor: cursor.rowcount))

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a query, or None."""
        row = self._statement(sql, params, lambda cursor: cursor.fetchone())
        return tuple(row) if row is not None else None

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""
        rows = self._statement(sql, params, lambda cursor: cursor.fetchall())
        return [tuple(r) for r in rows]

    def _statement(self, sql: str, params: Sequence[Any], read: Callable[[_Cursor], Any]) -> Any:
        """Run `sql` on this thread's connection (taken for it alone outside a transaction)
        and `read` its cursor; note the table it wrote for the commit's callbacks."""
        here = self._thread
        with self._holding():
            cursor = self._run(sql, params)
            try:
                result = read(cursor)
            except StoreError:
                raise
            except Exception as exc:  # rows are read, and may prove corrupt, only now
                raise self._error(exc) from exc
            # RETURNING's rows may be counted only once read: a row read is a row written.
            table = written_table(sql) if cursor.rowcount or result else None
            if table is not None and here.depth:
                here.written.add(table)
        if table is not None and not here.depth:
            self._committed(frozenset((table,)))
        return result

    @contextmanager
    def _holding(self) -> Iterator[None]:
        """This thread's connection: the one its transaction holds, else one taken from
        the pool for the block and given back after it."""
        here = self._thread
        if here.conn is not None:
            yield
            return
        here.conn = self._take()
        try:
            yield
        finally:
            conn, here.conn = here.conn, None
            self._give(conn)

    @contextmanager
    def _using(self, conn: Any) -> Iterator[None]:
        """Run this thread's statements in the block on `conn`, a connection of the
        dialect's own outside the pool (PostgreSQL: the agent name's)."""
        here = self._thread
        assert here.conn is None, "a connection of its own inside a transaction"
        here.conn = conn
        try:
            yield
        finally:
            here.conn = None

    def _committed(self, tables: frozenset[str]) -> None:
        if not tables:
            return
        for callback in list(self._on_commit):
            try:
                callback(tables)
            except Exception:  # a listener's bug must not fail a committed write
                log.exception("a commit callback failed (%s)", ", ".join(sorted(tables)))

    def migrate(self) -> int:
        """Bring the schema to the newest version; returns that version.

        An exclusive transaction: agents that start at the same moment
        migrate one after the other, the second sees the first's version.
        """
        with self.transaction(exclusive=True):
            self._run("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = self.one("SELECT value FROM meta WHERE key = 'schema_version'")
            version = _schema_version(row[0], self.location) if row else 0
            for statement in upgrade(version, self.DIALECT, self.location):
                self._run(statement)
            if version < VERSION:
                self._migrated()
                self.migrated_from = version
            self._run(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(VERSION),),
            )
        return VERSION

    def schema_version(self) -> int:
        """The store's schema version, read without writing anything (0: no tables yet)."""
        if "meta" not in {str(table) for table, _ in self.all(self.COLUMNS_SQL)}:
            return 0
        row = self.one("SELECT value FROM meta WHERE key = 'schema_version'")
        return _schema_version(row[0], self.location) if row else 0

    def claimant_gone(self, column: str) -> str:
        """SQL, true when the agent named in `column` (a claim's claimed_by) is gone, so its
        claim is void before its lease ends. One daemon per SQLite file: it releases its
        own claims when it starts again, and never sees anyone else's."""
        return "0"

    def waiting_for(self) -> float:
        """Seconds the longest statement in flight has waited for an answer, for /healthz:
        a local file's statements end within its busy timeout, so 0 unless the dialect
        tracks it."""
        return 0.0

    def check_integrity(self) -> None:
        """The dialect's own check of the stored pages; StoreError if one is bad."""

    def write_marker(self) -> tuple[int, ...]:
        """Changes whenever another process commits a write; cheap enough for every tick."""
        raise NotImplementedError

    def watch(self, on_write: Callable[[frozenset[str]], None]) -> bool:
        """Call `on_write(tables)` as commits to the outbox or approvals are heard, from a
        thread of the dialect's. False: this dialect cannot tell (SQLite), so compare
        write_marker() at each poll instead."""
        return False

    def hold_exclusive(self, agent: str) -> Held | None:
        """For the daemon called `agent`: hold the store against a second daemon (on a
        shared store, one of the same name); None: nothing to release but the
        connection. StoreError names the holder."""
        raise NotImplementedError

    def beat(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The heartbeat's statement: as any other, unless the dialect holds the agent's name
        on a session of its own (PostgreSQL: it runs there, proving that session alive,
        and takes the name again if it was lost: store/pg_name.py)."""
        return self.one(sql, params)

    def close(self) -> None:
        """Close the connections."""
        raise NotImplementedError

    def duties(self) -> Duties:
        """The single-holder duties' board: one daemon per store holds every duty."""
        return Duties()

    def _migrated(self) -> None:
        """After new migrations ran, in their transaction: dialect extras (triggers)."""

    def _error(self, exc: Exception) -> StoreError:
        """A driver's error as a StoreError (a dialect removes what must not be shown)."""
        return StoreError(f"store error ({self.location}): {exc}")

    def _take(self) -> Any:
        """A connection for this thread, from the pool (StoreError: none to be had)."""
        raise NotImplementedError

    def _give(self, conn: Any) -> None:
        """Give a connection back to the pool (a broken one is dropped)."""
        raise NotImplementedError

    def _conn(self) -> Any:
        """The connection this thread holds (inside _holding() or a transaction)."""
        conn = self._thread.conn
        assert conn is not None, "a statement outside Database._holding()"
        return conn

    def _run(self, sql: str, params: Sequence[Any] = ()) -> _Cursor:
        raise NotImplementedError

    def _begin(self, exclusive: bool) -> None:
        raise NotImplementedError

    def _commit(self) -> None:
        raise NotImplementedError

    def _rollback(self) -> None:
        raise NotImplementedError


def _schema_version(value: Any, location: str) -> int:
    """The meta table's schema_version as a number; anything else is not our store."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise StoreError(
            f"the store at {location} has schema_version {str(value)[:40]!r} in its meta table, "
            "not a number: it is damaged or was not written by sebridge"
        ) from None

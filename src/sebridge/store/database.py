"""The dialect seam: one connection per process, transactions and migrations.

SQL elsewhere in `store/` is written once, with `?` placeholders,
standard `INSERT ... ON CONFLICT` / `RETURNING`, and claims as
`SELECT ... FOR UPDATE [OF t] SKIP LOCKED`. A dialect (store/sqlite.py,
store/postgres.py) adapts what differs: placeholders, row locks (SQLite has
none: its write transaction locks the whole file), the auto-increment key
(`{id}` in the migrations), how a write transaction starts and what it locks,
how other processes' writes are noticed (polled, or heard), whether the daemon holds the
store alone (SQLite) or shares it (PostgreSQL), and how single-holder
duties are held. `connect.open_database()` picks the dialect from store.url.
"""

from __future__ import annotations

import re
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from typing import Any, Protocol

from sebridge.kernel.errors import StoreError
from sebridge.store.duties import Duties
from sebridge.store.schema import MIGRATIONS

__all__ = ["Database", "Held", "Row"]

Row = tuple[Any, ...]


class Held(Protocol):
    """Something held for as long as the store is open (the daemon's lock)."""

    def release(self) -> None:
        """Let go (idempotent)."""


class _Cursor(Protocol):
    @property
    def rowcount(self) -> int: ...

    def fetchone(self) -> Any: ...

    def fetchall(self) -> list[Any]: ...


class Database:
    """One connection shared by the process's threads behind a lock.

    Subclasses provide the dialect: ID_COLUMN, _run(), _begin(), _commit(),
    _rollback(), write_marker(), hold_exclusive(), close().
    """

    ID_COLUMN = ""
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
        self._lock = threading.RLock()
        self._depth = 0
        self._after_commit: list[Callable[[], None]] = []
        self._on_commit: list[Callable[[frozenset[str]], None]] = []
        self._written: set[str] = set()  # tables the open transaction changed rows of
        # The schema version migrate() found, when it moved it (0: it created the tables);
        # `sebridge check` says what it wrote.
        self.migrated_from: int | None = None

    @contextmanager
    def transaction(self, *, exclusive: bool = False) -> Iterator[Database]:
        """A write transaction: all of it or nothing. Nested calls join the outer one.

        exclusive: one at a time across every process on the store (migrations).
        """
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self
                finally:
                    self._depth -= 1
                return
            self._begin(exclusive)
            self._depth = 1
            try:
                yield self
            except BaseException:
                self._depth = 0
                self._after_commit.clear()
                self._written.clear()
                self._rollback()
                raise
            self._depth = 0
            try:
                self._commit()
            except BaseException:
                self._written.clear()
                raise
            finally:
                done, self._after_commit = self._after_commit, []
            for action in done:
                action()
            self._published()

    def on_commit(self, callback: Callable[[frozenset[str]], None]) -> None:
        """Call `callback(tables)` after each commit of this connection that changed rows,
        with the tables it wrote (kernel/subscriptions.py publishes them)."""
        self._on_commit.append(callback)

    def _note(self, sql: str, changed: bool) -> None:
        """A statement ran: remember the table it wrote, when it changed rows."""
        if changed and self._on_commit and (table := written_table(sql)):
            self._written.add(table)

    def _published(self) -> None:
        """After a commit (or a lone statement): tell the callbacks what it wrote."""
        with self._lock:
            if self._depth or not self._written:
                return
            tables, self._written = frozenset(self._written), set()
        for callback in self._on_commit:
            callback(tables)

    def after_commit(self, action: Callable[[], None]) -> None:
        """Call `action` once the current transaction has committed (never, if it rolls
        back); outside a transaction, now (each statement commits on its own)."""
        with self._lock:
            if self._depth:
                self._after_commit.append(action)
                return
        action()

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        with self._lock:
            count: int = self._run(sql, params).rowcount
            self._note(sql, count != 0)
        self._published()
        return count

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a query, or None."""
        with self._lock:
            cursor = self._run(sql, params)
            try:
                row = cursor.fetchone()
            except StoreError:
                raise
            except Exception as exc:  # rows are read, and may prove corrupt, only now
                raise self._error(exc) from exc
            self._note(sql, row is not None)
        self._published()
        return tuple(row) if row is not None else None

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""
        with self._lock:
            cursor = self._run(sql, params)
            try:
                rows = cursor.fetchall()
            except StoreError:
                raise
            except Exception as exc:
                raise self._error(exc) from exc
            self._note(sql, bool(rows))
        self._published()
        return [tuple(r) for r in rows]

    def migrate(self) -> int:
        """Bring the schema to the newest version; returns that version.

        An exclusive transaction: agents that start at the same moment
        migrate one after the other, the second sees the first's version.
        """
        with self.transaction(exclusive=True):
            self._run("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = self.one("SELECT value FROM meta WHERE key = 'schema_version'")
            version = _schema_version(row[0], self.location) if row else 0
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"the store at {self.location} has schema version {version}, newer than "
                    f"this sebridge knows ({len(MIGRATIONS)}): upgrade sebridge"
                )
            for number in range(version + 1, len(MIGRATIONS) + 1):
                ddl = MIGRATIONS[number - 1].replace("{id}", self.ID_COLUMN)
                for statement in filter(str.strip, ddl.split(";")):
                    self._run(statement)
            if version < len(MIGRATIONS):
                self._migrated()
                self.migrated_from = version
            self._run(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(len(MIGRATIONS)),),
            )
        return len(MIGRATIONS)

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
        """Seconds the statement in flight has waited for an answer, for /healthz: a local
        file's statements end within its busy timeout, so 0 unless the dialect tracks it."""
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

    def keep_name(self) -> None:
        """At each heartbeat: hold the agent's name again if a reconnection could not
        (PostgreSQL: store/pg_name.py). A file is held for as long as it is open."""

    def close(self) -> None:
        """Close the connection."""
        raise NotImplementedError

    def duties(self) -> Duties:
        """The single-holder duties' board: one daemon per store holds every duty."""
        return Duties()

    def _migrated(self) -> None:
        """After new migrations ran, in their transaction: dialect extras (triggers)."""

    def _error(self, exc: Exception) -> StoreError:
        """A driver's error as a StoreError (a dialect removes what must not be shown)."""
        return StoreError(f"store error ({self.location}): {exc}")

    def _run(self, sql: str, params: Sequence[Any] = ()) -> _Cursor:
        raise NotImplementedError

    def _begin(self, exclusive: bool) -> None:
        raise NotImplementedError

    def _commit(self) -> None:
        raise NotImplementedError

    def _rollback(self) -> None:
        raise NotImplementedError


_WRITE = re.compile(r"\b(?:INSERT\s+INTO|UPDATE|DELETE\s+FROM)\s+(\w+)", re.IGNORECASE)


def written_table(sql: str) -> str | None:
    """The table an INSERT, UPDATE or DELETE writes (the last one after a WITH's
    queries); None for anything else."""
    head = sql.lstrip()[:6].upper()
    if head not in ("INSERT", "UPDATE", "DELETE") and not head.startswith("WITH"):
        return None
    # Not "FOR UPDATE OF x" nor "ON CONFLICT ... DO UPDATE SET".
    tables = [t for t in _WRITE.findall(sql) if t.upper() not in ("OF", "SET")]
    if not tables:
        return None
    return str(tables[-1] if head.startswith("WITH") else tables[0])


def _schema_version(value: Any, location: str) -> int:
    """The meta table's schema_version as a number; anything else is not our store."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise StoreError(
            f"the store at {location} has schema_version {str(value)[:40]!r} in its meta table, "
            "not a number: it is damaged or was not written by sebridge"
        ) from None

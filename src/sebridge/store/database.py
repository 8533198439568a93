"""The database connection, transactions and migrations: the dialect seam.

SQL elsewhere in `store/` is written once, with `?` placeholders and
standard `INSERT ... ON CONFLICT` / `RETURNING`, which SQLite (3.35+) and
PostgreSQL both speak; this module adapts what differs (placeholders, the
auto-increment key, how a write transaction starts and locks).
"""

from __future__ import annotations

import os
import sqlite3
import threading
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sebridge.errors import StoreError
from sebridge.store.schema import MIGRATIONS

__all__ = ["Database", "sqlite_path"]

Row = tuple[Any, ...]


def sqlite_path(url: str) -> str:
    """The file path of a sqlite:// URL (":memory:" for sqlite:// alone)."""
    parts = urlsplit(url)
    if parts.scheme != "sqlite":
        # The URL may carry a password: name its scheme only.
        raise StoreError(
            f"store.url: {parts.scheme}:// is not supported by this store; use sqlite://"
        )
    # sqlite:////abs/path -> "//abs/path" -> "/abs/path"; sqlite:///rel -> "/rel" -> "rel"
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    return path or ":memory:"


class Database:
    """One SQLite connection shared by the process's threads, in WAL mode.

    SQLite serialises writers anyway; one connection behind a lock keeps
    transactions simple, and WAL lets other processes (`sebridge approve`,
    `sebridge events`) read and write beside the daemon.
    """

    def __init__(self, url: str) -> None:
        path = sqlite_path(url)
        if path != ":memory:":
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of {path}: {exc.strerror}") from None
        try:
            self._conn = sqlite3.connect(
                path, timeout=10.0, isolation_level=None, check_same_thread=False
            )
            self._conn.execute("PRAGMA journal_mode=WAL")
            # FULL: a committed tick survives the host losing power, not only a crash.
            self._conn.execute("PRAGMA synchronous=FULL")
            self._conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the store at {path}: {exc}") from None
        self.path = path
        self._lock = threading.RLock()
        self._depth = 0

    @contextmanager
    def transaction(self) -> Iterator[Database]:
        """A write transaction: all of it or nothing. Nested calls join the outer one."""
        with self._lock:
            if self._depth:
                self._depth += 1
                try:
                    yield self
                finally:
                    self._depth -= 1
                return
            # IMMEDIATE takes the write lock up front: no upgrade deadlock with
            # another process writing at the same moment.
            self._execute("BEGIN IMMEDIATE")
            self._depth = 1
            try:
                yield self
            except BaseException:
                self._depth = 0
                self._conn.rollback()
                raise
            self._depth = 0
            self._execute("COMMIT")

    def execute(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run one statement; returns the number of rows it changed."""
        with self._lock:
            return self._execute(sql, params).rowcount

    def insert(self, sql: str, params: Sequence[Any] = ()) -> int:
        """Run an INSERT ... RETURNING id; returns the id."""
        row = self.one(sql, params)
        if row is None:
            raise StoreError("insert returned no id")
        return int(row[0])

    def one(self, sql: str, params: Sequence[Any] = ()) -> Row | None:
        """The first row of a query, or None."""
        with self._lock:
            cursor = self._execute(sql, params)
            try:
                row: Row | None = cursor.fetchone()
            except sqlite3.Error as exc:  # rows are read, and may prove corrupt, only now
                raise StoreError(f"store error ({self.path}): {exc}") from exc
            return row

    def all(self, sql: str, params: Sequence[Any] = ()) -> list[Row]:
        """Every row of a query."""
        with self._lock:
            cursor = self._execute(sql, params)
            try:
                return list(cursor.fetchall())
            except sqlite3.Error as exc:
                raise StoreError(f"store error ({self.path}): {exc}") from exc

    def write_marker(self) -> tuple[int, ...]:
        """Changes whenever anyone commits (another process included): the database
        and WAL files' modification times and sizes. A stat() costs a few
        microseconds, a query a hundred on a cold cache: this runs every second."""
        marker: list[int] = []
        if self.path == ":memory:":
            return ()
        for name in (self.path, f"{self.path}-wal"):
            try:
                stat = os.stat(name)
            except OSError:
                marker += [0, 0]
                continue
            marker += [stat.st_mtime_ns, stat.st_size]
        return tuple(marker)

    def migrate(self) -> int:
        """Bring the schema to the newest version; returns that version."""
        with self.transaction():
            self._execute("CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT)")
            row = self.one("SELECT value FROM meta WHERE key = 'schema_version'")
            version = _schema_version(row[0], self.path) if row else 0
            if version > len(MIGRATIONS):
                raise StoreError(
                    f"the store at {self.path} has schema version {version}, newer than this "
                    f"sebridge knows ({len(MIGRATIONS)}): upgrade sebridge"
                )
            for number in range(version + 1, len(MIGRATIONS) + 1):
                ddl = MIGRATIONS[number - 1].replace("{id}", "INTEGER PRIMARY KEY AUTOINCREMENT")
                for statement in filter(str.strip, ddl.split(";")):
                    self._execute(statement)
            self._execute(
                "INSERT INTO meta (key, value) VALUES ('schema_version', ?) "
                "ON CONFLICT (key) DO UPDATE SET value = excluded.value",
                (str(len(MIGRATIONS)),),
            )
        return len(MIGRATIONS)

    def check_integrity(self) -> None:
        """SQLite's own check of every page (PRAGMA quick_check); StoreError if one is bad."""
        if self.path == ":memory:":
            return
        try:
            problems = [str(r[0]) for r in self.all("PRAGMA quick_check")]
        except StoreError as exc:  # too damaged to even check
            problems = [str(exc.__cause__ or exc)]
        if problems == ["ok"]:
            return
        # One problem per line, with a "*** in database main ***" heading: one short line.
        lines = [ln for p in problems for ln in p.splitlines() if ln and not ln.startswith("***")]
        shown = "; ".join(lines)
        shown = shown if len(shown) <= 300 else shown[:297] + "..."
        raise StoreError(
            f"the store at {self.path} is corrupt (SQLite's quick_check: {shown}); "
            "restore it from a backup, or move it away to start with an empty store"
        )

    def close(self) -> None:
        """Close the connection."""
        with self._lock:
            self._conn.close()

    def _execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        try:
            return self._conn.execute(sql, params)
        except sqlite3.Error as exc:
            raise StoreError(f"store error ({self.path}): {exc}") from exc


def _schema_version(value: Any, path: str) -> int:
    """The meta table's schema_version as a number; anything else is not our store."""
    try:
        return int(value)
    except (TypeError, ValueError):
        raise StoreError(
            f"the store at {path} has schema_version {str(value)[:40]!r} in its meta table, "
            "not a number: it is damaged or was not written by sebridge"
        ) from None

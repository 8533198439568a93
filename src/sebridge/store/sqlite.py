"""The SQLite dialect: the embedded default, one file for one daemon, in WAL mode."""

from __future__ import annotations

import contextlib
import os
import re
import sqlite3
import threading
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from sebridge.kernel.errors import StoreError
from sebridge.store.database import Database, Held, written_table
from sebridge.store.lock import StoreLock

__all__ = ["SqliteDatabase", "sqlite_path"]

# How long after a file's recorded time a commit surely shows as a later time: the kernel
# stamps files with a coarse clock (a few ms; some file systems 1 or 2 s), so be generous.
FILE_TICK_NS = 2_000_000_000

_ROW_LOCK = re.compile(r"\s+FOR UPDATE(?: OF \w+)?(?: SKIP LOCKED)?\s*$")


def sqlite_path(url: str) -> str:
    """The file path of a sqlite:// URL (":memory:" for sqlite:// alone)."""
    parts = urlsplit(url)
    # sqlite:////abs/path -> "//abs/path" -> "/abs/path"; sqlite:///rel -> "/rel" -> "rel"
    path = parts.path[1:] if parts.path.startswith("/") else parts.path
    return path or ":memory:"


class SqliteDatabase(Database):
    """A SQLite file in WAL mode, a connection per thread that uses it at once.

    A thread takes a connection for a statement (or a transaction) and gives it back: the
    pool keeps those given back for the next taker, so a connection is opened once per
    thread using the store at the same moment. WAL lets readers read beside a writer
    (this process's other threads, `sebridge approve`, `sebridge events`); writers take
    turns on the file's write lock, each waiting at most the busy timeout. An in-memory
    store is one database per connection: it has one connection, taken in turn.
    """

    DIALECT = "sqlite"
    COLUMNS_SQL = (
        "SELECT m.name, c.name FROM sqlite_master m, pragma_table_info(m.name) c "
        "WHERE m.type = 'table'"
    )
    # Named by CREATE INDEX (SQLite's own for keys have no SQL).
    INDEXES_SQL = (
        "SELECT name, tbl_name FROM sqlite_master WHERE type = 'index' AND sql IS NOT NULL"
    )

    def __init__(self, url: str) -> None:
        super().__init__()
        path = sqlite_path(url)
        if path != ":memory:":
            try:
                Path(path).parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                raise StoreError(f"cannot create the folder of {path}: {exc.strerror}") from None
        self.path = self.location = path
        self._sql: dict[str, str] = {}
        self._pool_lock = threading.Lock()
        self._idle: list[sqlite3.Connection] = [self._open()]  # opened now: errors say so now
        self._closed = False
        # In memory: one database, one connection, one thread at a time.
        self._turn = threading.Semaphore(1) if path == ":memory:" else None
        # This process's writers take turns here, not on the file's lock: SQLite's busy
        # handler sleeps 1, 2, 5, 10... ms between tries, a lock hands over at once.
        # Readers do not take it (WAL).
        self._writing = threading.Lock()
        # write_marker()'s state (its caller's thread only): the last marker, when its
        # data_version was read (wall clock, as file times), its own connection.
        self._marker: tuple[int, ...] = ()
        self._version_read_at = 0
        self._marker_conn: sqlite3.Connection | None = None
        self._marker_failures = 0

    def _open(self) -> sqlite3.Connection:
        try:
            conn = sqlite3.connect(
                self.path, timeout=10.0, isolation_level=None, check_same_thread=False
            )
            conn.execute("PRAGMA journal_mode=WAL")
            # FULL: a committed tick survives the host losing power, not only a crash.
            conn.execute("PRAGMA synchronous=FULL")
            conn.execute("PRAGMA foreign_keys=ON")
        except sqlite3.Error as exc:
            raise StoreError(f"cannot open the store at {self.path}: {exc}") from None
        return conn

    def _take(self) -> sqlite3.Connection:
        if self._turn is not None:
            self._turn.acquire()
        with self._pool_lock:
            if self._closed:
                if self._turn is not None:
                    self._turn.release()
                raise StoreError(f"store error ({self.path}): the store is closed")
            if self._idle:
                return self._idle.pop()
        return self._open()

    def _give(self, conn: sqlite3.Connection) -> None:
        if conn.in_transaction:  # a COMMIT that failed (busy): never hand on its transaction
            with contextlib.suppress(sqlite3.Error):
                conn.rollback()
        with self._pool_lock:
            if self._closed:
                conn.close()
            else:
                self._idle.append(conn)
        if self._turn is not None:
            self._turn.release()

    def write_marker(self) -> tuple[int, ...]:
        """The database and WAL files' modification times and sizes, and SQLite's
        data_version, which changes whenever another connection committed.

        The files alone miss a commit that lands in the same clock tick as the last one
        into a WAL reused in place (same time, same size): the daemon then missed a
        `sebridge approve` until its heartbeat. So data_version is read whenever the
        files' times cannot tell: when they changed, or when the last reading was not
        FILE_TICK_NS after the newest file time (a commit since would then carry a later
        time). Otherwise unchanged files mean no commit, and the marker is two stat()s:
        3 us in a loop (with the pragma 6 us; in the live daemon, caches cold, the pragma
        was measured at 50 us a poll, issue 26). One caller's thread only (the daemon's
        poll thread: Daemon.quiet)."""
        if self.path == ":memory:":
            return ()
        files: list[int] = []
        for name in (self.path, f"{self.path}-wal"):
            try:
                stat = os.stat(name)
            except OSError:
                files += [0, 0]
                continue
            files += [stat.st_mtime_ns, stat.st_size]
        stats = tuple(files)
        if (
            stats == self._marker[:4]
            and self._version_read_at - max(stats[0], stats[2]) >= FILE_TICK_NS
        ):
            return self._marker
        # Taken before the read: a commit after the read is after this time.
        self._version_read_at = time.time_ns()
        self._marker = (*stats, self._data_version())
        return self._marker

    def _data_version(self) -> int:
        """PRAGMA data_version on a connection of the marker's own: a version is a
        connection's own count, so one connection must read every version. Its own
        connection sees this process's commits as another's too, which the
        files show anyway. A failure gives a value never seen before (counted as a
        write) and the next call reads again."""
        try:
            if self._marker_conn is None:
                self._marker_conn = sqlite3.connect(
                    self.path, timeout=1.0, isolation_level=None, check_same_thread=False
                )
            row = self._marker_conn.execute("PRAGMA data_version").fetchone()
            return int(row[0])
        except sqlite3.Error:
            self._version_read_at = 0  # read again next time
            self._marker_failures -= 1
            return self._marker_failures

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

    def hold_exclusive(self, agent: str) -> Held | None:
        """The flock on <db>.lock (none in memory), whatever the agent's name: one daemon
        per file; see store/lock.py."""
        return StoreLock.acquire(self.path)

    def close(self) -> None:
        """Close the connections (one in use is closed as it is given back)."""
        with self._pool_lock:
            self._closed = True
            idle, self._idle = self._idle, []
        for conn in idle:
            conn.close()
        if self._marker_conn is not None:
            self._marker_conn.close()

    def _begin(self, exclusive: bool) -> None:
        # IMMEDIATE takes the write lock up front: no upgrade deadlock with
        # another process writing at the same moment.
        self._writing.acquire()
        self._run("BEGIN IMMEDIATE")

    def _commit(self) -> None:
        try:
            self._run("COMMIT")
        finally:
            self._writing.release()

    def _rollback(self) -> None:
        try:
            with contextlib.suppress(sqlite3.Error):
                self._conn().rollback()
        finally:
            self._writing.release()

    def _run(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        translated = self._sql.get(sql)
        if translated is None:
            # No row locks in SQLite: the IMMEDIATE transaction holds the whole file.
            translated = self._sql[sql] = _ROW_LOCK.sub("", sql)
        conn: sqlite3.Connection = self._conn()
        # A write outside a transaction takes this process's turn too (its transaction's
        # writes hold it already).
        lone_write = not conn.in_transaction and written_table(sql) is not None
        try:
            if lone_write:
                with self._writing:
                    return conn.execute(translated, params)
            return conn.execute(translated, params)
        except sqlite3.Error as exc:
            raise StoreError(f"store error ({self.path}): {exc}") from exc

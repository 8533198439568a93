"""One writer per SQLite store: an OS lock on a file beside the database.

Two daemons on one SQLite file would both deliver every transition. The
daemon (`run`, `once`, `demo`) holds an exclusive `flock` on `<db>.lock`
for as long as its store is open; a second one fails at once, naming the
holder from what the lock file says (pid, host, since when). The kernel
drops the lock when the holder's process ends, however it ends (kill -9
included), so a crash never blocks a restart: no stale row, no pid to
check. The CLI's readers and `approve` take no lock and work beside the
daemon. An in-memory store needs none; a PostgreSQL store is shared by a
fleet of daemons instead (store/postgres.py).
"""

from __future__ import annotations

import fcntl
import json
import os
import socket

from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import StoreError, StoreInUseError

__all__ = ["StoreLock"]


class StoreLock:
    """The exclusive lock of one SQLite store file; release() or process exit frees it."""

    def __init__(self, fd: int, path: str) -> None:
        self._fd: int | None = fd
        self.path = path

    @classmethod
    def acquire(cls, db_path: str) -> StoreLock | None:
        """Lock the store at `db_path` (None for ":memory:"); StoreError names the holder."""
        if db_path == ":memory:":
            return None
        # The same file under another spelling (relative, through a symlink) gets the same lock.
        path = os.path.realpath(db_path) + ".lock"
        try:
            # Never truncate before holding the lock: the holder's details are in it.
            fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)
        except OSError as exc:
            raise StoreError(f"cannot open the store's lock file {path}: {exc.strerror}") from None
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = _holder(fd)
            os.close(fd)
            raise StoreInUseError(
                f"the store {db_path} is in use by another sebridge ({holder}): "
                "one daemon per SQLite store; stop it first (events, history, approve "
                "and check work beside it)"
            ) from None
        except OSError as exc:
            os.close(fd)
            raise StoreError(f"cannot lock {path}: {exc.strerror}") from None
        details = {
            "pid": os.getpid(),
            "host": socket.gethostname(),
            "since": utcnow().isoformat(timespec="seconds"),
        }
        os.ftruncate(fd, 0)
        os.pwrite(fd, (json.dumps(details) + "\n").encode(), 0)
        return cls(fd, path)

    def release(self) -> None:
        """Free the lock (idempotent). The file stays: removing it would race a new holder."""
        if self._fd is not None:
            fcntl.flock(self._fd, fcntl.LOCK_UN)
            os.close(self._fd)
            self._fd = None


def _holder(fd: int) -> str:
    """Who holds the lock, from what it wrote (it may not have written yet)."""
    try:
        details = json.loads(os.pread(fd, 4096, 0).decode() or "{}")
        pid, host, since = details["pid"], details["host"], details["since"]
    except (OSError, ValueError, KeyError, TypeError):
        return "its pid is not written yet"
    return f"pid {pid} on host {host}, since {since}"

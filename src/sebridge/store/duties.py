"""Single-holder duties: work that at most `slots` agents of a fleet do at once.

A Socket Mode connection (Slack allows a few per app), the Jira status
search, pruning history: done by every agent they would be done N times.
The daemon asks its store for a `Duties` board, registers the duties it has
and asks `held()` before doing one; `on_change` callbacks start and stop
what a duty runs. On SQLite (one daemon per file) every duty is simply held;
on PostgreSQL, `store/pg_duties.py` takes them with session advisory locks,
which the server frees when the holder's session ends (kill -9 included),
so another agent takes over within about a second.
"""

from __future__ import annotations

import threading
from collections.abc import Callable

__all__ = ["LOCK_KEY", "THIS_DATABASE", "Duties", "Duty", "advisory_key"]

# SQL: the bigint key of an advisory lock, from its row `l` of pg_locks (objsubid = 1).
LOCK_KEY = "((l.classid::bigint << 32) | l.objid::bigint)"
# SQL: the row `l` of pg_locks is this database's. An advisory lock belongs to one database
# but pg_locks lists the whole server's: without it, an agent of the same name on another
# database of the server (another fleet, a test) would look like ours.
THIS_DATABASE = "l.database = (SELECT oid FROM pg_database WHERE datname = current_database())"


def advisory_key(name: str) -> int:
    """A PostgreSQL advisory lock key for a name of ours: a positive 63-bit number."""
    import hashlib  # OpenSSL's: loaded at the first key (a fleet's duties), not at start

    return int.from_bytes(hashlib.sha256(name.encode()).digest()[:8]) >> 1


class Duty:
    """One duty: held by this agent or not; callbacks hear every change."""

    def __init__(self, name: str, slots: int) -> None:
        self.name = name
        self.slots = slots
        self._held = False
        self._callbacks: list[Callable[[bool], None]] = []
        self._lock = threading.Lock()

    def held(self) -> bool:
        """Whether this agent holds it now."""
        return self._held

    def on_change(self, callback: Callable[[bool], None]) -> None:
        """Call `callback(held)` whenever this agent takes or loses the duty."""
        with self._lock:
            self._callbacks.append(callback)

    def lock_keys(self) -> list[int]:
        """The advisory lock keys of its slots: positive 63-bit numbers from the name."""
        return [advisory_key(f"sebridge.duty.{self.name}#{slot}") for slot in range(self.slots)]

    def set_held(self, held: bool) -> None:
        """For the board: record a change and tell the callbacks (on the board's thread)."""
        with self._lock:
            if held == self._held:
                return
            self._held = held
            callbacks = list(self._callbacks)
        for callback in callbacks:
            callback(held)


class Duties:
    """The board for a store only one daemon uses (SQLite): every duty is held."""

    def __init__(self) -> None:
        self._duties: dict[str, Duty] = {}

    def duty(self, name: str, slots: int = 1) -> Duty:
        """The duty called `name` (registered on first use; call before start())."""
        if name not in self._duties:
            self._duties[name] = Duty(name, slots)
        return self._duties[name]

    def all(self) -> list[Duty]:
        """Every registered duty."""
        return list(self._duties.values())

    def start(self) -> None:
        """Take the duties: here, all of them at once."""
        for duty in self.all():
            duty.set_held(True)

    def stop(self) -> None:
        """Let every duty go."""
        for duty in self.all():
            duty.set_held(False)

"""The daemon's name on a shared PostgreSQL store: a session advisory lock on a connection of
its own, held for as long as the daemon runs, which also carries its heartbeat.

A second daemon of the same imds.vm_name would share the first's sightings (one's
empty document would mark the other's events gone), so a start whose name is held
is refused (StoreInUseError, naming the holder). Claims name their claimant, and a
claimant whose name is not held is taken for dead (postgres.claimant_gone).

The heartbeat's statement runs on the name's connection: every beat proves the session
that holds the name alive, at no extra round trip. A beat that fails (the connection
lost, or frozen past its deadline: store/pg_deadline.py) closes it; the next beat opens
another and takes the name again. The session that held it may outlive the loss on the
server's side (a frozen server or network: it ends when the server notices), so a name
still held then is most likely our own old session, not another daemon: the store says
so in one line and takes the name again at each heartbeat until it has it, then says
so once. The holder is waited for, never ended: it could be a live daemon of the same
name. Closing the store lets the name go first (pg_advisory_unlock_all), so a daemon
started again at once is never refused by its own ending session. See
docs/ARCHITECTURE.md, "Fleet mode".
"""

from __future__ import annotations

import contextlib
import logging
import threading
from collections.abc import Callable, Iterator
from datetime import UTC
from typing import Any

import psycopg

from sebridge.store.duties import LOCK_KEY, THIS_DATABASE, advisory_key
from sebridge.store.pg_deadline import BoundedConnection

__all__ = ["AgentName", "agent_key"]

log = logging.getLogger(__name__)

# Who holds an advisory lock (by key): for a message naming the other session.
_HOLDER = (
    "SELECT a.client_addr, a.backend_start FROM pg_locks l JOIN pg_stat_activity a "
    "ON a.pid = l.pid WHERE l.locktype = 'advisory' AND l.objsubid = 1 AND l.granted "
    f"AND {THIS_DATABASE} AND {LOCK_KEY} = %s"
)
# Letting go at close: never more than this for a server that no longer answers.
_RELEASE_SECONDS = 2.0


def agent_key(agent: str) -> int:
    """The advisory lock a daemon holds its name by (claimant_gone() derives it in SQL)."""
    return advisory_key(f"sebridge.agent.{agent}")


class AgentName:
    """The agent's name lock on its own connection: taking it, beating on it, letting go.

    Args:
        connect: opens a new autocommit connection (a BoundedConnection; raises psycopg.Error).
        location: the store, for messages (no password).
    """

    def __init__(self, connect: Callable[[], BoundedConnection], location: str) -> None:
        self.agent: str | None = None  # the daemon's name, once it asked to hold it
        self.held = False
        self._connect = connect
        self._location = location
        self._conn: BoundedConnection | None = None
        self._lock = threading.Lock()  # the heartbeat's thread, and close()

    def take(self, agent: str) -> bool:
        """At the start: try to hold `agent`; False when another session holds it
        (taken_by() says which). psycopg.Error when the store does not answer."""
        self.agent = agent
        with self._lock:
            conn = self._conn = self._connect()
            self.held = _try_lock(conn, agent_key(agent))
        return self.held

    @contextlib.contextmanager
    def session(self) -> Iterator[BoundedConnection]:
        """The name's connection, for the heartbeat's statement: opened again and the name
        taken again first when it was lost. Whatever fails in the block closes it, for
        the next beat to open another (psycopg.Error: the store does not answer)."""
        with self._lock:
            try:
                conn = self._conn
                if conn is None or conn.closed:
                    conn = self._conn = self._connect()
                    self._take_again(conn, reopened=True)
                elif not self.held:
                    self._take_again(conn, reopened=False)
                yield conn
            except BaseException:
                self._close()
                raise

    def release(self) -> None:
        """Let the name go, then close its connection (idempotent): the server frees a
        closed session's locks only as its backend exits, after this returns."""
        with self._lock:
            conn = self._conn
            if conn is not None and not conn.closed and self.held:
                conn.deadline = _RELEASE_SECONDS
                with contextlib.suppress(psycopg.Error):
                    conn.execute("SELECT pg_advisory_unlock_all()")
            self.held = False
            self._close()

    def taken_by(self) -> str:
        """Why a start was refused: the other daemon of this name, as far as we can tell."""
        where = _holder(self._conn, self.agent or "") if self._conn is not None else ""
        return (
            f"another sebridge daemon named {self.agent!r} is running on the store at "
            f"{self._location}{where}: give each VM's agent its own imds.vm_name"
        )

    def _take_again(self, conn: psycopg.Connection[Any], *, reopened: bool) -> None:
        """After a reconnection (`reopened`) or at a heartbeat while not held: try again;
        say when it is still held elsewhere (once per connection) and when it is ours."""
        if self.agent is None:
            return
        was = self.held
        self.held = _try_lock(conn, agent_key(self.agent))
        if self.held and not was:
            log.info("%s: this daemon holds its name %r again", self._location, self.agent)
        elif not self.held and (reopened or was):
            log.warning(
                "%s: this daemon's name %r is still held by an earlier session%s, most likely "
                "this daemon's own from before the connection was lost (the server ends it "
                "when it notices); taking the name again once it is free",
                self._location,
                self.agent,
                _holder(conn, self.agent),
            )

    def _close(self) -> None:
        conn, self._conn = self._conn, None
        if conn is not None:
            conn.close()


def _holder(conn: psycopg.Connection[Any], agent: str) -> str:
    """What names the session holding `agent`'s name: " (connected from ADDRESS since ...)"."""
    with contextlib.suppress(psycopg.Error):
        found = conn.execute(_HOLDER, (agent_key(agent),)).fetchone()
        if found is not None:
            where = f"from {found[0]}" if found[0] else "over the local socket"
            return f" (connected {where} since {found[1].astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC)"
    return ""


def _try_lock(conn: psycopg.Connection[Any], key: int) -> bool:
    row = conn.execute("SELECT pg_try_advisory_lock(%s)", (key,)).fetchone()
    return bool(row and row[0])

"""Store: everything sebridge remembers, as one repository per table (or act) over one database.

Each repository is given the database (and the repositories it writes through) in its
constructor; a write that spans tables (a tick's documents, an approval's outcome and its
announcement) is one transaction in the one repository that owns that act. See
docs/ARCHITECTURE.md, "Seams".
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from sebridge.store.agents import HEARTBEAT, STALE, Agents, AgentSeen
from sebridge.store.approvals import Approvals
from sebridge.store.connect import open_database
from sebridge.store.database import Held
from sebridge.store.documents import Documents
from sebridge.store.duties import Duties
from sebridge.store.events import Events
from sebridge.store.history import History
from sebridge.store.hook_retries import HookRetries
from sebridge.store.hook_runs import HookRuns
from sebridge.store.outbox import Outbox
from sebridge.store.schema_check import open_schema
from sebridge.store.settings import Settings
from sebridge.store.tallies import Tallies, read_tallies
from sebridge.store.transitions import NOTES, Transitions
from sebridge.store.vm_tags import VmTags

__all__ = ["HEARTBEAT", "NOTES", "STALE", "AgentSeen", "Store"]


class Store:
    """Everything sebridge remembers. Only this package runs SQL.

    Args:
        url: store.url: sqlite:////var/lib/sebridge/state.db, or
            postgresql://user@host/db (any number of agents: fleet mode).
        agent: who this process is (the VM name); claims and sightings carry it. A
            process that only reads and records (the CLI beside daemons) has none: "".
        exclusive: this process delivers (the daemon): hold the store against
            a second daemon on a SQLite file (its flock, store/lock.py), or
            against a second daemon of the same name on PostgreSQL (shared by
            a fleet: each agent its own name). StoreError names the holder.
        migrate: bring the schema up to date; False (a command that only reads):
            refuse an older one instead, writing nothing (schema_check.open_schema).
    """

    def __init__(
        self, url: str, agent: str = "local", *, exclusive: bool = False, migrate: bool = True
    ) -> None:
        self.db = db = open_database(url)
        self._lock: Held | None = None
        try:
            if exclusive:
                self._lock = db.hold_exclusive(agent)
            open_schema(db, migrate=migrate)
        except BaseException:
            self.close()
            raise
        self.agent = agent
        self.outbox = Outbox(db, agent)
        self.transitions = Transitions(db, self.outbox)
        self.events = Events(db, agent)
        self.approvals = Approvals(db, agent, self.transitions)
        self.documents = Documents(db, agent, self.transitions, self.approvals)
        self.agents = Agents(db, agent, self.outbox, self.approvals)
        self.hook_runs = HookRuns(db, self.transitions)
        self.hook_retries = HookRetries(db, self.events, self.transitions)
        self.history = History(db)
        self.settings = Settings(db)
        self.vm_tags = VmTags(db)

    def close(self) -> None:
        """Close the database, then free the lock."""
        self.db.close()
        if self._lock is not None:
            self._lock.release()

    def check_integrity(self) -> None:
        """Raise StoreError when SQLite finds a corrupt page (PRAGMA quick_check)."""
        self.db.check_integrity()

    # -- what the daemon and the CLI ask of the database itself --------------------------------

    @property
    def location(self) -> str:
        """What messages call the store: a file path, or the URL without its password."""
        return self.db.location

    @property
    def migrated_from(self) -> int | None:
        """The schema version opening found and moved (0: it created the tables); None:
        nothing was written (`sebridge check` says what it wrote)."""
        return self.db.migrated_from

    @property
    def idle_check_seconds(self) -> float:
        """How often an idle dispatcher looks at the outbox unwoken (a safety net)."""
        return self.db.IDLE_CHECK_SECONDS

    def write_marker(self) -> tuple[int, ...]:
        """Changes whenever another process commits a write; cheap enough for every poll."""
        return self.db.write_marker()

    def watch(self, on_write: Callable[[frozenset[str]], None]) -> bool:
        """Call `on_write(tables)` as other processes' commits are heard (PostgreSQL);
        False: compare write_marker() at each poll instead."""
        return self.db.watch(on_write)

    def on_commit(self, callback: Callable[[frozenset[str]], None]) -> None:
        """Call `callback(tables)` after each commit of this process, with the tables it
        wrote (Database.on_commit)."""
        self.db.on_commit(callback)

    def waiting_for(self) -> float:
        """Seconds the longest statement in flight has waited for an answer (/healthz)."""
        return self.db.waiting_for()

    def duties(self) -> Duties:
        """The single-holder duties' board (store/duties.py)."""
        return self.db.duties()

    def tallies(self, sinks: Sequence[str]) -> Tallies:
        """Events by state and pending outbox rows by sink, for /metrics (store/tallies.py)."""
        return read_tallies(self.db, sinks)

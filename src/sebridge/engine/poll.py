"""What a poll found and what a tick did with it (engine/daemon.py, engine/record.py).

A tick is two halves: Daemon.poll() asks IMDS and touches nothing else, and
Daemon.act() records what it found and wakes whoever acts on it, which may
wait on the store. `sebridge once` runs both in a row (Daemon.tick); the
daemon runs them on two threads (engine/record.py), so polling never waits on the
database. See docs/ARCHITECTURE.md, "Poll".
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from sebridge.model import Document, Transition

__all__ = ["PollState", "Polled", "TickResult"]


@dataclass
class PollState:
    """The last good poll and, while IMDS fails, why (for /healthz)."""

    last_ok: datetime | None = None
    error: str | None = None


@dataclass
class TickResult:
    """What one tick did (for `sebridge once`, tests and logs)."""

    polled: bool = False
    changed: bool = False
    transitions: list[Transition] = field(default_factory=list)
    approvals_done: int = 0
    error: str | None = None


@dataclass
class Polled:
    """One poll's outcome: the document (None: IMDS failed), when it was read, and the
    tick's result so far. `writes`: how many changes of the store's write marker the
    poll thread had counted when it looked after this poll (Daemon.quiet); None
    when nobody looked (`once`, tests: act() reads the marker itself)."""

    document: Document | None
    at: datetime
    result: TickResult
    writes: int | None = None

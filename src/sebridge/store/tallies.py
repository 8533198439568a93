"""Counts for /metrics: events by lifecycle state, undelivered outbox rows by sink.

One statement, one round trip: the scrape reads it off the daemon's threads
(web/store_gauges.py), so a slow database delays only the figures.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from sebridge.store.database import Database
from sebridge.store.outbox import PENDING

__all__ = ["Tallies", "read_tallies"]


@dataclass(frozen=True)
class Tallies:
    """Events the store holds, by state; pending outbox rows, by sink."""

    events: dict[str, int] = field(default_factory=dict)
    pending: dict[str, int] = field(default_factory=dict)


def read_tallies(db: Database, sinks: Sequence[str]) -> Tallies:
    """Count, for the sinks named (the pending rows' index serves the outbox's count)."""
    if not sinks:
        rows = db.all("SELECT 'e', state, COUNT(*) FROM events GROUP BY state")
    else:
        marks = ", ".join("?" for _ in sinks)
        rows = db.all(
            "SELECT 'e', state, COUNT(*) FROM events GROUP BY state UNION ALL "
            # The state as a literal: only then can the planner use the partial index.
            f"SELECT 'o', sink, COUNT(*) FROM outbox WHERE state = '{PENDING}' "
            f"AND sink IN ({marks}) GROUP BY sink",
            tuple(sinks),
        )
    events = {str(r[1]): int(r[2]) for r in rows if r[0] == "e"}
    pending = {str(r[1]): int(r[2]) for r in rows if r[0] == "o"}
    return Tallies(events, pending)

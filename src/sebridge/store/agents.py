"""The fleet's agents: each one's `documents` row says when it was last heard from.

A daemon beats every HEARTBEAT; an agent whose row is older than STALE is taken for dead
(its sightings no longer keep an event in the latest document), and one that stopped
cleanly is silent at once. See docs/ARCHITECTURE.md, "Readiness hooks" and "Fleet mode".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from sebridge.store.approvals import Approvals
from sebridge.store.codec import from_iso, iso
from sebridge.store.database import Database
from sebridge.store.outbox import Outbox

__all__ = ["HEARTBEAT", "STALE", "AgentSeen", "Agents"]

HEARTBEAT = timedelta(seconds=30)
STALE = 3 * HEARTBEAT


@dataclass(frozen=True)
class AgentSeen:
    """An agent the fleet knows: when it was last heard from (a document or a beat), and
    whether it stopped since (a clean shutdown: silent at once)."""

    agent: str
    seen_at: datetime
    stopped: bool


class Agents:
    """This agent's beats and stop, and the agents the fleet knows."""

    def __init__(self, db: Database, agent: str, outbox: Outbox, approvals: Approvals) -> None:
        self._db = db
        self._agent = agent
        self._outbox = outbox
        self._approvals = approvals

    def heartbeat(self, now: datetime) -> bool:
        """Say this agent is alive (its sightings count); the daemon calls it every HEARTBEAT.
        Returns, in the same round trip, whether work no NOTIFY announced may wait:
        outbox rows due that nobody claims (a dead agent's among them: nothing else
        tells the living of a death), an approval put back after a failed POST, or
        one whose claimant died or whose lease ended. On PostgreSQL it runs on the
        connection that holds the agent's name (Database.beat)."""
        at = iso(now)
        row = self._db.beat(
            "UPDATE documents SET seen_at = ?, stopped_at = NULL WHERE agent = ? RETURNING "
            f"{self._outbox.stranded()} OR {self._approvals.stranded()}",
            (at, self._agent, at, at, at),
        )
        return bool(row and row[0])

    def known(self, now: datetime, known_for: timedelta) -> dict[str, AgentSeen]:
        """The agents the fleet knows, by name: those heard from (a document or a beat)
        within `known_for` of `now`, each with when and whether it stopped since
        ([fleet] known_for; hooks/readiness.py tells live from silent)."""
        rows = self._db.all(
            "SELECT agent, seen_at, stopped_at FROM documents WHERE seen_at >= ?",
            (iso(now - known_for),),
        )
        return {str(r[0]): AgentSeen(str(r[0]), from_iso(r[1]), r[2] is not None) for r in rows}

    def stopped(self, now: datetime) -> None:
        """Say this agent stopped (a clean shutdown): the fleet takes it for silent at once;
        its row stays, so it stays known (its VMs' approvals are held, not released)."""
        self._db.execute(
            "UPDATE documents SET seen_at = ?, stopped_at = ? WHERE agent = ?",
            (iso(now), iso(now), self._agent),
        )

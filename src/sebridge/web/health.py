"""GET /healthz: is this daemon doing its job? 200 when it is, 503 when it is not.

Failing (503): IMDS has not answered for longer than `STALE_POLLS` poll
intervals (or never has), or the store cannot be written: the last tick
failed on it, or the store probe did (a write begun at most 2 s before, at
most one in flight, web/probe.py), or it has not answered within 2 s (a
stopped or frozen database is 503 within 2 s of being asked). /readyz asks
the same probe. The store part also names this agent and the single-holder
duties it holds (fleet mode). A sink that is
down is reported but does not fail the check: restarting the daemon would
not bring Slack back, and the outbox keeps what it owes.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import StoreError
from sebridge.web.probe import WAIT, Probe

if TYPE_CHECKING:
    from sebridge.engine.runner import Runner

__all__ = ["Health", "liveness", "store_probe"]

STALE_POLLS = 10  # a few failed polls are weather; ten in a row is an outage
MIN_STALE_SECONDS = 30.0


def liveness(runner: Runner) -> tuple[int, dict[str, Any]]:
    """GET /livez (the probe listener's): 200 while this process's main parts run (the
    poll loop and the recorder: Runner.stopped_parts), 503 naming those that do not.
    From the process alone, never the store or IMDS: a liveness probe restarts the
    daemon, which cures neither a database outage nor IMDS's (/readyz tells those)."""
    stopped = runner.stopped_parts()
    if stopped:
        return 503, {"live": False, "stopped": stopped}
    return 200, {"live": True}


def store_probe(runner: Runner, monotonic: Callable[[], float] = time.monotonic) -> Probe:
    """A write to the store (one row, `health_probe`) on demand, for /healthz and /readyz:
    its outcome is the runner's outage too, so the log says an outage the probe found,
    and its end."""
    store = runner.store

    def write() -> str | None:
        try:
            store.settings.remember("health_probe", utcnow().isoformat())
        except StoreError as exc:
            runner.outage.failed(exc)
            return str(exc)
        runner.outage.answered()
        return None

    return Probe("the store", write, monotonic=monotonic)


def store_finding(runner: Runner, probe: Probe) -> str | None:
    """Why the store is not usable now, or None: a statement in flight that has waited
    past the probe's wait, the probe's own finding, else the last tick's failure."""
    stuck = runner.store_waiting()
    if stuck > WAIT:  # a statement in flight (a tick's, a sink's) waits already
        return f"the store has not answered a statement for {stuck:.0f} s"
    # The probe first: a write that answers ends an outage a tick had found.
    return probe.finding() or runner.store_error


class Health:
    """Builds the /healthz answer from the running daemon's state."""

    def __init__(
        self,
        runner: Runner,
        poll_interval: float,
        clock: Clock = utcnow,
        store: Probe | None = None,
    ) -> None:
        self._runner = runner
        self._daemon = runner.daemon
        self._dispatcher = runner.parts.dispatcher
        self._stale_after = max(MIN_STALE_SECONDS, STALE_POLLS * poll_interval)
        self._clock = clock
        self._store = store or store_probe(runner)

    def report(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body)."""
        now = self._clock()
        poll = self._daemon.poll_state
        age = (now - poll.last_ok).total_seconds() if poll.last_ok else None
        imds_ok = age is not None and age <= self._stale_after
        store_error = store_finding(self._runner, self._store)
        duties = self._runner.duties
        sinks = {
            name: {
                "state": o.state,
                "at": o.at.isoformat(),
                **({"error": o.error} if o.error else {}),
            }
            for name, o in self._dispatcher.outcomes().items()
        }
        ok = imds_ok and store_error is None
        body: dict[str, Any] = {
            "status": "ok" if ok else "failing",
            "imds": {
                "reachable": poll.error is None and poll.last_ok is not None,
                "last_good_poll_age_seconds": round(age, 3) if age is not None else None,
                **({"error": poll.error} if poll.error else {}),
            },
            "store": {
                "writable": store_error is None,
                **({"error": store_error} if store_error else {}),
                # Fleet mode: who this agent is and which single-holder duties it holds.
                "agent": self._runner.store.agent,
                "duties": sorted(d.name for d in duties.all() if d.held()) if duties else [],
            },
            "sinks": sinks,
        }
        return (200 if ok else 503), body

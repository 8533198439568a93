"""GET /healthz: is this daemon doing its job? 200 when it is, 503 when it is not.

Failing (503): IMDS has not answered for longer than `STALE_POLLS` poll
intervals (or never has), or the store cannot be written (the last tick
failed on it, or the probe every 30 s did, or has not answered within
PROBE_WAIT: /healthz never waits longer on a frozen database). The store part also names this
agent and the single-holder duties it holds (fleet mode). A sink that is
down is reported but does not fail the check: restarting the daemon would
not bring Slack back, and the outbox keeps what it owes.
"""

from __future__ import annotations

import threading
import time
from typing import TYPE_CHECKING, Any

from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import StoreError

if TYPE_CHECKING:
    from sebridge.engine.runner import Runner

__all__ = ["Health"]

STALE_POLLS = 10  # a few failed polls are weather; ten in a row is an outage
MIN_STALE_SECONDS = 30.0
STORE_PROBE_EVERY = 30.0  # seconds between real writes to the store (each is an fsync)
PROBE_WAIT = 2.0  # seconds /healthz waits for that write before it says the store is away


class Health:
    """Builds the /healthz answer from the running daemon's state."""

    def __init__(self, runner: Runner, poll_interval: float, clock: Clock = utcnow) -> None:
        self._runner = runner
        self._daemon = runner.daemon
        self._stale_after = max(MIN_STALE_SECONDS, STALE_POLLS * poll_interval)
        self._clock = clock
        self._lock = threading.Lock()
        self._store_checked = -STORE_PROBE_EVERY
        self._store_error: str | None = None
        self._probe: threading.Thread | None = None

    def report(self) -> tuple[int, dict[str, Any]]:
        """(HTTP status, JSON body)."""
        now = self._clock()
        poll = self._daemon.poll_state
        age = (now - poll.last_ok).total_seconds() if poll.last_ok else None
        imds_ok = age is not None and age <= self._stale_after
        # A tick that could not use the store says so at once; the probe every 30 s.
        store_error = self._runner.store_error or self._probe_store()
        duties = self._runner.duties
        sinks = {
            name: {
                "state": o.state,
                "at": o.at.isoformat(),
                **({"error": o.error} if o.error else {}),
            }
            for name, o in self._daemon.dispatcher.outcomes().items()
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
                "agent": self._daemon.store.agent,
                "duties": sorted(d.name for d in duties.all() if d.held()) if duties else [],
            },
            "sinks": sinks,
        }
        return (200 if ok else 503), body

    def _probe_store(self) -> str | None:
        """The probe's finding; a write every STORE_PROBE_EVERY on a thread of its own, waited
        for at most PROBE_WAIT: a store that does not answer never holds /healthz up."""
        stuck = self._daemon.store.db.waiting_for()
        if stuck > PROBE_WAIT:  # a statement in flight (a tick's, a sink's) waits already
            return f"the store has not answered a statement for {stuck:.0f} s"
        with self._lock:
            probe = self._probe
            if probe is None or not probe.is_alive():
                if time.monotonic() - self._store_checked < STORE_PROBE_EVERY:
                    return self._store_error
                self._store_checked = time.monotonic()
                probe = self._probe = threading.Thread(
                    target=self._write_probe, name="health-probe", daemon=True
                )
                probe.start()
        probe.join(max(0.0, self._store_checked + PROBE_WAIT - time.monotonic()))
        if probe.is_alive():
            waited = time.monotonic() - self._store_checked
            return f"the store has not answered a write for {waited:.0f} s"
        return self._store_error

    def _write_probe(self) -> None:
        try:
            self._daemon.store.remember("health_probe", self._clock().isoformat())
        except StoreError as exc:
            self._store_error = str(exc)
            self._runner.outage.failed(exc)
            return
        self._store_error = None
        self._runner.outage.answered()

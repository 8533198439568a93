"""A check that /healthz or /readyz asks for: fresh, one at a time, never waited on for long.

A probe runs its check (a write to the store, a GET from IMDS) on a thread of its own,
at most one in flight. Its finding is reused while the check that produced it began at
most FRESH seconds ago, so many concurrent probes cost one check per FRESH / 2 at most.
Once half of that freshness is gone, the first asker starts the next check in the
background and is answered from the finding it has: a prober that asks steadily never
waits for a check, even when checks are slow (a busy daemon, bench/metrics_storm.py).
Only a finding older than FRESH makes the asker wait for the check, at most WAIT seconds
from its start: a check still running then (a frozen database, a silent IMDS) is a
finding of its own, "has not answered for N s". So an answer is never older than
FRESH + WAIT, whatever is asked how often. See docs/ARCHITECTURE.md, "Metrics and probes".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["FRESH", "WAIT", "Probe"]

FRESH = 2.0  # seconds a finding is reused
WAIT = 2.0  # seconds an asker waits for a check in flight


class Probe:
    """Runs `check` on demand: None when the thing answered, else why not.

    Args:
        what: what is checked, for the finding of a check that hangs ("the store").
        check: one attempt; returns None or the problem, never raises. It runs on a
            thread named `probe` (docs/ARCHITECTURE.md, "Threads").
        monotonic: the clock freshness is measured on (tests move it).
    """

    def __init__(
        self,
        what: str,
        check: Callable[[], str | None],
        *,
        fresh: float = FRESH,
        wait: float = WAIT,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._what = what
        self._check = check
        self._fresh = fresh
        self._wait = wait
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._started = 0.0  # when the latest check began
        self._finding: str | None = None
        self._found_at: float | None = None  # when the check that found it began

    def finding(self) -> str | None:
        """None when the latest check (at most FRESH old, else a new one) passed."""
        with self._lock:
            now = self._monotonic()
            thread = self._thread
            age = float("inf") if self._found_at is None else now - self._found_at
            if not (thread is not None and thread.is_alive()) and age > self._fresh / 2:
                self._started = now
                thread = self._thread = threading.Thread(
                    target=self._run, args=(now,), name="probe", daemon=True
                )
                thread.start()
            if age <= self._fresh:
                return self._finding  # fresh enough: a renewal, if any, runs on its own
            started = self._started
        assert thread is not None
        # Real time for the wait: the deadline counts from when the check began.
        thread.join(max(0.0, self._wait - (self._monotonic() - started)))
        if thread.is_alive():  # waited for WAIT at least, whatever the clock says
            waited = max(self._wait, self._monotonic() - started)
            return f"{self._what} has not answered for {waited:.0f} s"
        with self._lock:
            return self._finding

    def _run(self, started: float) -> None:
        finding = self._check()
        with self._lock:
            self._finding, self._found_at = finding, started

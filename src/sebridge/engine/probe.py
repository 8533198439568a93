"""A check that /healthz or /readyz asks for: fresh, one at a time, never waited on for long.

A probe runs its check (a write to the store, a GET from IMDS) on a thread of its own,
at most one in flight. Its finding is reused while the check that produced it began at
most FRESH seconds ago, so many concurrent probes cost one check per FRESH; an older
one starts a new check. The asker waits for the check at most WAIT seconds from its
start: a check still running then (a frozen database, a silent IMDS) is a finding of its
own, "has not answered for N s". So an answer is never older than FRESH + WAIT, whatever
is asked how often. See docs/ARCHITECTURE.md, "Metrics and probes".
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
        check: one attempt; returns None or the problem, never raises.
        thread: the name of the check's thread (docs/ARCHITECTURE.md, "Threads").
        monotonic: the clock freshness is measured on (tests move it).
    """

    def __init__(
        self,
        what: str,
        check: Callable[[], str | None],
        *,
        thread: str,
        fresh: float = FRESH,
        wait: float = WAIT,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._what = what
        self._check = check
        self._thread_name = thread
        self._fresh = fresh
        self._wait = wait
        self._monotonic = monotonic
        self._lock = threading.Lock()
        self._thread: threading.Thread | None = None
        self._started = 0.0
        self._finding: str | None = None
        self._done = False

    def finding(self) -> str | None:
        """None when the latest check (at most FRESH old, else a new one) passed."""
        with self._lock:
            thread = self._thread
            running = thread is not None and thread.is_alive()
            if not running and not (self._done and self._age() <= self._fresh):
                self._started, self._done = self._monotonic(), False
                thread = self._thread = threading.Thread(
                    target=self._run, name=self._thread_name, daemon=True
                )
                thread.start()
            started = self._started
        assert thread is not None
        # Real time for the wait: the deadline counts from when the check began.
        thread.join(max(0.0, self._wait - (self._monotonic() - started)))
        if thread.is_alive():  # waited for WAIT at least, whatever the clock says
            waited = max(self._wait, self._monotonic() - started)
            return f"{self._what} has not answered for {waited:.0f} s"
        return self._finding

    def _age(self) -> float:
        return self._monotonic() - self._started

    def _run(self) -> None:
        finding = self._check()
        with self._lock:
            self._finding, self._done = finding, True

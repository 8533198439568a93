"""Waitress's task queue, with /healthz and /readyz served before the requests waiting.

Waitress hands each complete request to its threads in arrival order. A crowd of
requests that are each cheap (a thousand scrapes of /metrics, answered from one
collection: web/metrics_page.py) still makes a probe that comes after them wait
for all of them: about 200 ms on a busy machine, and an orchestrator's probe
times out at one second. Here a connection whose next request is a probe goes to
the front of the queue: it waits for a thread, never for the crowd. Waitress
also warns "Task queue depth is N" at every request queued beyond its idle
threads, thousands of lines in such a crowd; here that is said at most once a
minute. See docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

import logging
import time
from typing import Any

from waitress.task import ThreadedTaskDispatcher

__all__ = ["PROBE_PATHS", "ProbesFirst"]

log = logging.getLogger(__name__)

PROBE_PATHS = frozenset(("/healthz", "/readyz"))
QUEUE_SAID_EVERY = 60.0  # seconds between two warnings of a queue deeper than the threads


class ProbesFirst(ThreadedTaskDispatcher):  # type: ignore[misc]  # waitress has no types
    """Waitress's thread pool; a channel whose next request is a probe is queued first."""

    _queue_said = float("-inf")

    def add_task(self, task: Any) -> None:
        """Queue `task` (a channel with a complete request; on waitress's loop thread)."""
        with self.lock:
            if _probe(task):
                self.queue.appendleft(task)
            else:
                self.queue.append(task)
            self.queue_cv.notify()
            waiting = len(self.queue) - (len(self.threads) - self.stop_count - self.active_count)
        if waiting > 0:
            now = time.monotonic()
            if now - self._queue_said >= QUEUE_SAID_EVERY:
                self._queue_said = now
                log.warning("%d HTTP requests wait for a thread (probes go first)", waiting)


def _probe(task: Any) -> bool:
    """Whether the channel's next request is a probe (the path waitress parsed)."""
    requests: list[Any] = getattr(task, "requests", None) or []
    return bool(requests) and getattr(requests[0], "path", "") in PROBE_PATHS

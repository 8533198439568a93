"""The daemon's scheduler: the poll on a thread of its own, and each job on one of its own.

The poll runs on the `poll` thread, a plain loop: the first poll at once, never two at
once, a late one run at once and not repeated. Each job (the heartbeat, pruning, the
integrations' jobs such as the Jira search) runs on a worker of its own
(kernel/worker.py, `job-<name>`), asleep until its next turn, one interval after its last
run ended: a slow Jira search never delays a poll or a heartbeat. (APScheduler did this
until issue 26: its bookkeeping cost about 170 us of CPU per poll, a third of an
unchanged poll, and its import 20 ms of the start.) The stop has a bound: a poll waiting
for IMDS (up to 120 s on the first call) is cut short, and a job still running at the end
is left behind on its daemon thread. See docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

from sebridge.engine.services import Job
from sebridge.kernel.clock import utcnow
from sebridge.kernel.worker import Worker

__all__ = ["Schedule"]

log = logging.getLogger("sebridge.daemon")

# At least this long for the scheduler's stop, even with no grace: an idle one needs a moment.
LEAST_STOP = 0.5


class Schedule:
    """The scheduler: `poll` every `interval` seconds, and jobs added with every().

    Args:
        interrupt: cuts a call waiting for IMDS short (ImdsClient.interrupt), at stop.
    """

    def __init__(
        self, poll: Callable[[], None], interval: float, interrupt: Callable[[], None]
    ) -> None:
        self._poll = poll
        self._interval = interval
        self._interrupt = interrupt
        self._stopping = threading.Event()
        self._poller = threading.Thread(target=self._polling, name="poll", daemon=True)
        self._jobs: list[Worker] = []

    def every(self, job: Job) -> None:
        """Run `job` every job.interval seconds from its start, the first one interval after
        start() (its failures logged: it runs again at its next turn). Before start()."""
        self._jobs.append(Worker(f"job-{job.name}", _Turns(job).round, logger=log))

    def start(self) -> None:
        """Poll (the first at once) and run the jobs from now on."""
        self._poller.start()
        for worker in self._jobs:
            worker.start()

    def stop(self, timeout: float = 0.0) -> bool:
        """Cut a poll waiting for IMDS short and stop, waiting at least LEAST_STOP and at
        most `timeout` seconds; True when the scheduler's threads ended."""
        deadline = time.monotonic() + max(LEAST_STOP, timeout)
        self._stopping.set()
        self._interrupt()
        for worker in self._jobs:
            worker.stop()  # told at once; waited for below
        if self._poller.is_alive():
            self._poller.join(max(0.0, deadline - time.monotonic()))
        ended = not self._poller.is_alive()
        for worker in self._jobs:
            ended = worker.join(deadline - time.monotonic()) and ended
        if not ended:
            log.warning("a job is still running at the end of the shutdown grace; left behind")
        return ended

    def _polling(self) -> None:
        due = time.monotonic()
        while not self._stopping.is_set():
            try:
                self._poll()
            except Exception:  # a bug must not stop the polling
                log.exception("poll failed; polling goes on")
            now = time.monotonic()
            # A poll later than its turn runs at once, once (never to catch up).
            due = max(due + self._interval, now)
            self._stopping.wait(due - now)


class _Turns:
    """A job as a worker's rounds: the first round only sets the first turn."""

    def __init__(self, job: Job) -> None:
        self._run = _logged(job)
        self._every = timedelta(seconds=job.interval)
        self._started = False

    def round(self) -> datetime:
        if self._started:
            self._run()
        self._started = True
        return utcnow() + self._every


def _logged(job: Job) -> Callable[[], None]:
    """The job, its failures logged: it runs again at its next turn."""

    def run() -> None:
        try:
            job.run()
        except Exception:
            log.exception("%s failed; it runs again in %gs", job.name, job.interval)

    return run

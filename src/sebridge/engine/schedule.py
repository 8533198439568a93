"""The daemon's scheduler: the poll on a thread of its own, other jobs on a pool.

The poll runs on the `poll` thread, a plain loop (first poll at once, never two at
once, a late one run at once and not repeated: what APScheduler's coalescing interval
job did, without its bookkeeping, measured at about 170 us of CPU per poll, a third of
an unchanged poll's cost). The heartbeat, pruning and the integrations' jobs run as
APScheduler jobs on a small pool beside it (a slow Jira search never delays a poll).
Its stop has a bound: a poll waiting for IMDS (up to 120 s on the first call) is cut
short, and a job still running at the end is left behind on its daemon thread. See
docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

import contextlib
import logging
import threading
import time
from collections.abc import Callable
from datetime import UTC
from typing import TYPE_CHECKING

from sebridge.engine.services import Job

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

__all__ = ["POOL_THREADS", "Schedule"]

log = logging.getLogger("sebridge.daemon")

POOL_THREADS = 4  # heartbeat, pruning and integration jobs (never two runs of one at once)
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
        # Held until _stop_polling() lets go of it: the poll loop waits for its next turn
        # by trying to take it, one call (Event.wait builds a Condition's waiter each
        # time: about 12 us more of CPU a wait, 2% of an unchanged poll's, issue 26).
        self._wake = threading.Lock()
        self._wake.acquire()
        self._poller = threading.Thread(target=self._polling, name="poll", daemon=True)
        self._polled = threading.Event()  # the first poll is over
        # Built by start_jobs(), once the first poll is over: importing and building
        # APScheduler is about 100 ms of CPU on a slow core, no job is due before its
        # first interval has passed, and the first poll is due at once.
        self._scheduler: BackgroundScheduler | None = None
        self._jobs: list[Job] = []

    def every(self, job: Job) -> None:
        """Run `job` on the pool every job.interval seconds (its failures logged: it runs
        again at its next turn); the first run one interval after start_jobs()."""
        if self._scheduler is None:
            self._jobs.append(job)
        else:
            _add(self._scheduler, job)

    def start(self) -> None:
        """Poll, the first at once. The jobs run once start_jobs() was called."""
        self._poller.start()

    def run_once(self) -> None:
        """One poll on the caller's thread."""
        self._poll()

    @property
    def polling(self) -> bool:
        """Whether the `poll` thread polls: started, not stopping, not ended (for /livez)."""
        return self._poller.is_alive() and not self._stopping.is_set()

    def first_poll(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the first poll to be over; True once it is."""
        return self._polled.wait(timeout)

    def start_jobs(self) -> None:
        """Run the jobs from now on (each first one interval from now). On a failure the
        polling stops too and the error is raised."""
        try:
            self._scheduler = _scheduler()
            for job in self._jobs:
                _add(self._scheduler, job)
            self._scheduler.start()
        except BaseException:  # not started, so never stopped: the poll ends here
            self._stop_polling()
            self._interrupt()
            raise

    def stop(self, timeout: float = 0.0) -> bool:
        """Cut a poll waiting for IMDS short and stop, waiting at least LEAST_STOP and at
        most `timeout` seconds; True when the scheduler's threads ended."""
        deadline = time.monotonic() + max(LEAST_STOP, timeout)
        self._stop_polling()
        self._interrupt()
        # The scheduler's shutdown waits for nothing of ours, but may for its pool: waited
        # for on a thread of its own, so the wait has a bound.
        stopper = None
        if self._scheduler is not None and self._scheduler.running:
            stopper = threading.Thread(
                target=self._scheduler.shutdown, name="scheduler-stop", daemon=True
            )
            stopper.start()
        if self._poller.is_alive():
            self._poller.join(max(0.0, deadline - time.monotonic()))
        if stopper is not None:
            stopper.join(max(0.0, deadline - time.monotonic()))
        left = self._poller.is_alive() or (stopper is not None and stopper.is_alive())
        if left:
            log.warning("a job is still running at the end of the shutdown grace; left behind")
        return not left

    def _polling(self) -> None:
        due = time.monotonic()
        while not self._stopping.is_set():
            try:
                self._poll()
            except Exception:  # a bug must not stop the polling
                log.exception("poll failed; polling goes on")
            if not self._polled.is_set():  # a read; set() takes a lock
                self._polled.set()
            now = time.monotonic()
            # A poll later than its turn runs at once, once (never to catch up).
            due = max(due + self._interval, now)
            self._wake.acquire(timeout=due - now)  # taken at once once stopping

    def _stop_polling(self) -> None:
        self._stopping.set()
        with contextlib.suppress(RuntimeError):  # let go of already (a second stop)
            self._wake.release()


def _scheduler() -> BackgroundScheduler:
    """APScheduler's scheduler of the jobs, not started, its pool's threads named."""
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    return BackgroundScheduler(
        timezone=UTC,
        executors={
            # Named: each thread of the daemon is a row of the thread table.
            "pool": ThreadPoolExecutor(
                POOL_THREADS, pool_kwargs={"thread_name_prefix": "scheduler-pool"}
            ),
        },
    )


def _add(scheduler: BackgroundScheduler, job: Job) -> None:
    scheduler.add_job(
        _logged(job),
        "interval",
        seconds=job.interval,
        max_instances=1,
        coalesce=True,
        id=job.name,
        executor="pool",
    )


def _logged(job: Job) -> Callable[[], None]:
    """The job, its failures logged: it runs again at its next turn."""

    def run() -> None:
        try:
            job.run()
        except Exception:
            log.exception("%s failed; it runs again in %gs", job.name, job.interval)

    return run

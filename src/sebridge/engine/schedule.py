"""The daemon's scheduler: APScheduler runs the timed work (the poll, the heartbeat,
pruning, the integrations' jobs).

The poll is an APScheduler interval job (never two at once: max_instances=1; a
late one runs once, not to catch up: coalesce) run on the `poll` thread, an
executor of its own, so a slow Jira search never delays a poll. The first poll
goes on that thread at start, before APScheduler is imported or built (about
100 ms of CPU on a slow core, issue 26): the first GET leaves at once; the
scheduler takes over one interval after it began. The heartbeat, pruning and
the integrations' jobs run on a small pool beside it. Its stop has a bound: a
poll waiting for IMDS (up to 120 s on the first call) is cut short, and a job
still running at the end is left behind on its thread. See
docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

import logging
import queue
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Any

from sebridge.model.services import Job

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

__all__ = ["POOL_THREADS", "Schedule"]

log = logging.getLogger("sebridge.daemon")

POOL_THREADS = 4  # heartbeat, pruning and integration jobs (never two runs of one at once)
# At least this long for the scheduler's stop, even with no grace: an idle one needs a moment.
LEAST_STOP = 0.5
POLL = "poll"  # the poll job's id, and its executor's


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
        self._thread = _PollThread()
        self._polled = threading.Event()  # the first poll is over
        self._first_at = 0.0  # when the first poll began (time.monotonic())
        # Built by start_jobs(), once the first poll is over (or FIRST_POLL_WAIT passed).
        self._scheduler: BackgroundScheduler | None = None
        self._jobs: list[Job] = []
        self._running = _InFlight()  # jobs running now (stop waits for them, bounded)

    def every(self, job: Job) -> None:
        """Run `job` on the pool every job.interval seconds (its failures logged: it runs
        again at its next turn); the first run one interval after start_jobs()."""
        if self._scheduler is None:
            self._jobs.append(job)
        else:
            _add(self._scheduler, job, self._running)

    def start(self) -> None:
        """Poll, the first at once (on the `poll` thread). The following polls and the jobs
        run once start_jobs() was called."""
        self._first_at = time.monotonic()
        self._thread.start()
        self._thread.submit(self._first_poll)

    def run_once(self) -> None:
        """One poll on the caller's thread."""
        self._poll()

    @property
    def polling(self) -> bool:
        """Whether polls run: started, not stopping, the `poll` thread alive (for /livez)."""
        return self._thread.alive and not self._stopping.is_set()

    def first_poll(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the first poll to be over; True once it is."""
        return self._polled.wait(timeout)

    def start_jobs(self) -> None:
        """Hand the polls to APScheduler (the next one interval after the first began) and
        run the jobs from now on (each first one interval from now). On a failure the
        polling stops too and the error is raised."""
        try:
            self._scheduler = _scheduler(self._thread)
            late = max(0.0, self._first_at + self._interval - time.monotonic())
            self._scheduler.add_job(
                self._polling,
                "interval",
                seconds=self._interval,
                next_run_time=datetime.now(UTC) + timedelta(seconds=late),
                max_instances=1,
                coalesce=True,
                misfire_grace_time=None,
                id=POLL,
                name=POLL,
                executor=POLL,
            )
            for job in self._jobs:
                _add(self._scheduler, job, self._running)
            self._scheduler.start()
        except BaseException:  # not started, so never stopped: the poll ends here
            self._stopping.set()
            self._thread.stop()
            self._interrupt()
            raise

    def stop(self, timeout: float = 0.0) -> bool:
        """Cut a poll waiting for IMDS short and stop, waiting at least LEAST_STOP and at
        most `timeout` seconds for the jobs running; True when none runs any more."""
        deadline = time.monotonic() + max(LEAST_STOP, timeout)
        self._stopping.set()
        if self._scheduler is not None and self._scheduler.running:
            self._scheduler.shutdown(wait=False)  # no job starts from now on
        self._thread.stop()
        self._interrupt()
        ended = self._running.wait_idle(deadline) and self._thread.join(deadline)
        if not ended:
            log.warning("a job is still running at the end of the shutdown grace; left behind")
        return ended

    def _first_poll(self) -> None:
        try:
            self._polling()
        finally:
            self._polled.set()

    def _polling(self) -> None:
        if self._stopping.is_set():
            return
        with self._running:
            try:
                self._poll()
            except Exception:  # a bug must not stop the polling
                log.exception("poll failed; polling goes on")


class _InFlight:
    """How many jobs run now; stop() waits, bounded, until none does."""

    def __init__(self) -> None:
        self._count = 0
        self._idle = threading.Condition()

    def __enter__(self) -> None:
        with self._idle:
            self._count += 1

    def __exit__(self, *exc: object) -> None:
        with self._idle:
            self._count -= 1
            self._idle.notify_all()

    def wait_idle(self, deadline: float) -> bool:
        with self._idle:
            return self._idle.wait_for(
                lambda: self._count == 0, max(0.0, deadline - time.monotonic())
            )


class _PollThread:
    """The `poll` thread: runs what it is given, in order, one at a time (a daemon thread:
    a poll IMDS never answers cannot keep the process from exiting)."""

    def __init__(self) -> None:
        self._work: queue.SimpleQueue[Callable[[], object] | None] = queue.SimpleQueue()
        self._thread = threading.Thread(target=self._run, name=POLL, daemon=True)

    def start(self) -> None:
        self._thread.start()

    def submit(self, work: Callable[[], object]) -> None:
        self._work.put(work)

    def stop(self) -> None:
        self._work.put(None)  # after what was given: nothing new is given at stop

    @property
    def alive(self) -> bool:
        return self._thread.is_alive()

    def join(self, deadline: float) -> bool:
        if self._thread.ident is not None:
            self._thread.join(max(0.0, deadline - time.monotonic()))
        return not self._thread.is_alive()

    def _run(self) -> None:
        while (work := self._work.get()) is not None:
            work()


def _scheduler(thread: _PollThread) -> BackgroundScheduler:
    """APScheduler's scheduler, not started: the pool's threads named, the poll on its own
    thread, and its "skipped" line for a poll still running left out (the poll says what
    IMDS does, once)."""
    from apscheduler.executors.base import BaseExecutor
    from apscheduler.executors.pool import ThreadPoolExecutor
    from apscheduler.schedulers.background import BackgroundScheduler

    class PollExecutor(BaseExecutor):  # type: ignore[misc]
        """Runs the poll job on the `poll` thread: its function alone (it logs its own
        failures and is never late: no misfire to tell), then the job's instance is over."""

        def _do_submit_job(self, job: Any, run_times: list[datetime]) -> None:
            def run() -> None:
                try:
                    job.func()
                finally:
                    self._run_job_success(job.id, [])

            thread.submit(run)

    logging.getLogger("apscheduler.scheduler").addFilter(_StillPolling())
    return BackgroundScheduler(
        timezone=UTC,
        executors={
            # Named: each thread of the daemon is a row of the thread table.
            "pool": ThreadPoolExecutor(
                POOL_THREADS, pool_kwargs={"thread_name_prefix": "scheduler-pool"}
            ),
            POLL: PollExecutor(),
        },
    )


class _StillPolling(logging.Filter):
    """Leaves out APScheduler's warning that the poll was skipped while the last one runs
    (IMDS slow to answer): the poll says what IMDS does, once."""

    def filter(self, record: logging.LogRecord) -> bool:
        args = record.args if isinstance(record.args, tuple) else ()
        return not (args and getattr(args[0], "id", None) == POLL and "skipped" in record.msg)


def _add(scheduler: BackgroundScheduler, job: Job, running: _InFlight) -> None:
    scheduler.add_job(
        _logged(job, running),
        "interval",
        seconds=job.interval,
        max_instances=1,
        coalesce=True,
        id=job.name,
        executor="pool",
    )


def _logged(job: Job, running: _InFlight) -> Callable[[], None]:
    """The job, its failures logged: it runs again at its next turn."""

    def run() -> None:
        with running:
            try:
                job.run()
            except Exception:
                log.exception("%s failed; it runs again in %gs", job.name, job.interval)

    return run

"""The daemon's life from first poll to exit (`sebridge run`): threads, scheduler, signals, stop.

The poll runs as an APScheduler interval job on the scheduler's own thread
(first poll at once, never two at once); the heartbeat, pruning and the
integrations' jobs run on a small pool beside it (a slow Jira search never
delays a poll), single-holder ones only on the agent that holds their duty.
The carrier (approvals) and the dispatcher (one worker per sink) have
threads of their own; services (the HTTP server, Slack's Socket Mode) start
last and stop first. SIGTERM/SIGINT stop it all within the shutdown grace,
whatever IMDS or a sink does. See docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, timedelta
from typing import TYPE_CHECKING

from sebridge.engine.daemon import Daemon
from sebridge.engine.record import Recorder
from sebridge.engine.services import Job, Service, SingleHolder
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import StoreError
from sebridge.kernel.outage import StoreOutage
from sebridge.store.duties import Duties, Duty
from sebridge.store.store import HEARTBEAT

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

__all__ = ["Runner", "stop_signals_exit"]

log = logging.getLogger("sebridge.daemon")

POOL_THREADS = 4  # heartbeat, pruning and integration jobs (never two runs of one at once)


class Runner:
    """Runs a Daemon until it is told to stop.

    Args:
        services: run beside the polling, started in order, stopped in reverse.
        jobs: integrations' scheduler jobs.
        retention: how long history of gone events is kept.
    """

    def __init__(
        self,
        daemon: Daemon,
        *,
        services: Sequence[Service] = (),
        jobs: Sequence[Job] = (),
        poll_interval: float = 1.0,
        shutdown_grace: float = 5.0,
        retention: timedelta = timedelta(days=90),
        heartbeat: timedelta = HEARTBEAT,
    ) -> None:
        self.daemon = daemon
        self._services = list(services)
        self._jobs = list(jobs)
        self._poll_interval = poll_interval
        self._shutdown_grace = shutdown_grace
        self._retention = retention
        self._heartbeat_every = heartbeat
        self.outage = StoreOutage()  # whether the store answers, said once each way
        # The tick's second half, on a thread of its own: the poll never waits on the store.
        self._recorder = Recorder(daemon.act, self.outage)
        self.duties: Duties | None = None  # the board, while run() runs

    @property
    def store_error(self) -> str | None:
        """Why the store does not answer, while it does not (for /healthz, /readyz)."""
        return self.outage.error

    @property
    def services(self) -> tuple[Service, ...]:
        """What runs beside the polling, in start order."""
        return tuple(self._services)

    def add_service(self, service: Service) -> None:
        """Run `service` too (before run()); it starts after, and stops before, the others."""
        self._services.append(service)

    def add_jobs(self, jobs: Sequence[Job]) -> None:
        """Schedule these jobs too (before run())."""
        self._jobs.extend(jobs)

    def run(self, stop: threading.Event | None = None) -> int:
        """Poll until SIGTERM/SIGINT (or `stop` is set); returns the exit code, 0.

        The first poll runs at once. On a signal, within the shutdown grace: a call
        waiting for IMDS is cut short, the running tick finishes, the outbox
        delivers what is due; then we return (see _stop).
        """
        from apscheduler.executors.debug import DebugExecutor
        from apscheduler.executors.pool import ThreadPoolExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        d = self.daemon
        d.take_back_claims()
        stop = stop or threading.Event()
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: stop.set())
        # The poll runs on the scheduler's own thread: no hand-off to a pool thread
        # every second (half the idle CPU); ticks never overlap anyway.
        scheduler = BackgroundScheduler(
            timezone=UTC,
            executors={"default": DebugExecutor(), "pool": ThreadPoolExecutor(POOL_THREADS)},
        )
        scheduler.add_job(
            self._poll,
            "interval",
            seconds=self._poll_interval,
            next_run_time=utcnow(),
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            id="poll",
        )
        # Single-holder duties: one agent of a fleet prunes, runs each such job and
        # service; on SQLite this daemon holds them all (store/duties.py).
        duties = self.duties = d.store.db.duties()
        prune = duties.duty("prune")
        prune.on_change(lambda _: self._prune_if_held(prune))  # at once when taken
        self._every(scheduler, Job("prune", 6 * 3600.0, lambda: self._prune_if_held(prune)))
        # Other agents take this one for dead without it (see Store.heartbeat).
        self._every(scheduler, Job("heartbeat", self._heartbeat_every.total_seconds(), self._beat))
        for given in self._jobs:
            job = _held_only(given, duties.duty(given.name)) if given.single_holder else given
            self._every(scheduler, job)
        d.dispatcher.start()
        d.carrier.start()
        d.hooks.worker.start()
        d.reminders.start()
        d.watch_store()
        for service in self._services:
            if isinstance(service, SingleHolder):
                service.bind(duties)
            service.start()
        self._recorder.start()
        scheduler.start()
        duties.start()
        log.info("sebridge polling %s every %gs", d.imds.endpoint, self._poll_interval)
        stop.wait()
        log.info("stopping: finishing the current tick")
        self._stop(scheduler, time.monotonic() + self._shutdown_grace)
        return 0

    def _every(self, scheduler: BackgroundScheduler, job: Job) -> None:
        scheduler.add_job(
            _logged(job),
            "interval",
            seconds=job.interval,
            max_instances=1,
            coalesce=True,
            id=job.name,
            executor="pool",
        )

    def _stop(self, scheduler: BackgroundScheduler, deadline: float) -> None:
        """Stop within the grace (plus a second), whatever IMDS or a sink does.

        A poll waiting for IMDS (up to 120 s on the first call) is cut short; a
        job that still runs at the deadline is left behind on its daemon thread,
        and so are the connections it uses: the process is about to exit.
        """
        d = self.daemon
        d.imds.interrupt()
        # The scheduler's shutdown joins its thread, which runs the poll: waited for on
        # a thread of its own, so the wait has a bound.
        stopper = threading.Thread(target=scheduler.shutdown, name="scheduler-stop", daemon=True)
        stopper.start()
        # At least half a second, even with no grace: an idle scheduler needs a moment.
        stopper.join(max(0.5, deadline - time.monotonic()))
        if stopper.is_alive():
            log.warning("a job is still running at the end of the shutdown grace; left behind")
        # The tick's second half being acted on finishes (a statement ends by its deadline).
        recorded = self._recorder.stop(max(0.1, deadline - time.monotonic()))
        for service in reversed(self._services):
            service.stop()
        if self.duties is not None:
            self.duties.stop()
        # A POST in flight ends at IMDS's timeout at worst; what it recorded is delivered below.
        d.carrier.stop(max(0.1, deadline - time.monotonic()))
        d.reminders.stop(max(0.1, deadline - time.monotonic()))
        # A hook in progress is not waited for: it runs again at the next start.
        d.hooks.worker.stop(0.1)
        d.dispatcher.flush(max(0.0, deadline - time.monotonic()))
        d.dispatcher.stop(timeout=max(0.1, deadline + 0.5 - time.monotonic()))
        if not stopper.is_alive() and recorded:
            d.imds.close()
            d.store.close()

    def _poll(self) -> None:
        # The tick's first half (IMDS only); the recorder acts on what it found.
        try:
            polled = self.daemon.poll()
        except Exception:  # a bug must not stop the polling
            log.exception("poll failed; polling goes on")
            return
        self._recorder.offer(polled)

    def _beat(self) -> None:
        try:
            waiting = self.daemon.store.heartbeat(self.daemon.clock())
        except StoreError as exc:  # an outage is said once (kernel/outage.py), without a traceback
            self.outage.failed(exc)
            return
        self.outage.answered()
        if waiting:
            self.daemon.look_again()  # e.g. take over what a dead agent had claimed

    def _prune_if_held(self, duty: Duty) -> None:
        if not duty.held():
            return
        try:
            removed = self.daemon.store.prune(self.daemon.clock() - self._retention)
        except Exception:
            log.exception("pruning history failed")
            return
        if removed:
            log.info("pruned %d events older than %s", removed, self._retention)


@contextmanager
def stop_signals_exit() -> Iterator[None]:
    """While the daemon is being built (it may wait for IMDS to say the VM's name): SIGTERM
    and SIGINT end the process at once with exit 0, as they end a running daemon. Main
    thread only (Python delivers signals there); elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)  # unwinds through what was being opened; each part closes

    previous = {signum: signal.signal(signum, stop) for signum in (signal.SIGTERM, signal.SIGINT)}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def _logged(job: Job) -> Callable[[], None]:
    """The job, its failures logged: it runs again at its next turn."""

    def run() -> None:
        try:
            job.run()
        except Exception:
            log.exception("%s failed; it runs again in %gs", job.name, job.interval)

    return run


def _held_only(job: Job, duty: Duty) -> Job:
    """The job, run only while this agent holds its duty."""

    def run() -> None:
        if duty.held():
            job.run()

    return Job(job.name, job.interval, run)

"""Runs a Daemon until it is told to stop: the scheduler, the duties, a bounded stop.

The poll runs as an APScheduler interval job on the scheduler's own thread
(first poll at once, never two at once); beside it: the heartbeat, pruning
and the integrations' jobs and services, single-holder ones only on the
agent that holds their duty. SIGTERM/SIGINT stop it within the shutdown
grace, whatever IMDS or a sink does.
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from sebridge.errors import StoreError
from sebridge.integrations.base import Job, SingleHolder
from sebridge.store.duties import Duty
from sebridge.store.store import HEARTBEAT

if TYPE_CHECKING:
    from apscheduler.schedulers.background import BackgroundScheduler

    from sebridge.daemon import Daemon

__all__ = ["DaemonRunner"]

log = logging.getLogger("sebridge.daemon")


class DaemonRunner:
    """The daemon's life from first poll to exit (`sebridge run`)."""

    def __init__(self, daemon: Daemon) -> None:
        self.d = daemon

    def run(
        self,
        poll_interval: float = 1.0,
        *,
        stop: threading.Event | None = None,
        shutdown_grace: float = 5.0,
        retention: timedelta = timedelta(days=90),
        heartbeat: timedelta = HEARTBEAT,
    ) -> int:
        """Poll until SIGTERM/SIGINT (or `stop` is set); returns the exit code, 0.

        The first poll runs at once. On a signal, within `shutdown_grace`
        seconds: a call waiting for IMDS is cut short, the running tick
        finishes, the outbox delivers what is due; then we return (see _stop).
        """
        from apscheduler.executors.debug import DebugExecutor
        from apscheduler.schedulers.background import BackgroundScheduler

        # Claims this host held before a crash are ours to take back; only the
        # daemon does this (a CLI beside a running daemon must not).
        self.d.store.outbox.release_own_claims()
        stop = stop or threading.Event()
        if threading.current_thread() is threading.main_thread():
            for signum in (signal.SIGTERM, signal.SIGINT):
                signal.signal(signum, lambda *_: stop.set())
        # Jobs run on the scheduler's own thread: no hand-off to a pool thread
        # every second (half the idle CPU); ticks never overlap anyway.
        scheduler = BackgroundScheduler(timezone=UTC, executors={"default": DebugExecutor()})
        scheduler.add_job(
            self._safe_tick,
            "interval",
            seconds=poll_interval,
            next_run_time=datetime.now(UTC),
            max_instances=1,
            coalesce=True,
            misfire_grace_time=None,
            id="poll",
        )
        # Single-holder duties: one agent of a fleet prunes, runs each such job and
        # service; on SQLite this daemon holds them all (store/duties.py).
        duties = self.d.duties = self.d.store.db.duties()
        prune = duties.duty("prune")
        prune.on_change(lambda _: self._prune_if_held(prune, retention))  # at once when taken
        scheduler.add_job(self._prune_if_held, "interval", hours=6, args=[prune, retention])
        # Other agents take this one for dead without it (see Store.heartbeat).
        scheduler.add_job(
            self._safe(Job("heartbeat", heartbeat.total_seconds(), self._heartbeat)),
            "interval",
            seconds=heartbeat.total_seconds(),
            max_instances=1,
            coalesce=True,
        )
        for given in self.d.jobs:
            job = _held_only(given, duties.duty(given.name)) if given.single_holder else given
            scheduler.add_job(
                self._safe(job),
                "interval",
                seconds=job.interval,
                max_instances=1,
                coalesce=True,
                id=job.name,
            )
        self.d.dispatcher.start()
        self.d.watch_store()
        for service in self.d.services:
            if isinstance(service, SingleHolder):
                service.bind(duties)
            service.start()
        scheduler.start()
        duties.start()
        log.info("sebridge polling %s every %gs", self.d.imds.endpoint, poll_interval)
        stop.wait()
        log.info("stopping: finishing the current tick")
        self._stop(scheduler, time.monotonic() + shutdown_grace)
        return 0

    def _stop(self, scheduler: BackgroundScheduler, deadline: float) -> None:
        """Stop within the grace (plus a second), whatever IMDS or a sink does.

        A poll waiting for IMDS (up to 120 s on the first call) is cut short; a
        job that still runs at the deadline is left behind on its daemon thread,
        and so are the connections it uses: the process is about to exit.
        """
        self.d.imds.interrupt()
        # The scheduler's shutdown joins its thread, which runs the jobs: waited
        # for on a thread of its own, so the wait has a bound.
        stopper = threading.Thread(target=scheduler.shutdown, name="scheduler-stop", daemon=True)
        stopper.start()
        # At least half a second, even with no grace: an idle scheduler needs a moment.
        stopper.join(max(0.5, deadline - time.monotonic()))
        if stopper.is_alive():
            log.warning("a job is still running at the end of the shutdown grace; left behind")
        for service in reversed(self.d.services):
            service.stop()
        if self.d.duties is not None:
            self.d.duties.stop()
        self.d.dispatcher.flush(max(0.0, deadline - time.monotonic()))
        self.d.dispatcher.stop(timeout=max(0.1, deadline + 0.5 - time.monotonic()))
        if not stopper.is_alive():
            self.d.imds.close()
            self.d.store.close()

    def _safe_tick(self) -> None:
        # One bad tick (a store hiccup, a bug) must not stop the polling.
        try:
            self.d.tick()
        except StoreError as exc:
            # Said once per outage (and in /healthz), not every poll. The document is
            # recorded when the store answers: events still listed then are announced late.
            if self.d.store_error is None:
                log.warning("the store does not answer (%s); polling IMDS goes on", exc)
            self.d.store_error = str(exc)
            return
        except Exception:
            log.exception("tick failed; polling goes on")
            return
        if self.d.store_error is not None:
            log.info("the store answers again")
            self.d.store_error = None

    @staticmethod
    def _safe(job: Job) -> Callable[[], None]:
        def run() -> None:
            try:
                job.run()
            except Exception:
                log.exception("%s failed; it runs again in %gs", job.name, job.interval)

        return run

    def _heartbeat(self) -> None:
        if self.d.store.heartbeat(self.d.clock()):
            self.d.look_again()  # e.g. take over what a dead agent had claimed

    def _prune_if_held(self, duty: Duty, retention: timedelta) -> None:
        if duty.held():
            self._prune(retention)

    def _prune(self, retention: timedelta) -> None:
        try:
            removed = self.d.store.prune(self.d.clock() - retention)
        except Exception:
            log.exception("pruning history failed")
            return
        if removed:
            log.info("pruned %d events older than %s", removed, retention)


def _held_only(job: Job, duty: Duty) -> Job:
    """The job, run only while this agent holds its duty."""

    def run() -> None:
        if duty.held():
            job.run()

    return Job(job.name, job.interval, run)

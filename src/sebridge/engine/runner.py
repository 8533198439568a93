"""The daemon's life from first poll to exit (`sebridge run`): parts, jobs, stop.

The scheduler (engine/schedule.py, APScheduler) polls and runs the heartbeat, pruning and
the integrations' jobs, single-holder ones only on the agent that holds their duty. The
dispatcher, the reminders, the carrier, the hook worker, the store's listener, the duties
board, the services (the HTTP server, Slack's Socket Mode), the recorder and the
scheduler are started in that order by one
Supervisor (kernel/worker.py) and stopped in reverse against one deadline: SIGTERM/SIGINT
stop it all within the shutdown grace (plus a second), whatever IMDS or a sink does (how
they are heard: engine/stop_signals.py). See docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Sequence
from datetime import timedelta

from sebridge.engine.daemon import Daemon
from sebridge.engine.parts import Parts
from sebridge.engine.record import Recorder
from sebridge.engine.schedule import Schedule
from sebridge.engine.stop_signals import stop_waiter
from sebridge.kernel.errors import StoreError
from sebridge.kernel.outage import StoreOutage
from sebridge.kernel.worker import Supervisor
from sebridge.model.services import Job, Service, SingleHolder
from sebridge.store.duties import Duties, Duty
from sebridge.store.store import HEARTBEAT

__all__ = ["FIRST_POLL_WAIT", "Runner"]

log = logging.getLogger("sebridge.daemon")

# How long run() lets the first poll go alone before its warm-up and the jobs' scheduler
# (the first IMDS call may wait much longer; they do not wait for it).
FIRST_POLL_WAIT = 1.0


class Runner:
    """Runs a Daemon until it is told to stop.

    Args:
        parts: the daemon's parts (engine/parts.py), started and stopped here.
        services: run beside the polling, started in order, stopped in reverse.
        jobs: integrations' scheduler jobs.
        retention: how long history of gone events is kept.
    """

    def __init__(
        self,
        daemon: Daemon,
        parts: Parts,
        *,
        services: Sequence[Service] = (),
        jobs: Sequence[Job] = (),
        poll_interval: float = 1.0,
        shutdown_grace: float = 5.0,
        retention: timedelta = timedelta(days=90),
        heartbeat: timedelta = HEARTBEAT,
    ) -> None:
        self.daemon = daemon
        self.parts = parts
        self.store = daemon.store
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
        self._schedule: Schedule | None = None  # the poll and the jobs, once run() runs
        self._after_start: list[Callable[[], None]] = []

    @property
    def store_error(self) -> str | None:
        """Why the store does not answer, while it does not (for /healthz, /readyz)."""
        return self.outage.error

    def store_waiting(self) -> float:
        """Seconds the store's statement in flight has waited for an answer (for /healthz
        and /readyz)."""
        return self.store.waiting_for()

    def stopped_parts(self) -> list[str]:
        """The daemon's main parts that do not run now (for /livez): `poll`, the loop that
        reads IMDS, and `recorder`, which acts on what it read. Neither waits on IMDS or
        the store beyond a call's timeout, so an outage of either stops neither."""
        schedule = self._schedule
        stopped = [] if schedule is not None and schedule.polling else ["poll"]
        return stopped if self._recorder.running else [*stopped, "recorder"]

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

    def after_start(self, work: Callable[[], None]) -> None:
        """Do `work` on run()'s thread once every part has started and the first poll is
        over (or FIRST_POLL_WAIT has passed), before the jobs' scheduler is built: what
        the first delivery would otherwise pay, such as compiling templates."""
        self._after_start.append(work)

    def run(self, stop: threading.Event | None = None) -> int:
        """Poll until SIGTERM/SIGINT (or `stop` is set); returns the exit code, 0.

        The first poll runs at once. On a signal, within the shutdown grace: a call
        waiting for IMDS is cut short, the running tick finishes, the outbox
        delivers what is due; then we return (see _parts).
        """
        d = self.daemon
        d.take_back_claims()
        wait = stop_waiter(stop)
        schedule = self._schedule = Schedule(self._poll, self._poll_interval, d.imds.interrupt)
        # Single-holder duties: one agent of a fleet prunes, runs each such job and
        # service; on SQLite this daemon holds them all (store/duties.py).
        duties = self.duties = self.store.duties()
        prune = duties.duty("prune")
        prune.on_change(lambda _: self._prune_if_held(prune))  # at once when taken
        schedule.every(Job("prune", 6 * 3600.0, lambda: self._prune_if_held(prune)))
        # Other agents take this one for dead without it (see Store.agents.heartbeat).
        schedule.every(Job("heartbeat", self._heartbeat_every.total_seconds(), self._beat))
        for given in self._jobs:
            job = _held_only(given, duties.duty(given.name)) if given.single_holder else given
            schedule.every(job)
        parts = self._parts(schedule, duties)
        parts.start()
        log.info("sebridge polling %s every %gs", d.imds.endpoint, self._poll_interval)
        # The first poll goes alone: no import or compile of ours takes the GIL from it.
        # Then the warm-up, then APScheduler, which reuses much of what the templates'
        # compiling freed: the other way round, 1.3 MiB more VmRSS stayed (issue 26).
        schedule.first_poll(FIRST_POLL_WAIT)
        for work in self._after_start:
            try:
                work()
            except Exception:  # a bug in a warm-up must not stop the daemon
                log.exception("work after start failed")
        schedule.start_jobs()
        wait()
        log.info("stopping: finishing the current tick")
        left = parts.stop(self._shutdown_grace)
        # A job or a tick left behind still uses them; the process is about to exit anyway.
        if not {"scheduler", "recorder"} & set(left):
            self._say_stopped()
            d.imds.close()
            self.store.close()
        return 0

    def _say_stopped(self) -> None:
        """Tell the fleet this agent stopped (nothing of ours writes after this): its VM is
        silent at once, and an approval listing it is held, not released un-drained."""
        try:
            self.store.agents.stopped(self.daemon.clock())
        except StoreError as exc:  # it goes silent after [fleet] silent_after instead
            log.warning("could not tell the fleet this agent stopped: %s", exc)

    def _parts(self, schedule: Schedule, duties: Duties) -> Supervisor:
        """The daemon's parts in start order. They stop in reverse, each waited for before
        the next is told, within the shutdown grace (plus a second), whatever IMDS or a
        sink does: the scheduler (a poll waiting for IMDS cut short), the recorder, the
        services, the duties, the hook worker, the carrier, the reminders, and last the
        dispatcher, which delivers what the others recorded."""
        d, p = self.daemon, self.parts
        parts = Supervisor()
        # Delivers what is due until the grace ends, then has half a second for its workers.
        parts.add("dispatcher", _Part(p.dispatcher.start, p.dispatcher.stop, least=0.1, extra=0.5))
        # Records the reminders that come due; its writes wake the dispatcher, so it stops
        # before it.
        parts.add("reminders", _Part(p.reminders.start, p.reminders.stop, least=0.1))
        # A POST in flight ends at IMDS's timeout at worst; what it recorded is delivered.
        parts.add("carrier", _Part(p.carrier.start, p.carrier.stop, least=0.1))
        # A hook in progress is not waited for: it runs again at the next start.
        hooks = p.hook_worker
        parts.add("hooks", _Part(hooks.start, hooks.stop, least=0.1, most=0.1))
        # Other processes' commits wake the parts above (the listener ends with the store).
        parts.add("store-watch", _Part(d.watch_store, lambda _: None))
        parts.add("duties", _Part(duties.start, _unbounded(duties.stop)))
        for service in self._services:
            if isinstance(service, SingleHolder):
                service.bind(duties)  # before the board takes its duties
            parts.add(type(service).__name__, _Part(service.start, _unbounded(service.stop)))
        # The tick's second half being acted on finishes (a statement ends by its deadline).
        parts.add("recorder", _Part(self._recorder.start, self._recorder.stop, least=0.1))
        parts.add("scheduler", schedule)
        return parts

    def _poll(self) -> None:
        # The tick's first half (IMDS only); the recorder acts on what it found, unless it
        # has nothing to act on (an unchanged document, nothing written, no timer due):
        # such a poll costs this thread alone, the recorder's is not woken.
        try:
            polled = self.daemon.poll()
        except Exception:  # a bug must not stop the polling
            log.exception("poll failed; polling goes on")
            return
        try:
            if self.daemon.quiet(polled):
                return
        except Exception:  # the recorder acts on it as on any poll
            log.exception("looking at the poll failed; it is recorded all the same")
        self._recorder.offer(polled)

    def _beat(self) -> None:
        try:
            waiting = self.store.agents.heartbeat(self.daemon.clock())
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
            removed = self.store.history.prune(self.daemon.clock() - self._retention)
        except StoreError as exc:  # an outage, said once as the heartbeat says it; next time
            self.outage.failed(exc)
            return
        except Exception:  # a bug must not stop the jobs
            log.exception("pruning history failed")
            return
        if removed:
            log.info("pruned %d events older than %s", removed, self._retention)


class _Part:
    """A part of the daemon as the supervisor runs it, its stop's wait bounded as the part
    needs: the seconds left of the grace plus `extra`, at least `least`, at most `most`."""

    def __init__(
        self,
        start: Callable[[], object],
        stop: Callable[[float], bool | None],
        *,
        least: float = 0.0,
        most: float | None = None,
        extra: float = 0.0,
    ) -> None:
        self._start, self._stop = start, stop
        self._least, self._most, self._extra = least, most, extra

    def start(self) -> None:
        """Start the part."""
        self._start()

    def run_once(self) -> None:
        """Nothing: the runner runs parts on their threads (a tick runs their rounds:
        Daemon.tick)."""

    def stop(self, timeout: float = 0.0) -> bool:
        """Stop it, waiting as bounded; True unless it says it still runs (a stop that
        returns nothing counts as ended)."""
        wait = max(self._least, timeout + self._extra)
        return self._stop(wait if self._most is None else min(self._most, wait)) is not False


def _unbounded(stop: Callable[[], None]) -> Callable[[float], None]:
    """A stop that takes no timeout (it ends its threads before it returns), as a part's."""
    return lambda _timeout: stop()


def _held_only(job: Job, duty: Duty) -> Job:
    """The job, run only while this agent holds its duty."""

    def run() -> None:
        if duty.held():
            job.run()

    return Job(job.name, job.interval, run)

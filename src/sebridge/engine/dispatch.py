"""Dispatcher: outbox rows -> sinks, one worker thread per sink.

A hanging or dead sink holds up only its own thread: Slack never waits for
Jira. Retryable failures back off exponentially with jitter (honouring a
sink's Retry-After); permanent ones are recorded and stop; retries end
`retry_for` after the event left the document.

Claims are owned (store/claims.py): a row is sent only once its attempt is recorded as
begun under this worker's claim, its lease is renewed while the sink runs (leases.py),
and an outcome written after the claim passed to another agent changes nothing.
"""

from __future__ import annotations

import functools
import logging
import random
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from datetime import datetime, timedelta

from sebridge.engine.leases import LeaseKeeper
from sebridge.engine.metrics import Metrics
from sebridge.kernel.backoff import backoff_delay
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import PermanentDeliveryError, RetryableDeliveryError, StoreError
from sebridge.kernel.worker import Pause, Worker
from sebridge.model import ScheduledEvent
from sebridge.model.message import Message, Sink
from sebridge.model.readiness import VmReadiness
from sebridge.model.records import Delivery
from sebridge.store import Store

__all__ = ["Dispatcher", "SinkOutcome"]

log = logging.getLogger("sebridge.dispatch")  # the name operators filter on, kept across moves

# Idle workers look at the outbox this often even unwoken (at most; the store's
# dialect may say less often: Database.IDLE_CHECK_SECONDS). The daemon's tick
# wakes them whenever anyone (another process too) writes to the store, so
# this is only a safety net.
IDLE_WAIT = 60.0
LEASE = timedelta(minutes=2)
# Of a stop's timeout, what is kept for the workers to end once the flush is over.
_END_SHARE = 0.5


def _wait(event: threading.Event, seconds: float | None) -> None:
    """How a sink's worker waits between rounds (tests give a fake one)."""
    event.wait(seconds)


@dataclass(frozen=True)
class SinkOutcome:
    """How a sink's last delivery went: "delivered", "retrying" or "failed"."""

    state: str
    at: datetime
    error: str | None = None


class Dispatcher:
    """Delivers outbox rows to every sink independently.

    Args:
        sinks: each sink by its integration's name, which is its outbox key.
        vm_name: returns this VM's name (known after the first poll).
        retry_for: how long after an event left the document its deliveries
            are still retried.
        approve_url: an event's signed approval link (None: links are off);
            messages carry it while the event can be approved, and a held event's page link.
        readiness_of: an event's VMs' readiness and its rule's prepare hooks, by event
            id, as of now (messages show them).
        metrics: counts deliveries by sink and outcome (default: a registry of its own).
        lease: how long a claim holds a row before another agent may take it over
            (renewed while the row's sink is called).
        clock, pause: time, and how the sinks' workers wait (kernel/worker.py), for tests.
    """

    def __init__(
        self,
        store: Store,
        sinks: Mapping[str, Sink],
        *,
        vm_name: Callable[[], str],
        dry_run: bool = False,
        retry_for: timedelta = timedelta(hours=1),
        max_backoff: float = 300.0,
        clock: Clock = utcnow,
        jitter: Callable[[], float] = random.random,
        approve_url: Callable[[ScheduledEvent], str] | None = None,
        readiness_of: Callable[[str], tuple[tuple[VmReadiness, ...], tuple[str, ...]]]
        | None = None,
        metrics: Metrics | None = None,
        lease: timedelta = LEASE,
        pause: Pause = _wait,
    ) -> None:
        self._store = store
        self._lease = lease
        self._leases = LeaseKeeper(lambda d: store.outbox.renew(d, self._clock() + lease), lease)
        self._readiness_of = readiness_of
        self._sinks = dict(sinks)
        self._metrics = metrics or Metrics(tuple(sinks))
        self._vm_name = vm_name
        self._dry_run = dry_run
        self._retry_for = retry_for
        self._max_backoff = max_backoff
        self._clock = clock
        self._jitter = jitter
        self._approve_url = approve_url
        self._outcomes: dict[str, SinkOutcome] = {}
        # The idle look is only a safety net: commits wake the workers (the tick, the
        # store's listener, the heartbeat when a row waits unannounced).
        idle = max(IDLE_WAIT, store.idle_check_seconds)
        self._workers = {
            name: Worker(
                f"sink-{name}",
                functools.partial(self._round, name),
                idle=idle,
                expected=(StoreError,),
                logger=log,
                clock=clock,
                pause=pause,
            )
            for name in self._sinks
        }

    @property
    def sinks(self) -> Mapping[str, Sink]:
        """The sinks, by name."""
        return dict(self._sinks)

    def outcomes(self) -> dict[str, SinkOutcome]:
        """Each sink's last delivery outcome (sinks that delivered nothing yet are absent)."""
        return dict(self._outcomes)

    def start(self) -> None:
        """Start one worker per sink, and the one that renews their claims."""
        self._leases.start()
        for worker in self._workers.values():
            worker.start()

    # Woken by these tables' writes (kernel/subscriptions.py): rows to deliver.
    WAKES_ON = frozenset(("outbox",))

    @staticmethod
    def on_own_thread() -> bool:
        """Whether the caller is one of our threads (`sink-...`: a claim, an ack, a lease
        renewed wakes no other sink's worker)."""
        return threading.current_thread().name.startswith("sink-")

    def wake(self) -> None:
        """New rows were committed: every sink's worker looks now, not at its next due time."""
        for worker in self._workers.values():
            worker.wake()

    def flush(self, timeout: float) -> bool:
        """Wait until no sink has a row a claim could take now or that this agent is sending,
        at most `timeout` seconds; True if so. A row waiting for its back-off is not waited
        for. Each look at the store follows a round of a sink's worker, never a timer."""
        deadline = time.monotonic() + max(0.0, timeout)
        while True:
            try:
                now = self._clock()
                busy = [name for name in self._workers if self._store.outbox.busy(name, now)]
            except StoreError as exc:  # the store away: what is due is delivered at the next start
                log.warning("outbox not drained: the store does not answer (%s)", exc)
                return False
            left = deadline - time.monotonic()
            if not busy:
                return True
            if left <= 0:
                log.warning("outbox not drained in %.1fs: %s still have rows due", timeout, busy)
                return False
            worker = self._workers[busy[0]]
            after = worker.rounds
            worker.wake()
            worker.wait_round(after, left)

    def stop(self, timeout: float = 5.0) -> bool:
        """Deliver what is due (flush) for all but the last half second of `timeout`, stop the
        workers within what is left (at least 0.1 s), then close the sinks. True when every
        worker ended; one stuck in a sink is left behind (a daemon thread)."""
        deadline = time.monotonic() + max(0.0, timeout)
        running = [w for w in self._workers.values() if w.started and not w.stopping]
        if running:  # only workers can deliver; a stopped dispatcher is not waited for twice
            self.flush(max(0.0, timeout - _END_SHARE))
        for worker in self._workers.values():
            worker.stop()  # every worker told first: one stuck in its sink delays no other
        end = max(deadline, time.monotonic() + 0.1)
        ended = [w.join(end - time.monotonic()) for w in self._workers.values()]
        ended.append(self._leases.stop(end - time.monotonic()))
        for sink in self._sinks.values():
            sink.close()
        return all(ended)

    def deliver_due(self, name: str) -> int:
        """Deliver every row of the sink called `name` that is due now; returns how many
        were tried."""
        tried = 0
        while not self._workers[name].stopping:
            now = self._clock()
            batch = self._store.outbox.claim(name, now, now + self._lease)
            if not batch:
                return tried
            for delivery in batch:
                self._deliver(name, delivery)
                tried += 1
        return tried

    def _round(self, name: str) -> datetime | None:
        """A sink worker's round: what is due, delivered; then when a claim could take the
        next row (store/outbox.py: next_due). A StoreError backs the worker off (the
        daemon says the outage once: kernel/outage.py)."""
        self.deliver_due(name)
        return self._store.outbox.next_due(name)

    def _deliver(self, name: str, delivery: Delivery) -> None:
        sink = self._sinks[name]
        message = Message(
            transition=delivery.transition,
            vm_name=self._vm_name(),
            policy=delivery.policy,
            receipt=delivery.receipt,
            dry_run=self._dry_run,
            approved_by=delivery.approved_by,
            approved_by_id=delivery.approved_by_id,
            approved_anyway=delivery.approved_anyway,
            event_state=delivery.event_state,
            approval_state=delivery.approval_state,
            # Attempts begun, not finished: a crash mid-send never finished one.
            attempt=delivery.begun,
            transition_id=delivery.transition_id,
            begun_elsewhere=delivery.begun_by not in (None, self._store.agent),
            rule=delivery.rule,
            on_prepare_failure=delivery.on_prepare_failure,
        )
        if self._readiness_of is not None:
            vms, prepare = self._readiness_of(delivery.transition.event_id)
            message = replace(message, readiness=vms, prepare=prepare)
        if self._approve_url is not None and message.approvable:
            message = replace(message, approve_url=self._approve_url(delivery.transition.event))
        elif self._approve_url is not None and message.leads_to_page:  # held: the ways out
            message = replace(message, page_url=self._approve_url(delivery.transition.event))
        what = f"{delivery.transition.kind} of {delivery.transition.event_id} to {name}"
        # Committed before the send: a crash between send and ack is seen on restart.
        if not self._store.outbox.begin(delivery, self._clock() + self._lease):
            log.info(
                "delivery of %s left to another agent: its claim ran out before its turn", what
            )
            return
        try:
            with self._leases.hold(delivery):
                receipt = sink.send(message)
        except PermanentDeliveryError as exc:
            log.error("delivery of %s failed for good: %s", what, exc)
            self._say_if_lost(what, self._store.outbox.fail(delivery, str(exc)))
            self._outcomes[name] = SinkOutcome("failed", self._clock(), str(exc))
            self._metrics.delivery_failed(name, retry=False)
            return
        except RetryableDeliveryError as exc:
            self._retry(name, delivery, what, str(exc), exc.retry_after)
            return
        except Exception as exc:  # a sink's bug: keep it visible, keep trying
            log.exception("delivery of %s raised unexpectedly", what)
            self._retry(name, delivery, what, f"{type(exc).__name__}: {exc}", None)
            return
        self._say_if_lost(what, self._store.outbox.ack(delivery, receipt, self._clock()))
        now = self._clock()
        self._outcomes[name] = SinkOutcome("delivered", now)
        self._metrics.delivered(name, (now - delivery.transition.at).total_seconds())

    @staticmethod
    def _say_if_lost(what: str, written: bool) -> None:
        """Say so when an outcome was not recorded because the claim had passed on (its
        lease ran out despite renewals: the store away, a hung send): the row is the new
        holder's, and it records its own attempt."""
        if not written:
            log.warning(
                "the outcome of %s is not recorded here: its claim passed to another agent "
                "while the sink was called, which may deliver it again",
                what,
            )

    def _retry(
        self, name: str, delivery: Delivery, what: str, error: str, retry_after: float | None
    ) -> None:
        now = self._clock()
        self._outcomes[name] = SinkOutcome("retrying", now, error)
        attempts = delivery.attempts + 1
        if delivery.gone_at is not None and now > delivery.gone_at + self._retry_for:
            log.error("giving up on %s after %d attempts: %s", what, attempts, error)
            self._outcomes[name] = SinkOutcome("failed", now, error)
            self._say_if_lost(
                what,
                self._store.outbox.fail(delivery, f"gave up after {attempts} attempts: {error}"),
            )
            self._metrics.delivery_failed(name, retry=False)
            return
        backoff = backoff_delay(
            attempts - 1, base=1.0, cap=self._max_backoff, jitter=self._jitter()
        )
        if retry_after is not None:
            backoff = max(backoff, retry_after)
        log.warning(
            "delivery of %s failed (attempt %d), retrying in %.1fs: %s",
            what,
            attempts,
            backoff,
            error,
        )
        self._say_if_lost(
            what, self._store.outbox.retry(delivery, error, now + timedelta(seconds=backoff))
        )
        self._metrics.delivery_failed(name, retry=True)

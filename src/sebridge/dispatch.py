"""Dispatcher: outbox rows -> sinks, one worker thread per sink.

A hanging or dead sink holds up only its own thread: Slack never waits for
Jira. Retryable failures back off exponentially with jitter (honouring a
sink's Retry-After); permanent ones are recorded and stop; retries end
`retry_for` after the event left the document.
"""

from __future__ import annotations

import logging
import random
import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta

from sebridge.errors import PermanentDeliveryError, RetryableDeliveryError, StoreError
from sebridge.model import ScheduledEvent
from sebridge.sink import Message, Sink
from sebridge.store import Delivery, Store

__all__ = ["Dispatcher", "SinkOutcome"]

log = logging.getLogger(__name__)

# Idle workers look at the outbox this often even unwoken (at most; the store's
# dialect may say less often: Database.IDLE_CHECK_SECONDS). The daemon's tick
# wakes them whenever anyone (another process too) writes to the store, so
# this is only a safety net.
IDLE_WAIT = 60.0
LEASE = timedelta(minutes=2)


def _utcnow() -> datetime:
    return datetime.now(UTC)


@dataclass(frozen=True)
class SinkOutcome:
    """How a sink's last delivery went: "delivered", "retrying" or "failed"."""

    state: str
    at: datetime
    error: str | None = None


class Dispatcher:
    """Delivers outbox rows to every sink independently.

    Args:
        vm_name: returns this VM's name (known after the first poll).
        retry_for: how long after an event left the document its deliveries
            are still retried.
        approve_url: an event's signed approval link (None: links are off);
            messages carry it while the event can be approved.
    """

    def __init__(
        self,
        store: Store,
        sinks: Sequence[Sink],
        *,
        vm_name: Callable[[], str],
        dry_run: bool = False,
        retry_for: timedelta = timedelta(hours=1),
        max_backoff: float = 300.0,
        clock: Callable[[], datetime] = _utcnow,
        jitter: Callable[[], float] = random.random,
        approve_url: Callable[[ScheduledEvent], str] | None = None,
    ) -> None:
        self._store = store
        self._sinks = list(sinks)
        self._vm_name = vm_name
        self._dry_run = dry_run
        self._retry_for = retry_for
        self._max_backoff = max_backoff
        self._clock = clock
        self._jitter = jitter
        self._approve_url = approve_url
        self._wake = {sink.name: threading.Event() for sink in self._sinks}
        self._stopping = threading.Event()
        self._threads: list[threading.Thread] = []
        self._outcomes: dict[str, SinkOutcome] = {}

    def outcomes(self) -> dict[str, SinkOutcome]:
        """Each sink's last delivery outcome (sinks that delivered nothing yet are absent)."""
        return dict(self._outcomes)

    def start(self) -> None:
        """Start one worker thread per sink."""
        for sink in self._sinks:
            thread = threading.Thread(
                target=self._work, args=(sink,), name=f"sink-{sink.name}", daemon=True
            )
            thread.start()
            self._threads.append(thread)

    def wake(self) -> None:
        """New rows were committed: look now rather than at the next idle check."""
        for event in self._wake.values():
            event.set()

    def flush(self, timeout: float) -> bool:
        """Wait until no row is due now, at most `timeout` seconds; True if drained."""
        deadline = self._clock() + timedelta(seconds=timeout)
        while True:
            due = [s.name for s in self._sinks if self._due_now(s.name)]
            if not due:
                return True
            if self._clock() >= deadline:
                log.warning("outbox not drained in %.1fs: %s still have rows due", timeout, due)
                return False
            self.wake()
            self._stopping.wait(0.02)

    def stop(self, timeout: float = 5.0) -> None:
        """Stop the workers; a worker stuck in a sink is left behind (it is a daemon thread)."""
        self._stopping.set()
        self.wake()
        deadline = self._clock() + timedelta(seconds=timeout)
        for thread in self._threads:
            thread.join(max(0.0, (deadline - self._clock()).total_seconds()))
        for sink in self._sinks:
            sink.close()

    def deliver_due(self, sink: Sink) -> int:
        """Deliver every row of `sink` that is due now; returns how many were tried."""
        tried = 0
        while not self._stopping.is_set():
            now = self._clock()
            batch = self._store.outbox.claim(sink.name, now, now + LEASE)
            if not batch:
                return tried
            for delivery in batch:
                self._deliver(sink, delivery)
                tried += 1
        return tried

    def _due_now(self, sink_name: str) -> bool:
        due = self._store.outbox.next_due(sink_name)
        return due is not None and due <= self._clock()

    def _work(self, sink: Sink) -> None:
        wake = self._wake[sink.name]
        while not self._stopping.is_set():
            wake.clear()
            try:
                if self.deliver_due(sink):
                    continue
                due = self._store.outbox.next_due(sink.name)
            except StoreError as exc:  # the store away: the daemon's tick says so too
                log.warning("dispatcher for %s cannot use the store (%s); retrying", sink.name, exc)
                due = None
            except Exception:  # a bug must not kill the worker
                log.exception("dispatcher for %s failed; retrying", sink.name)
                due = None
            idle = max(IDLE_WAIT, self._store.db.IDLE_CHECK_SECONDS)
            wait = idle
            if due is not None:
                wait = min(idle, max(0.01, (due - self._clock()).total_seconds()))
            wake.wait(wait)

    def _deliver(self, sink: Sink, delivery: Delivery) -> None:
        message = Message(
            transition=delivery.transition,
            vm_name=self._vm_name(),
            policy=delivery.policy,
            receipt=delivery.receipt,
            dry_run=self._dry_run,
            approved_by=delivery.approved_by,
            # Attempts begun, not finished: a crash mid-send never finished one.
            attempt=delivery.begun,
            transition_id=delivery.transition_id,
        )
        if self._approve_url is not None and message.approvable:
            message = replace(message, approve_url=self._approve_url(delivery.transition.event))
        what = f"{delivery.transition.kind} of {delivery.transition.event_id} to {sink.name}"
        # Committed before the send: a crash between send and ack is seen on restart.
        self._store.outbox.begin(delivery)
        try:
            receipt = sink.send(message)
        except PermanentDeliveryError as exc:
            log.error("delivery of %s failed for good: %s", what, exc)
            self._store.outbox.fail(delivery, str(exc))
            self._outcomes[sink.name] = SinkOutcome("failed", self._clock(), str(exc))
            return
        except RetryableDeliveryError as exc:
            self._retry(sink, delivery, what, str(exc), exc.retry_after)
            return
        except Exception as exc:  # a sink's bug: keep it visible, keep trying
            log.exception("delivery of %s raised unexpectedly", what)
            self._retry(sink, delivery, what, f"{type(exc).__name__}: {exc}", None)
            return
        self._store.outbox.ack(delivery, receipt, self._clock())
        self._outcomes[sink.name] = SinkOutcome("delivered", self._clock())

    def _retry(
        self, sink: Sink, delivery: Delivery, what: str, error: str, retry_after: float | None
    ) -> None:
        now = self._clock()
        self._outcomes[sink.name] = SinkOutcome("retrying", now, error)
        attempts = delivery.attempts + 1
        if delivery.gone_at is not None and now > delivery.gone_at + self._retry_for:
            log.error("giving up on %s after %d attempts: %s", what, attempts, error)
            self._outcomes[sink.name] = SinkOutcome("failed", now, error)
            self._store.outbox.fail(delivery, f"gave up after {attempts} attempts: {error}")
            return
        backoff = min(self._max_backoff, 2.0 ** min(attempts - 1, 20)) * (0.5 + self._jitter())
        if retry_after is not None:
            backoff = max(backoff, retry_after)
        log.warning(
            "delivery of %s failed (attempt %d), retrying in %.1fs: %s",
            what,
            attempts,
            backoff,
            error,
        )
        self._store.outbox.retry(delivery, error, now + timedelta(seconds=backoff))

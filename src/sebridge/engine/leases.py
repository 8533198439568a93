"""Keeping a delivery's claim while its sink is called: the lease is renewed as it runs.

A row is claimed under a lease (dispatch.LEASE). A sink slower than that would let
another agent take the row over and deliver it a second time, so while a worker is in
Sink.send() the keeper renews the row's lease each time a third of it has passed: then
a renewal may be late by two thirds of a lease before the claim is in danger. One worker
per dispatcher (`sink-leases`, kernel/worker.py) does it for every sink's worker, asleep
until the next renewal is due (and for good while nothing is being sent). A send still
running after MAX_HOLD leases is taken for hung and no longer renewed: its row passes to
another agent rather than waiting forever, as a dead agent's does.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime, timedelta

from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import StoreError
from sebridge.kernel.worker import Worker
from sebridge.model.records import Delivery

__all__ = ["MAX_HOLD", "LeaseKeeper"]

log = logging.getLogger("sebridge.dispatch")

# How many leases one send may keep its row for, renewed, before it is taken for hung.
MAX_HOLD = 5
# A renewal is due when this share of the lease has passed since the last.
RENEW_AT = 1 / 3


@dataclass
class _Held:
    """A delivery whose sink is being called, and when its lease is renewed next."""

    delivery: Delivery
    due: datetime
    until: datetime  # past this the send is taken for hung


class LeaseKeeper:
    """Renews the claims of deliveries in progress, on one worker of its own (`sink-leases`).

    Args:
        renew: extends a delivery's lease by one lease from now; False: the claim was
            lost (Outbox.renew). May raise (the store away): tried again when next due.
        lease: the claims' lease.
        clock: when renewals are due (the real one: a renewal keeps a real lease).
    """

    def __init__(
        self,
        renew: Callable[[Delivery], bool],
        lease: timedelta,
        *,
        clock: Clock = utcnow,
    ) -> None:
        self._renew = renew
        self._every = lease * RENEW_AT
        self._longest = lease * MAX_HOLD
        self._clock = clock
        self._held: dict[int, _Held] = {}
        self._lock = threading.Lock()
        # Asleep while nothing is sent (no idle look): hold() wakes it.
        self._worker = Worker("sink-leases", self._round, idle=None, logger=log, clock=clock)

    def start(self) -> None:
        """Renew from now on (without it, hold() only marks what is being sent)."""
        self._worker.start()

    def stop(self, timeout: float) -> bool:
        """Stop renewing; True when the thread ended within `timeout` seconds (a renewal
        that hangs holds it up)."""
        return self._worker.stop(timeout)

    @contextmanager
    def hold(self, delivery: Delivery) -> Iterator[None]:
        """Keep `delivery`'s claim for as long as the block runs (its sink's send())."""
        now = self._clock()
        held = _Held(delivery, now + self._every, now + self._longest)
        with self._lock:
            self._held[delivery.id] = held
        self._worker.wake()  # its next renewal may come before the one the worker waits for
        try:
            yield
        finally:
            self._forget(held)

    def _forget(self, held: _Held) -> None:
        with self._lock:
            if self._held.get(held.delivery.id) is held:
                del self._held[held.delivery.id]

    def _round(self) -> datetime | None:
        """Renew the leases that are due; returns when the next one is (None: none held)."""
        now = self._clock()
        with self._lock:
            due = [h for h in self._held.values() if h.due <= now]
            for held in due:
                held.due = now + self._every
        for held in due:
            self._renew_one(held)
        with self._lock:
            return min((h.due for h in self._held.values()), default=None)

    def _renew_one(self, held: _Held) -> None:
        delivery = held.delivery
        what = f"{delivery.transition.kind} of {delivery.transition.event_id} to {delivery.sink}"
        if self._clock() > held.until:
            log.warning(
                "delivery of %s still runs after %.0f s: its claim is no longer renewed and "
                "passes to another agent when its lease ends",
                what,
                self._longest.total_seconds(),
            )
            self._forget(held)
            return
        try:
            kept = self._renew(delivery)
        except StoreError as exc:  # the store away: tried again when next due
            log.debug("the claim on %s was not renewed this time: %s", what, exc)
            return
        except Exception:  # a bug must not end the renewals of every sink
            log.exception("renewing the claim on %s failed", what)
            return
        if not kept:  # lost (or already acked): its worker's ack or retry says which
            self._forget(held)

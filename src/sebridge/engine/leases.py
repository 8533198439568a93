"""Keeping a delivery's claim while its sink is called: the lease is renewed as it runs.

A row is claimed under a lease (dispatch.LEASE). A sink slower than that would let
another agent take the row over and deliver it a second time, so while a worker is in
Sink.send() the keeper renews the row's lease each time a third of it has passed: then
a renewal may be late by two thirds of a lease before the claim is in danger. One thread
per dispatcher does it for every sink's worker, asleep until the next renewal is due
(and for good while nothing is being sent). A send still running after MAX_HOLD leases is
taken for hung and no longer renewed: its row passes to another agent rather than
waiting forever, as a dead agent's does.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import timedelta

from sebridge.kernel.errors import StoreError
from sebridge.store import Delivery

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
    due: float  # monotonic seconds
    until: float  # past this the send is taken for hung


class LeaseKeeper:
    """Renews the claims of deliveries in progress, on one thread of its own.

    Args:
        renew: extends a delivery's lease by one lease from now; False: the claim was
            lost (Outbox.renew). May raise (the store away): tried again when next due.
        lease: the claims' lease.
        monotonic: seconds, for when renewals are due (time.monotonic).
    """

    def __init__(
        self,
        renew: Callable[[Delivery], bool],
        lease: timedelta,
        *,
        monotonic: Callable[[], float] = time.monotonic,
    ) -> None:
        self._renew = renew
        self._every = lease.total_seconds() * RENEW_AT
        self._longest = lease.total_seconds() * MAX_HOLD
        self._monotonic = monotonic
        self._held: dict[int, _Held] = {}
        self._changed = threading.Condition()
        self._stopping = False
        self._thread: threading.Thread | None = None

    def start(self) -> None:
        """Renew from now on (without it, hold() only marks what is being sent)."""
        self._thread = threading.Thread(target=self._run, name="sink-leases", daemon=True)
        self._thread.start()

    def stop(self, timeout: float) -> None:
        """Stop renewing; the thread ends within `timeout` seconds unless a renewal hangs."""
        with self._changed:
            self._stopping = True
            self._changed.notify_all()
        if self._thread is not None:
            self._thread.join(max(0.0, timeout))

    @contextmanager
    def hold(self, delivery: Delivery) -> Iterator[None]:
        """Keep `delivery`'s claim for as long as the block runs (its sink's send())."""
        now = self._monotonic()
        held = _Held(delivery, now + self._every, now + self._longest)
        with self._changed:
            self._held[delivery.id] = held
            self._changed.notify_all()
        try:
            yield
        finally:
            self._forget(held)

    def _forget(self, held: _Held) -> None:
        with self._changed:
            if self._held.get(held.delivery.id) is held:
                del self._held[held.delivery.id]

    def _run(self) -> None:
        while (due := self._next_due()) is not None:
            for held in due:
                self._renew_one(held)

    def _next_due(self) -> list[_Held] | None:
        """Sleep until some lease is due for renewal; None once stopping."""
        with self._changed:
            while not self._stopping:
                now = self._monotonic()
                due = [h for h in self._held.values() if h.due <= now]
                if due:
                    for held in due:
                        held.due = now + self._every
                    return due
                nearest = min((h.due for h in self._held.values()), default=None)
                self._changed.wait(None if nearest is None else nearest - now)
        return None

    def _renew_one(self, held: _Held) -> None:
        delivery = held.delivery
        what = f"{delivery.transition.kind} of {delivery.transition.event_id} to {delivery.sink}"
        if self._monotonic() > held.until:
            log.warning(
                "delivery of %s still runs after %.0f s: its claim is no longer renewed and "
                "passes to another agent when its lease ends",
                what,
                self._longest,
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

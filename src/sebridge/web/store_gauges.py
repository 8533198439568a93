"""The gauges /metrics reads from the store at scrape time, with a bound on the wait.

`sebridge_events{state}` and `sebridge_outbox_pending{sink}` are what the store
holds now (in a fleet, what every agent recorded), so they are read when
Prometheus asks, in one statement (store/tallies.py). The read runs on a
thread of its own (started at the first scrape, parked between reads) and
the scrape waits for it at most `wait` seconds: when the database is slow
or frozen, the scrape answers in time with the last figures read (or none,
before the first read), and at most one read is in flight, however many
scrapes come (those that come during a read share the next one).
See docs/ARCHITECTURE.md, "Metrics and probes".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence

from prometheus_client.core import GaugeMetricFamily
from prometheus_client.registry import Collector

from sebridge.kernel.worker import Worker
from sebridge.model import TransitionKind
from sebridge.store.store import NOTES
from sebridge.store.tallies import Tallies

__all__ = ["EVENT_STATES", "StoreGauges"]

log = logging.getLogger("sebridge.store_gauges")  # the name operators filter on, kept across moves

# An event's state: "new" until its first transition, then the kind of its latest one that
# moves it along its lifecycle (notes such as "taken" or "hook_started" never do).
EVENT_STATES = ("new", *(k.value for k in TransitionKind if k not in NOTES))
SCRAPE_WAIT = 1.0  # seconds a scrape waits for the store's figures


class StoreGauges(Collector):
    """A prometheus_client collector of the store's figures.

    Args:
        read: reads the figures (one round trip to the store).
        sinks: the `sink` label's values (the enabled sinks).
        wait: how long a scrape waits for a read before it answers with the last figures.
    """

    def __init__(
        self, read: Callable[[], Tallies], sinks: Sequence[str], *, wait: float = SCRAPE_WAIT
    ) -> None:
        self._read = read
        self._sinks = tuple(sinks)
        self._wait = wait
        self._changed = threading.Condition()
        self._asked = 0  # reads asked for, and the number of the last one done
        self._answered = 0
        # One worker for the daemon's life (kernel/worker.py), asleep between scrapes.
        self._reader = Worker("metrics-store", self._round)
        self._last: Tallies | None = None
        self._failing = False

    def describe(self) -> Iterator[GaugeMetricFamily]:
        """The families without samples (the registry registers them without a read)."""
        yield from self._families(None)

    def collect(self) -> Iterator[GaugeMetricFamily]:
        """The families with the freshest figures the wait allows."""
        yield from self._families(self._fresh())

    def start(self) -> None:
        """Nothing to start: the reader starts at the first scrape (a Service's start)."""

    def stop(self) -> None:
        """No read after the one under way (a Service's stop: not waited for, a read ends
        by the store's statement deadline); a scrape then answers with the last figures."""
        self._reader.stop()

    def _fresh(self) -> Tallies | None:
        with self._changed:
            self._asked += 1
            asked = self._asked
        self._reader.start()
        self._reader.wake()
        with self._changed:
            self._changed.wait_for(lambda: self._answered >= asked, self._wait)
            return self._last

    def _round(self) -> None:
        with self._changed:
            asked = self._asked  # scrapes that came meanwhile share this read
            if asked <= self._answered:
                return None
        self._refresh()
        with self._changed:
            self._answered = asked
            self._changed.notify_all()
        return None

    def _refresh(self) -> None:
        try:
            self._last = self._read()
        except Exception as exc:  # the store away: /healthz says so; the figures stay as read
            if not self._failing:
                log.warning("metrics: cannot read the store's figures (%s)", exc)
            self._failing = True
            return
        self._failing = False

    def _families(self, tallies: Tallies | None) -> Iterator[GaugeMetricFamily]:
        events = GaugeMetricFamily(
            "sebridge_events", "Events the store holds, by lifecycle state.", labels=["state"]
        )
        pending = GaugeMetricFamily(
            "sebridge_outbox_pending", "Deliveries not yet made, by sink.", labels=["sink"]
        )
        if tallies is not None:
            for state in EVENT_STATES:  # a state this version does not know is left out
                events.add_metric([state], tallies.events.get(state, 0))
            for sink in self._sinks:
                pending.add_metric([sink], tallies.pending.get(sink, 0))
        yield events
        yield pending

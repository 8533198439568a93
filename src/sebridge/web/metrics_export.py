"""A daemon's figures (engine/metrics.py) as Prometheus families, made at scrape time.

Imported only by the /metrics route (cli/serving.py) and tests, so
prometheus_client and what it pulls in (http.server, urllib.request, wsgiref, gzip...)
stay out of a daemon that serves no HTTP. The names, HELP texts, labels and sample
order are those the counters had when prometheus_client kept them (docs/reference/metrics.md);
`_created` samples are not part of the contract and are not shown. See
docs/ARCHITECTURE.md, "Metrics".
"""

from __future__ import annotations

import threading
import weakref
from collections.abc import Iterator

from prometheus_client import CollectorRegistry, ProcessCollector
from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
)
from prometheus_client.registry import Collector

from sebridge import __version__
from sebridge.engine.metrics import DELIVERY_BUCKETS, Metrics

__all__ = ["registry_of"]

# As prometheus_client spells a bucket's bound ("0.05", "1.0"; none is large enough for
# an exponent).
_BOUNDS = [repr(float(b)) for b in DELIVERY_BUCKETS] + ["+Inf"]


def registry_of(metrics: Metrics) -> CollectorRegistry:
    """The registry showing `metrics` (one per Metrics, made at the first call) and the
    process's own figures (memory, CPU, open files, start time: prometheus_client's
    process_* series, read from /proc at scrape time; none where there is no /proc).
    Nothing is registered globally."""
    with _made_lock:
        registry = _made.get(metrics)
        if registry is None:
            registry = _made[metrics] = CollectorRegistry()
            registry.register(_Figures(metrics))
            ProcessCollector(registry=registry)
        return registry


# Each daemon's Metrics has one registry (the /metrics route registers the store's gauges
# in it and serves it); it goes with its Metrics.
_made: weakref.WeakKeyDictionary[Metrics, CollectorRegistry] = weakref.WeakKeyDictionary()
_made_lock = threading.Lock()


class _Figures(Collector):
    def __init__(self, metrics: Metrics) -> None:
        self._m = metrics

    def collect(self) -> Iterator[Metric]:
        m = self._m
        with m._lock:  # one consistent reading: a count under way finishes first
            polls = m.poll_counts()
            last_success = m.last_success
            requests = dict(m.imds_requests)
            transitions = dict(m.transitions)
            deliveries = dict(m.deliveries)
            latencies = {sink: (list(h.buckets), h.total) for sink, h in m.delivery_seconds.items()}
            approvals = dict(m.approvals)
            hooks = dict(m.hooks)
        yield _counter("sebridge_imds_polls", "IMDS polls by outcome.", ["outcome"], polls)
        yield GaugeMetricFamily(
            "sebridge_imds_last_success_timestamp_seconds",
            "Unix time of the last IMDS poll that answered (0: none yet).",
            value=last_success,
        )
        yield _counter(
            "sebridge_imds_requests",
            "HTTP requests to IMDS (document GETs, StartRequests POSTs), each attempt by "
            "outcome: ok, retry (failed, retried), throttled (429, retried), error (failed "
            "for good).",
            ["outcome"],
            requests,
        )
        yield _counter(
            "sebridge_transitions",
            "Transitions this agent recorded (in a fleet, the first agent to record one).",
            ["kind"],
            transitions,
        )
        yield _counter(
            "sebridge_deliveries",
            "Delivery attempts by sink and outcome.",
            ["sink", "outcome"],
            deliveries,
        )
        histogram = HistogramMetricFamily(
            "sebridge_delivery_seconds",
            "Seconds from a transition being recorded to its delivery, by sink.",
            labels=["sink"],
        )
        for sink, (buckets, total) in latencies.items():
            cumulative, shown = 0, []
            for bound, count in zip(_BOUNDS, buckets, strict=True):
                cumulative += count
                shown.append((bound, float(cumulative)))
            histogram.add_metric([sink], shown, total)
        yield histogram
        yield _counter(
            "sebridge_approvals",
            "Approvals by channel and what became of them, counted by the process that "
            "settled them.",
            ["via", "outcome"],
            approvals,
        )
        yield _counter(
            "sebridge_hooks",
            "Readiness hook runs by stage and outcome.",
            ["stage", "outcome"],
            hooks,
        )
        build = GaugeMetricFamily("sebridge_build_info", "sebridge's version.", labels=["version"])
        build.add_metric([__version__], 1)
        yield build


def _counter(
    name: str, documentation: str, labels: list[str], counts: dict[tuple[str, ...], float]
) -> CounterMetricFamily:
    family = CounterMetricFamily(name, documentation, labels=labels)
    for values, count in counts.items():
        family.add_metric(list(values), count)
    return family

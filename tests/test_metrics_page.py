"""GET /metrics at a bounded cost (web/metrics_page.py): one collection shared by the
scrapes of a second, the store read once for them, at most two scrapes waiting, the rest
answered 503 at once; the page the same as prometheus_client's own rendering.

A storm of scrapes against a running daemon: bench/metrics_storm.py."""

from __future__ import annotations

import gzip
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry, Counter, generate_latest
from prometheus_client.core import GaugeMetricFamily
from prometheus_client.openmetrics.exposition import (
    generate_latest as openmetrics_latest,
)
from prometheus_client.registry import Collector

from sebridge.engine.metrics import Metrics
from sebridge.store import Store
from sebridge.store.tallies import Tallies, read_tallies
from sebridge.web.metrics_export import registry_of
from sebridge.web.metrics_page import MetricsPage
from sebridge.web.store_gauges import StoreGauges


class Clock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


class Counted(Collector):
    """A gauge whose value is the number of times it was collected; `gate` (when set)
    holds each collection until it is opened."""

    def __init__(self) -> None:
        self.collections = 0
        self.gate: threading.Event | None = None
        self.entered = threading.Event()

    def collect(self) -> Iterator[GaugeMetricFamily]:
        self.collections += 1
        self.entered.set()
        if self.gate is not None:
            assert self.gate.wait(10)
        yield GaugeMetricFamily("collections", "Times collected.", value=self.collections)


class Answer:
    def __init__(self) -> None:
        self.status = ""
        self.headers: dict[str, str] = {}
        self.body = b""


def get(page: MetricsPage, method: str = "GET", **headers: str) -> Answer:
    answer = Answer()

    def start_response(status: str, headers: list[tuple[str, str]], *_: Any) -> None:
        answer.status = status
        answer.headers = dict(headers)

    environ = {"REQUEST_METHOD": method, "PATH_INFO": "/metrics"}
    environ |= {f"HTTP_{name.upper()}": value for name, value in headers.items()}
    answer.body = b"".join(page(environ, start_response))
    return answer


def test_the_scrapes_of_one_second_share_one_collection() -> None:
    registry, counted, clock = CollectorRegistry(), Counted(), Clock()
    registry.register(counted)
    page = MetricsPage(registry, clock=clock)
    bodies = {get(page).body for _ in range(50)}
    assert counted.collections == 1
    assert bodies == {
        b"# HELP collections Times collected.\n# TYPE collections gauge\ncollections 1.0\n"
    }
    clock.now += 0.99
    assert get(page).body == bodies.pop()
    clock.now += 0.01  # one second after the collection began: collected again
    assert b"collections 2.0" in get(page).body
    assert counted.collections == 2


def test_the_store_is_read_once_for_the_scrapes_of_one_second(
    make_store: Callable[..., Store],
) -> None:
    store = make_store(agent="vm0")
    metrics, clock, reads = Metrics(["jsonl"]), Clock(), []

    def read() -> Tallies:
        reads.append(1)
        return read_tallies(store.db, ["jsonl"])

    gauges = StoreGauges(read, ["jsonl"])
    registry_of(metrics).register(gauges)
    page = MetricsPage(registry_of(metrics), clock=clock)
    try:
        answers = [get(page) for _ in range(20)]
        threads = [threading.Thread(target=get, args=(page,)) for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(reads) == 1
        assert all(a.status == "200 OK" for a in answers)
        assert b'sebridge_events{state="new"} 0.0' in answers[0].body
        clock.now += 1.0
        get(page)
        assert len(reads) == 2
    finally:
        gauges.stop()


def test_scrapes_wait_for_the_collection_under_way_and_beyond_two_are_turned_away() -> None:
    registry, counted = CollectorRegistry(), Counted()
    registry.register(counted)
    counted.gate = threading.Event()
    page = MetricsPage(registry, max_scrapes=2)
    answers: list[Answer] = []
    first = threading.Thread(target=lambda: answers.append(get(page)))
    second = threading.Thread(target=lambda: answers.append(get(page)))
    first.start()
    assert counted.entered.wait(10)  # the first collects (and is held there)
    second.start()  # the second waits for it
    try:
        for _ in range(3):  # the slots are taken: answered at once, never waiting
            busy = get(page)
            assert busy.status == "503 Service Unavailable"
            assert busy.headers["Retry-After"] == "1"
    finally:
        counted.gate.set()
        first.join(10)
        second.join(10)
    assert [a.status for a in answers] == ["200 OK", "200 OK"]
    assert answers[0].body == answers[1].body
    assert counted.collections == 1
    assert get(page).status == "200 OK"  # the slots are free again; the collection is fresh


def test_the_page_is_prometheus_clients_own_in_each_format() -> None:
    registry = CollectorRegistry()
    requests = Counter("requests", "Requests.", ["outcome"], registry=registry)
    requests.labels("ok").inc(3)
    page = MetricsPage(registry)
    plain = get(page)
    assert plain.body == generate_latest(registry)
    assert plain.headers["Content-Type"].startswith("text/plain; version=0.0.4")
    zipped = get(page, accept_encoding="gzip")
    assert zipped.headers["Content-Encoding"] == "gzip"
    assert gzip.decompress(zipped.body) == plain.body
    open_metrics = get(page, accept="application/openmetrics-text; version=1.0.0")
    assert open_metrics.body == openmetrics_latest(registry)
    assert open_metrics.headers["Content-Type"].startswith("application/openmetrics-text")
    assert get(page, "POST").status == "405 Method Not Allowed"


def test_a_failed_collection_is_tried_again_by_the_next_scrape() -> None:
    class Failing(Collector):
        fail = True

        def collect(self) -> Iterator[GaugeMetricFamily]:
            if self.fail:
                raise RuntimeError("the collector broke")
            yield GaugeMetricFamily("fine", "Fine.", value=1)

    registry, failing = CollectorRegistry(), Failing()
    registry.register(failing)
    page = MetricsPage(registry)
    with pytest.raises(RuntimeError):  # the server answers 500 (web/server.py)
        get(page)
    failing.fail = False
    assert b"fine 1.0" in get(page).body

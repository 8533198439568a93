"""GET /metrics at a bounded cost, however many scrapes come at once.

Rendering the page collects every figure (a store read among them,
web/store_gauges.py) and formats some hundred samples: a few
milliseconds. A thousand scrapes at once each doing so took 20 s of CPU
and starved /healthz and the poll. Here the figures are collected at most
once per `max_age` (1 s): the scrapes of that second share one collection,
and its encodings (text or OpenMetrics, plain or gzip) are made once each.
Scrapes that come while a collection is under way wait for it rather than
start their own; at most `max_scrapes` wait or collect at once (each holds
one of the HTTP server's threads), and one beyond that is answered 503 with
Retry-After at once, so /healthz and the other routes always keep threads.
Imported only when /metrics is served (prometheus_client with it).
See docs/ARCHITECTURE.md, "Metrics and probes".
"""

from __future__ import annotations

import gzip
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any

from prometheus_client.exposition import choose_encoder, gzip_accepted
from prometheus_client.metrics_core import Metric
from prometheus_client.registry import Collector

from sebridge.kernel.wsgi import StartResponse

__all__ = ["MAX_AGE", "MAX_SCRAPES", "MetricsPage"]

MAX_AGE = 1.0  # seconds the figures of one collection are served for
# Scrapes collecting or waiting for a collection at once: two of the HTTP server's four
# threads (web/server.py), leaving the others to /healthz, /readyz and the integrations.
MAX_SCRAPES = 2
# Encodings kept per collection: the Accept header picks one, and a client could
# name many (versions, escapings); past these they are made each time, not kept.
_KEPT_ENCODINGS = 8
_BUSY = b"too many scrapes at once; retry in a second\n"


class _Collected:
    """One collection's families, and the encodings made of them."""

    def __init__(self, families: list[Metric], at: float) -> None:
        self.families = families
        self.at = at
        self._encoded: dict[tuple[str, bool], bytes] = {}
        self._lock = threading.Lock()

    def collect(self) -> Iterator[Metric]:
        """As a registry: the encoders read the families through this."""
        return iter(self.families)

    def encoded(self, accept: str, compress: bool) -> tuple[bytes, str]:
        """The page in the format `accept` asks for (gzipped or not), and its type."""
        encoder, content_type = choose_encoder(accept)
        key = (content_type, compress)
        with self._lock:
            body = self._encoded.get(key)
        if body is None:
            body = encoder(self)  # only its collect() is read
            if compress:
                body = gzip.compress(body)
            with self._lock:
                if len(self._encoded) < _KEPT_ENCODINGS:
                    self._encoded[key] = body
        return body, content_type


class MetricsPage:
    """The WSGI app of GET /metrics for `registry`.

    Args:
        registry: what a scrape shows (web/metrics_export.py: registry_of, store gauges registered).
        max_age: seconds one collection is served for.
        max_scrapes: scrapes collecting or waiting for a collection at once; the rest 503.
        clock: monotonic seconds (tests).
    """

    def __init__(
        self,
        registry: Collector,
        *,
        max_age: float = MAX_AGE,
        max_scrapes: int = MAX_SCRAPES,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self._registry = registry
        self._max_age = max_age
        self._clock = clock
        self._slots = threading.BoundedSemaphore(max_scrapes)
        self._changed = threading.Condition()
        self._last: _Collected | None = None
        self._collecting = False

    def __call__(self, environ: dict[str, Any], start_response: StartResponse) -> Iterable[bytes]:
        if environ.get("REQUEST_METHOD") not in ("GET", "HEAD"):
            return _answer(start_response, "405 Method Not Allowed", b"use GET\n", allow="GET")
        collected = self._collected()
        if collected is None:
            return _answer(start_response, "503 Service Unavailable", _BUSY, retry_after="1")
        compress = gzip_accepted(environ.get("HTTP_ACCEPT_ENCODING", ""))
        body, content_type = collected.encoded(environ.get("HTTP_ACCEPT", ""), compress)
        return _answer(start_response, "200 OK", body, content_type, gzipped=compress)

    def _collected(self) -> _Collected | None:
        """A collection no older than max_age; None when max_scrapes are already waiting."""
        fresh = self._fresh()
        if fresh is not None:  # the common case: no slot, no wait
            return fresh
        if not self._slots.acquire(blocking=False):
            return None
        try:
            with self._changed:
                while True:
                    fresh = self._fresh()
                    if fresh is not None:
                        return fresh
                    if not self._collecting:  # none under way: this scrape makes it
                        self._collecting = True
                        break
                    self._changed.wait()  # one under way: share it
            return self._collect()
        finally:
            self._slots.release()

    def _collect(self) -> _Collected:
        made: _Collected | None = None
        try:
            at = self._clock()  # its age counts from before the figures were read
            made = _Collected(list(self._registry.collect()), at)
            return made
        finally:
            with self._changed:
                self._collecting = False
                if made is not None:
                    self._last = made
                self._changed.notify_all()  # on failure a waiter tries in its turn

    def _fresh(self) -> _Collected | None:
        last = self._last
        if last is not None and self._clock() - last.at < self._max_age:
            return last
        return None


def _answer(
    start_response: StartResponse,
    status: str,
    body: bytes,
    content_type: str = "text/plain; charset=utf-8",
    *,
    gzipped: bool = False,
    allow: str = "",
    retry_after: str = "",
) -> list[bytes]:
    headers = [
        ("Content-Type", content_type),
        ("Content-Length", str(len(body))),
        ("Cache-Control", "no-store"),
    ]
    if gzipped:
        headers.append(("Content-Encoding", "gzip"))
    if allow:
        headers.append(("Allow", allow))
    if retry_after:
        headers.append(("Retry-After", retry_after))
    start_response(status, headers)
    return [body]

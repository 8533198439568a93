"""ImdsClient: the only code that talks to the Instance Metadata Service.

Every call over sebridge's HTTP client (kernel/http_client.py), the poll's connection
kept alive from poll to poll, never through a proxy (IMDS is link-local and a proxy in
between is exactly what the `Metadata: true` header exists to catch). An unchanged
body is not parsed again: the previous Document object is returned as is,
so callers can tell "nothing changed" by identity. Each attempt's outcome is
told to `on_request` (the daemon's metrics: sebridge_imds_requests_total).
"""

from __future__ import annotations

import json
import logging
import random
import threading
import time
from collections.abc import Callable, Iterable
from typing import Any

from sebridge.imds.answers import check_status, failure_reason, too_large
from sebridge.imds.endpoint import split_endpoint
from sebridge.imds.parse import parse_document
from sebridge.kernel.backoff import backoff_delay
from sebridge.kernel.errors import (
    ImdsError,
    ImdsThrottledError,
    ImdsTimeoutError,
    ImdsUnavailableError,
    MalformedDocumentError,
)
from sebridge.kernel.http_client import HttpClient, NoAnswer, TimedOut, TooLarge
from sebridge.model import Document, Incarnation

__all__ = [
    "API_VERSIONS",
    "DEFAULT_API_VERSION",
    "DEFAULT_ENDPOINT",
    "MAX_DOCUMENT",
    "REQUEST_OUTCOMES",
    "ImdsClient",
]

DEFAULT_ENDPOINT = "http://169.254.169.254"
DEFAULT_API_VERSION = "2020-07-01"
# Every documented Scheduled Events version, oldest first.
API_VERSIONS = (
    "2017-03-01",
    "2017-08-01",
    "2017-11-01",
    "2019-01-01",
    "2019-04-01",
    "2019-08-01",
    "2020-07-01",
)
SCHEDULED_EVENTS_PATH = "/metadata/scheduledevents"
COMPUTE_PATH = "/metadata/instance/compute"
COMPUTE_API_VERSION = "2021-02-01"
# IMDS enables Scheduled Events on the first request and may take up to two
# minutes to answer it.
FIRST_CALL_TIMEOUT = 120.0
# A 429 whose Retry-After is longer than this is not waited out inside a call:
# the caller's next tick is the retry.
MAX_IN_CALL_WAIT = 2.0
# A Scheduled Events document is a few KB; one over this is refused unread (at most
# this many bytes and one more are taken from the socket), and polling goes on. 4 MiB:
# a document of 10,000 events (about 3 MB) is still recorded and delivered
# (bench/big_backlog.py); at 1 MiB one of 3,400 was refused.
MAX_DOCUMENT = 4 * 1024 * 1024

# What became of one HTTP attempt, as on_request hears it: answered 2xx; failed and
# retried within the call (5xx, 404/410, refused or reset); a 429 waited out and
# retried; failed for good (the call raises: whatever the cause, a 429 included).
REQUEST_OUTCOMES = ("ok", "retry", "throttled", "error")

_GET_HEADERS = {"Metadata": "true"}
_POST_HEADERS = {"Metadata": "true", "Content-Type": "application/json"}

log = logging.getLogger(__name__)


class ImdsClient:
    """Scheduled Events over one reused connection.

    Args:
        endpoint: scheme://host[:port] of IMDS; the path is ours.
        api_version: one of API_VERSIONS.
        timeout: read timeout of every call after the first answer.
        first_timeout: read timeout until IMDS has answered once (>= 120 s in
            production: the first request enables the service).
        retries: extra attempts within one call for retryable failures
            (refused, reset, 404, 410, 429, 5xx); timeouts are not retried
            in-call, the caller's next poll is the retry.
        sleep, jitter: injected for tests; jitter() returns a float in [0, 1).

    on_request(outcome) hears every HTTP attempt (one of REQUEST_OUTCOMES), on the
    calling thread: the daemon counts them (engine/daemon.py sets it).
    """

    def __init__(
        self,
        endpoint: str = DEFAULT_ENDPOINT,
        api_version: str = DEFAULT_API_VERSION,
        *,
        timeout: float = 5.0,
        connect_timeout: float = 2.0,
        first_timeout: float = FIRST_CALL_TIMEOUT,
        retries: int = 2,
        backoff: float = 0.1,
        sleep: Callable[[float], None] = time.sleep,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        if api_version not in API_VERSIONS:
            raise ValueError(
                f"api-version {api_version!r} is not a Scheduled Events version; "
                f"use one of {', '.join(API_VERSIONS)}"
            )
        scheme, host, port = split_endpoint(endpoint)
        self.endpoint = f"{scheme}://{host}:{port}"
        self.api_version = api_version
        self._first_timeout = max(first_timeout, timeout)
        self._retries = retries
        self._backoff = backoff
        self._sleep = sleep
        self._jitter = jitter
        self._answered = False
        self._timeout = timeout
        self._origin = f"{scheme}://[{host}]:{port}" if ":" in host else self.endpoint
        # Two connections kept (the client's pool): a poll and an approval may overlap.
        self._http = HttpClient(
            timeout=timeout, connect_timeout=connect_timeout, whole_call=False, proxies=False
        )
        self._last_body: bytes | None = None
        self._last_document: Document | None = None
        self._cache_lock = threading.Lock()
        self._interrupted = False
        self._on_request: Callable[[str], None] = _not_counted

    def on_request(self, count: Callable[[str], None]) -> None:
        """Tell `count` the outcome of every HTTP attempt from now on (REQUEST_OUTCOMES);
        it must be cheap (it runs once per poll) and must not raise."""
        self._on_request = count

    def get_document(self) -> Document:
        """The current Scheduled Events document.

        Returns the very same object as the previous call when the body is
        byte-for-byte unchanged.

        Raises:
            ImdsError: any failure, typed (see sebridge.errors).
        """
        body = self._call("GET", SCHEDULED_EVENTS_PATH, self.api_version)
        with self._cache_lock:
            if body == self._last_body and self._last_document is not None:
                return self._last_document
        # Once per document that differs: an odd event is said once, not at every poll.
        document = parse_document(body, warn=_said)
        with self._cache_lock:
            self._last_body, self._last_document = body, document
        return document

    def start(self, event_ids: Iterable[str], incarnation: Incarnation | None = None) -> None:
        """Approve events: POST StartRequests. IMDS answers 200 even when another VM approved.

        Raises:
            ImdsRequestError: IMDS answered 400 (unknown event id, malformed body).
            ImdsError: any other failure.
        """
        ids = list(event_ids)
        if not ids:
            raise ValueError("start() needs at least one event id")
        payload: dict[str, Any] = {"StartRequests": [{"EventId": i} for i in ids]}
        if incarnation is not None:
            payload["DocumentIncarnation"] = incarnation
        self._call("POST", SCHEDULED_EVENTS_PATH, self.api_version, json.dumps(payload).encode())

    def instance_compute(self) -> bytes:
        """The compute section of instance metadata, as IMDS sent it (imds/tags.py reads it)."""
        return self._call("GET", COMPUTE_PATH, COMPUTE_API_VERSION)

    def instance_name(self) -> str:
        """This VM's name as Resources lists it (compute.name, not the hostname)."""
        body = self.instance_compute()
        try:
            name = json.loads(body).get("name")
        except (ValueError, AttributeError):
            name = None
        if not isinstance(name, str) or not name:
            raise MalformedDocumentError("IMDS instance metadata has no compute name")
        return name

    def interrupt(self) -> None:
        """The process is stopping: a call waiting for IMDS ends now, later calls fail at once.

        Safe from any thread."""
        self._interrupted = True
        self._http.interrupt()

    def close(self) -> None:
        """Close the kept-alive connections."""
        self._http.close()

    def _call(self, method: str, path: str, version: str, body: bytes | None = None) -> bytes:
        attempt = 0
        while True:
            try:
                answer = self._once(method, path, version, body)
            except ImdsError as exc:
                wait = self._retry_wait(exc, attempt)
                if wait is None:
                    self._on_request("error")
                    raise
                self._on_request("throttled" if isinstance(exc, ImdsThrottledError) else "retry")
                log.debug("IMDS %s %s failed (%s); retrying in %.2fs", method, path, exc, wait)
                self._sleep(wait)
                attempt += 1
            else:
                self._on_request("ok")
                return answer

    def _retry_wait(self, exc: ImdsError, attempt: int) -> float | None:
        if not exc.retryable or attempt >= self._retries or isinstance(exc, _NOT_RETRIED_IN_CALL):
            return None
        # Jittered: the VMs of one host see the same outage and must not retry in step.
        wait = backoff_delay(attempt, base=self._backoff, jitter=self._jitter())
        if exc.retry_after is not None:
            if exc.retry_after > MAX_IN_CALL_WAIT:
                return None
            wait = max(wait, exc.retry_after)
        return wait

    def _once(self, method: str, path: str, version: str, body: bytes | None) -> bytes:
        read_timeout = self._timeout if self._answered else self._first_timeout
        self._check_interrupted(method, path)
        url = f"{self._origin}{path}?api-version={version}"
        headers = _POST_HEADERS if body is not None else _GET_HEADERS
        try:
            answer = self._http.request(
                method,
                url,
                body=body,
                headers=headers,
                read_timeout=read_timeout,
                limit=MAX_DOCUMENT,
            )
        except TimedOut:
            raise self._timed_out(method, path, read_timeout) from None
        except NoAnswer as exc:
            self._check_interrupted(method, path)  # cut short by interrupt(): not an outage
            raise self._unreachable(exc.cause) from None
        except TooLarge as exc:
            raise too_large(method, path, exc.length, MAX_DOCUMENT) from None
        self._answered = True
        return check_status(method, path, answer.status, answer.headers, answer.body)

    def _check_interrupted(self, method: str, path: str) -> None:
        if self._interrupted:
            raise ImdsTimeoutError(f"IMDS {method} {path} abandoned: sebridge is stopping")

    def _timed_out(self, method: str, path: str, seconds: float | None) -> ImdsTimeoutError:
        return ImdsTimeoutError(
            f"IMDS at {self.endpoint} did not answer {method} {path} within "
            f"{seconds or 0:g}s; it is slow or hanging"
        )

    def _unreachable(self, exc: BaseException) -> ImdsUnavailableError:
        return ImdsUnavailableError(
            f"cannot reach IMDS at {self.endpoint} ({failure_reason(exc)}); "
            "is this an Azure VM, or is the simulator running?"
        )


def _not_counted(outcome: str) -> None:
    """on_request's default: nobody counts."""


def _said(problem: str) -> None:
    log.warning("IMDS document: %s", problem)


# Waiting again for a hanging IMDS, or asking a proxy for its page again, only
# delays the tick; the next poll is the retry.
_NOT_RETRIED_IN_CALL = (ImdsTimeoutError, MalformedDocumentError)

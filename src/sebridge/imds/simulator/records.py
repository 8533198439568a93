"""What the simulator received: HTTP requests, POSTs and accepted StartRequests.

Tests assert on these (what a client really sent), so they are kept in order
and handed out as copies. They are capped so a long `sebridge simulate`
session stays small.
"""

from __future__ import annotations

import collections
import threading
from dataclasses import asdict, dataclass
from typing import Any

__all__ = ["PostRecord", "Recorder", "RequestRecord"]

_MAX_RECORDS = 10_000


@dataclass(frozen=True)
class PostRecord:
    """One POST to /metadata/scheduledevents, whatever its outcome.

    Args:
        at: clock time it was received.
        ids: the EventIds found in the body (best effort for malformed bodies).
        status: the HTTP status answered (0 when a fault answered nothing).
        body: the raw body, decoded leniently.
        error: the error message answered, if any.
    """

    at: float
    ids: tuple[str, ...]
    status: int
    body: str
    error: str | None = None


@dataclass(frozen=True)
class RequestRecord:
    """One HTTP request; `client` (host, port) tells connections apart (keep-alive)."""

    at: float
    method: str
    path: str
    client: tuple[str, int]
    status: int


class Recorder:
    """Thread-safe, capped, ordered records."""

    def __init__(self) -> None:
        """Start with nothing recorded."""
        self._lock = threading.Lock()
        self._start_requests: collections.deque[str] = collections.deque(maxlen=_MAX_RECORDS)
        self._posts: collections.deque[PostRecord] = collections.deque(maxlen=_MAX_RECORDS)
        self._requests: collections.deque[RequestRecord] = collections.deque(maxlen=_MAX_RECORDS)

    def add_start_request(self, event_id: str) -> None:
        """Remember one accepted approval of an event."""
        with self._lock:
            self._start_requests.append(event_id)

    def add_post(self, post: PostRecord) -> None:
        """Remember one POST to the events endpoint."""
        with self._lock:
            self._posts.append(post)

    def add_request(self, request: RequestRecord) -> None:
        """Remember one HTTP request."""
        with self._lock:
            self._requests.append(request)

    @property
    def start_requests(self) -> list[str]:
        """EventIds of accepted StartRequests, in order, repeats included."""
        with self._lock:
            return list(self._start_requests)

    @property
    def posts(self) -> list[PostRecord]:
        """Every POST to the events endpoint, in order."""
        with self._lock:
            return list(self._posts)

    @property
    def requests(self) -> list[RequestRecord]:
        """Every HTTP request received, in order."""
        with self._lock:
            return list(self._requests)

    def as_json(self) -> dict[str, Any]:
        """The approval records as the control API reports them."""
        with self._lock:
            return {
                "start_requests": list(self._start_requests),
                "posts": [asdict(post) for post in self._posts],
            }

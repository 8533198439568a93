"""Injected faults and the optional rate limit for the simulated `/metadata/` paths.

Faults form a queue: each has a count and is consumed one per request it
applies to, so a test can say "the next two requests fail with 500".
"""

from __future__ import annotations

import collections
import threading
from dataclasses import dataclass, replace

__all__ = ["FAULT_KINDS", "PROXY_LOGIN_PAGE", "Fault", "FaultQueue", "RateLimiter"]

FAULT_KINDS: tuple[str, ...] = (
    "500",
    "429",
    "status",
    "hang",
    "hang_after",
    "malformed",
    "html",
    "slow_first",
    "reset",
    "oversized",
)
# "oversized": the real document padded to this size (a broken or hostile endpoint).
DEFAULT_OVERSIZED = 10 * 1024 * 1024
# "hang_after": the request is carried out (a StartRequests POST is taken), then its answer
# is held like "hang": IMDS did it, the caller never hears so.
_DEFAULT_SECONDS = {"hang": 30.0, "hang_after": 30.0, "slow_first": 5.0}

# What a client sees when a corporate proxy intercepts the request: a 200
# with an HTML login page instead of JSON.
PROXY_LOGIN_PAGE = """<!DOCTYPE html>
<html>
<head><title>Corporate Web Gateway - Sign in</title></head>
<body>
<h1>Authentication required</h1>
<p>Please sign in to continue browsing.</p>
<form method="post" action="/login">
<input name="username"> <input name="password" type="password">
<button type="submit">Sign in</button>
</form>
</body>
</html>
"""


@dataclass
class Fault:
    """One queued fault.

    Args:
        kind: one of FAULT_KINDS.
        count: how many more requests it applies to.
        seconds: for "hang", "hang_after" and "slow_first", how long to hold the request
            (real seconds).
        status: for "status", the HTTP status to answer.
        size: for "oversized", the answer's size in bytes.
    """

    kind: str
    count: int = 1
    seconds: float = 0.0
    status: int = 0
    size: int = 0

    def applies_to(self, method: str, path: str) -> bool:
        """Whether this fault is consumed by a request (slow_first only by an events GET)."""
        if self.kind == "slow_first":
            return method == "GET" and path == "/metadata/scheduledevents"
        return True

    def describe(self) -> str:
        """A short human-readable form, for logs."""
        if self.kind == "status":
            return f"status {self.status}"
        if self.kind == "oversized":
            return f"oversized {self.size} bytes"
        if self.kind in _DEFAULT_SECONDS:
            return f"{self.kind} {self.seconds:g}s"
        return self.kind


def make_fault(
    kind: str,
    count: int = 1,
    seconds: float | None = None,
    status: int | None = None,
    size: int | None = None,
) -> Fault:
    """Validate and build a fault; raises ValueError naming the bad argument."""
    if kind not in FAULT_KINDS:
        raise ValueError(f"kind: unknown fault {kind!r}; expected one of {', '.join(FAULT_KINDS)}")
    if isinstance(count, bool) or not isinstance(count, int) or count < 1:
        raise ValueError(f"count: must be a positive integer, got {count!r}")
    if seconds is not None and (
        isinstance(seconds, bool) or not isinstance(seconds, int | float) or seconds < 0
    ):
        raise ValueError(f"seconds: must be a non-negative number, got {seconds!r}")
    code = 0
    if kind == "status":
        # A 1xx is not a final answer, so it cannot stand in for one.
        if isinstance(status, bool) or not isinstance(status, int) or not 200 <= status <= 599:
            raise ValueError(
                f"status: fault 'status' needs an HTTP status 200..599, got {status!r}"
            )
        code = status
    elif status is not None:
        raise ValueError(f"status: only fault 'status' takes a status, not {kind!r}")
    if size is not None and (
        kind != "oversized" or isinstance(size, bool) or not isinstance(size, int) or size < 1
    ):
        raise ValueError(f"size: only fault 'oversized' takes a size in bytes, got {size!r}")
    wait = float(seconds) if seconds is not None else _DEFAULT_SECONDS.get(kind, 0.0)
    length = (size or DEFAULT_OVERSIZED) if kind == "oversized" else 0
    return Fault(kind=kind, count=count, seconds=wait, status=code, size=length)


class FaultQueue:
    """Thread-safe queue of faults, consumed in order by the requests they apply to."""

    def __init__(self) -> None:
        """Start with no faults."""
        self._lock = threading.Lock()
        self._faults: list[Fault] = []

    def push(self, fault: Fault) -> None:
        """Queue a fault behind the ones already queued."""
        with self._lock:
            self._faults.append(fault)

    def take(self, method: str, path: str) -> Fault | None:
        """Consume one use of the first queued fault that applies to this request."""
        with self._lock:
            for index, fault in enumerate(self._faults):
                if fault.applies_to(method, path):
                    fault.count -= 1
                    if fault.count <= 0:
                        del self._faults[index]
                    return replace(fault, count=1)
        return None

    def clear(self) -> int:
        """Drop every queued fault; returns how many there were."""
        with self._lock:
            dropped = len(self._faults)
            self._faults.clear()
            return dropped

    def pending(self) -> list[Fault]:
        """Copies of the queued faults, in order."""
        with self._lock:
            return [Fault(f.kind, f.count, f.seconds, f.status) for f in self._faults]


class RateLimiter:
    """At most `per_second` requests in any one-second window (IMDS allows 5 per second)."""

    def __init__(self, per_second: int) -> None:
        """Allow `per_second` requests per sliding second."""
        if per_second < 1:
            raise ValueError(f"rate_limit must be at least 1 request per second, got {per_second}")
        self.per_second = per_second
        self._lock = threading.Lock()
        self._recent: collections.deque[float] = collections.deque()

    def allow(self, now: float) -> bool:
        """Count a request at `now`; False when it exceeds the limit (rejected ones don't count)."""
        with self._lock:
            while self._recent and self._recent[0] <= now - 1.0:
                self._recent.popleft()
            if len(self._recent) >= self.per_second:
                return False
            self._recent.append(now)
            return True

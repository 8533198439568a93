"""What an HTTP answer means for a delivery: delivered, retry (after how long) or fail.

One mapping for every integration (Alertmanager's `Retrier.Check`):

    2xx                                       delivered
    408, 429, 5xx                             retry, after Retry-After when given
    any other status                          fail: a person has to fix something
    no answer (refused, reset, timed out)     retry

408 says the server gave up waiting for our request, 429 that we sent too
many, 5xx that the server failed: the same request may succeed later. When a
throttle comes without a readable Retry-After it waits the API's default;
any other retry without one is left to the dispatcher's backoff. An attempt
that got no answer may have landed: the sink looks before it sends again
(Message.maybe_sent), this module only says "retry".

What differs between APIs is configured (`StatusRules`), never written again:
the default wait and which statuses take it, a cap on the wait, and the
API's own words for a status (Slack answers HTTP 200 with `"ok": false,
"error": "ratelimited"`). Each integration still words its errors: what
happened and what to fix.
"""

from __future__ import annotations

import http.client
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError, RetryableDeliveryError
from sebridge.kernel.retry_after import retry_after

__all__ = ["NO_ANSWER", "UNANSWERED", "Failure", "StatusRules", "retried"]

# What HTTP clients raise when no whole answer came: refused, reset or timed out
# (urllib's, requests' and slack_sdk's errors are OSErrors), or an answer cut off.
NO_ANSWER: tuple[type[BaseException], ...] = (OSError, http.client.HTTPException)
_RETRIED = frozenset({408, 429})  # and every 5xx


def retried(status: int) -> bool:
    """Whether an answer of this status is worth the same request again later."""
    return status in _RETRIED or 500 <= status <= 599


@dataclass(frozen=True)
class Failure:
    """An attempt that did not deliver: retried (after `wait` seconds, when known) or not.

    Args:
        status: the HTTP status the answer stands for (0: no answer came).
    """

    retry: bool
    wait: float | None = None
    status: int = 0

    def error(self, message: str) -> DeliveryError:
        """The error the sink raises, saying `message` (scrubbed of secrets by the caller)."""
        if self.retry:
            return RetryableDeliveryError(message, retry_after=self.wait)
        return PermanentDeliveryError(message)


UNANSWERED = Failure(retry=True)  # an exception in NO_ANSWER: retried, after the backoff


@dataclass(frozen=True)
class StatusRules:
    """How one API's answers map onto delivered, retry and fail.

    Args:
        default_wait: seconds a throttle waits when its Retry-After is absent or unreadable.
        throttles: the statuses that wait `default_wait` then (other retries: the backoff).
        cap: the longest Retry-After honoured (None: as long as the server says).
        codes: the API's own error words that stand for a status ({"ratelimited": 429}).
    """

    default_wait: float = 1.0
    throttles: frozenset[int] = frozenset({429})
    cap: float | None = None
    codes: Mapping[str, int] = field(default_factory=dict)

    def failure(
        self,
        status: int,
        headers: Mapping[str, Any] | None = None,
        *,
        code: str = "",
        now: Clock = utcnow,
    ) -> Failure | None:
        """None for a success (2xx); else whether to retry the request, and when.

        Args:
            code: the API's word for what went wrong, when it says the request failed
                whatever its HTTP status (Slack's `"ok": false, "error": ...`).
        """
        status = self.stands_for(status, code)
        if 200 <= status <= 299:
            return None
        if not retried(status):
            return Failure(retry=False, status=status)
        default = self.default_wait if status in self.throttles else None
        wait = retry_after(headers, default=default, cap=self.cap, now=now)
        return Failure(retry=True, wait=wait, status=status)

    def stands_for(self, status: int, code: str = "") -> int:
        """The status an answer counts as: its own when that is retried; else what its
        error word stands for; a failure the API reported with a 2xx counts as 400."""
        if not code or retried(status):
            return status
        return self.codes.get(code, status if not 200 <= status <= 299 else 400)

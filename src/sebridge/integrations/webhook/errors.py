"""A webhook's answers -> RetryableDeliveryError or PermanentDeliveryError.

The kernel's one mapping decides (kernel/delivery_status.py): 408, 429 and 5xx,
and no answer (refused, reset, timed out: said apart, `transport_error`), are
retried by the dispatcher after
Retry-After when given (a throttle without one waits 5 s, no wait is longer than
an hour); a redirect is not followed (the signed body would go elsewhere) and,
like any other status, fails, saying the status and a bounded excerpt of the
answer. Nothing quoted carries a secret: the excerpt is scrubbed of the URL's
pieces, the signing keys, the extra headers' and the template variables' values.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping

from sebridge.kernel import redact
from sebridge.kernel.delivery_status import UNANSWERED, StatusRules
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError
from sebridge.kernel.http_client import NoAnswer, TimedOut
from sebridge.kernel.text import clip, displayable

__all__ = ["RULES", "SHOWN", "Scrubber", "answer_error", "transport_error"]

RULES = StatusRules(default_wait=5.0, cap=3600.0)
SHOWN = 200  # characters of an answer worth quoting


class Scrubber:
    """Removes a webhook's secrets from text a server or a library wrote."""

    def __init__(self, url: str, others: Iterable[str]) -> None:
        self._secrets = [*redact.url_secrets(url), *(s for s in others if s)]

    def __call__(self, text: str) -> str:
        return redact.scrub(text, self._secrets)

    def excerpt(self, body: str) -> str:
        """An answer's first words, one line, displayable, scrubbed and bounded."""
        return clip(displayable(self(" ".join(body.split()))), SHOWN)


def answer_error(
    name: str, status: int, body: str, headers: Mapping[str, str], scrub: Scrubber
) -> DeliveryError | None:
    """The error for the webhook's answer; None for a success (any 2xx)."""
    failure = RULES.failure(status, headers)
    if failure is None:
        return None
    excerpt = scrub.excerpt(body)
    said = f": {excerpt}" if excerpt else ""
    if failure.status == 429:
        return failure.error(f"{name}: throttled (HTTP 429), retry after {failure.wait:g}s{said}")
    if failure.retry:
        return failure.error(f"{name}: the webhook failed (HTTP {status}); will retry{said}")
    if 300 <= status <= 399:
        return PermanentDeliveryError(
            f"{name}: the webhook answered HTTP {status}, a redirect: sebridge does not follow"
            f" one (the signed body would go elsewhere); set {name}.url to where it points"
        )
    fix = {
        401: f"; check {name}.secret against the receiver's key, and {name}.headers",
        403: f"; check {name}.secret against the receiver's key, and {name}.headers",
        404: f"; check {name}.url",
        413: f"; the body is too large for the receiver: shorten {name}.template",
    }.get(status, "")
    return PermanentDeliveryError(f"{name}: the webhook refused it (HTTP {status}){said}{fix}")


def transport_error(name: str, exc: NoAnswer, scrub: Scrubber, timeout: float) -> DeliveryError:
    """No whole answer came: retried, said as what happened. What fails before the request
    is sent (refused, no route, TLS, a connect timeout): the webhook cannot be reached. What
    fails after is the receiver's: it took the request and did not answer within `timeout`
    seconds, or closed the connection without a whole answer (it may have acted on it: the
    retry carries the same webhook-id)."""
    detail = clip(displayable(scrub(str(exc.cause))), SHOWN)
    said = f"{type(exc.cause).__name__}{': ' + detail if detail else ''}"
    if not exc.sent:
        return UNANSWERED.error(f"{name}: cannot reach the webhook ({said}); will retry")
    if isinstance(exc, TimedOut):
        return UNANSWERED.error(
            f"{name}: the webhook took the request and did not answer within {timeout:g} s"
            f" ({name}.timeout); will retry"
        )
    return UNANSWERED.error(
        f"{name}: the webhook closed the connection without a whole answer ({said}); will retry"
    )

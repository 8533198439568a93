"""Teams webhook answers -> RetryableDeliveryError or PermanentDeliveryError.

The kernel's one mapping decides (kernel/delivery_status.py): 408, 429 and
5xx (and network trouble) are retried by the dispatcher, honouring
Retry-After (a throttle without one waits 5 s); 400, 401/403, 404 and 413
need a person and say what to fix. No message ever carries the webhook URL
(its `sig` grants posting): answers are scrubbed of it, transport errors are
named by kind only (kernel/net_cause.py).
"""

from __future__ import annotations

from collections.abc import Mapping

from sebridge.kernel import redact
from sebridge.kernel.delivery_status import UNANSWERED, StatusRules
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError
from sebridge.kernel.http_client import NoAnswer, TimedOut
from sebridge.kernel.net_cause import no_answer_cause

__all__ = ["RULES", "answer_error", "scrub", "transport_error"]

RULES = StatusRules(default_wait=5.0, cap=3600.0)
_SHOWN = 200  # characters of a webhook's answer worth quoting

_FIXES = {
    400: "the webhook refused the {what} (HTTP 400{detail}): fix the teams/ templates"
    " (or your override of them), or check teams.format against the URL's kind",
    401: "teams.webhook_url was refused (HTTP 401{detail}): its signature is wrong or"
    " expired; copy the URL again from the workflow's trigger (or the connector)",
    403: "teams.webhook_url was refused (HTTP 403{detail}): the flow or connector is not"
    " allowed to post any more; check it in Teams (Workflows) and copy its URL again",
    404: "teams.webhook_url was not found (HTTP 404{detail}): the workflow or connector was"
    " deleted or turned off; create it again and update teams.webhook_url",
    413: "the {what} is too large for Teams (HTTP 413): shorten the teams/ templates",
}


def scrub(text: str, url: str) -> str:
    """`text` without the URL, its path, its query or any long query value (a webhook may
    echo any of them)."""
    return redact.scrub(text, redact.url_secrets(url))


def answer_error(
    status: int, body: str, headers: Mapping[str, str], *, url: str, what: str
) -> DeliveryError | None:
    """The error for a webhook's answer; None for a success (any 2xx).

    Args:
        url: the webhook URL, scrubbed from anything quoted.
        what: "card" or "MessageCard", for the message.
    """
    if "HTTP error 429" in body:  # connectors wrap a throttle in a 200
        status = 429
    failure = RULES.failure(status, headers)
    if failure is None:
        return None
    if failure.status == 429:
        return failure.error(f"teams: throttled by Teams (429), retry after {failure.wait:g}s")
    if failure.retry:
        return failure.error(f"teams: Teams failed (HTTP {status}); will retry")
    detail = scrub(" ".join(body.split()), url)[:_SHOWN]
    if status in _FIXES:
        shown = f": {detail}" if detail and status != 413 else ""
        return PermanentDeliveryError("teams: " + _FIXES[status].format(what=what, detail=shown))
    return PermanentDeliveryError(
        f"teams: the webhook answered HTTP {status}" + (f": {detail}" if detail else "")
    )


def transport_error(exc: NoAnswer, timeout: float) -> DeliveryError:
    """Timeouts, refused or reset connections, TLS trouble: retried. Named by kind only
    (kernel/net_cause.py): a library's text may quote the URL. A timeout after the card went
    out is the receiver's: it took the card and did not answer, whole, within `timeout`
    seconds (a dripped answer included: the deadline cut it short)."""
    if exc.sent and isinstance(exc, TimedOut):
        return UNANSWERED.error(
            f"teams: the webhook took the card and did not answer within {timeout:g} s"
            " (teams.timeout); will retry"
        )
    cause = no_answer_cause(exc.cause)
    return UNANSWERED.error(f"teams: cannot reach the webhook ({cause}); will retry")

"""Jira failures -> RetryableDeliveryError or PermanentDeliveryError, saying what to fix.

The kernel's one mapping decides (kernel/delivery_status.py): network
failures, 408, 429, 503 and other 5xx are retried by the dispatcher
(Retry-After honoured; 429 and 503 without one wait 1 s); 401, 403, 400 and
404 need a person. The jira library's own `str(JIRAError)`
prints the request's headers (the Authorization header among them), so it
is never used: messages are built from the status and Jira's errorMessages /
errors, and scrubbed of every secret the caller names.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from sebridge.kernel.delivery_status import NO_ANSWER, UNANSWERED, StatusRules
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError, RetryableDeliveryError
from sebridge.kernel.redact import scrub

__all__ = ["RULES", "delivery_error", "jira_messages", "scrub"]

# Jira Cloud answers 503 when a resource limit is reached (Atlassian's rate limiting
# guide), often with Retry-After: a throttle, waited for as a 429 is.
RULES = StatusRules(default_wait=1.0, throttles=frozenset({429, 503}))
_SIGN_IN = (
    "check jira.email and jira.api_token (Jira Cloud: an API token from "
    "id.atlassian.com/manage-profile/security/api-tokens) or jira.pat (Data Center: "
    "a personal access token from your profile)"
)


_FIXES = {
    401: "Jira refused the credentials (401): " + _SIGN_IN,
    403: "the Jira account lacks a permission (403){detail}: grant it Browse projects, "
    "Create issues, Add comments and Transition issues in jira.project (Cloud also answers "
    "403 after too many failed sign-ins: " + _SIGN_IN + ")",
    404: "not found (404){detail}: the issue was deleted or moved, or the account cannot "
    "see it; check jira.url and jira.project",
    400: "Jira rejected the request (400){detail}: check jira.project and jira.issue_type "
    "(`sebridge check` lists what the project offers), and that the project needs no other "
    "field on create",
}


def jira_messages(response: Any) -> str:
    """Jira's own explanation: errorMessages and field errors ("field: message"), joined."""
    try:
        data = response.json()
    except (AttributeError, ValueError):
        return ""
    if not isinstance(data, dict):
        return ""
    parts = [str(m) for m in data.get("errorMessages") or () if m]
    errors = data.get("errors")
    if isinstance(errors, dict):
        parts += [f"{field}: {message}" for field, message in errors.items()]
    if not parts and data.get("message"):
        parts.append(str(data["message"]))
    return "; ".join(parts[:5])


def delivery_error(
    exc: BaseException, *, what: str, secrets: Iterable[str], server: str = "Jira"
) -> DeliveryError:
    """The DeliveryError for `exc`, raised while doing `what` ("create an issue in OPS").

    Args:
        server: how to name Jira when it cannot be reached (its URL, which carries no secret).
    """
    error = _classify(exc, what, server)
    clean = scrub(str(error), list(secrets))
    return type(error)(clean, retry_after=error.retry_after)


def _classify(exc: BaseException, what: str, server: str) -> DeliveryError:
    from jira.exceptions import JIRAError

    where = f"jira: cannot {what}"
    if isinstance(exc, JIRAError):
        return _http_error(exc, where)
    if isinstance(exc, NO_ANSWER):  # requests' errors are OSErrors
        # Refused, reset, timed out, DNS, TLS: the request may or may not have landed.
        return UNANSWERED.error(f"{where}: cannot reach Jira at {server}: {type(exc).__name__}")
    if isinstance(exc, ValueError | KeyError):
        return RetryableDeliveryError(
            f"{where}: Jira's answer is not the JSON it documents (a proxy's page?); will retry"
        )
    return RetryableDeliveryError(f"{where}: unexpected {type(exc).__name__}")


def _http_error(exc: Any, where: str) -> DeliveryError:
    status = int(exc.status_code or 0)
    response = exc.response
    said = jira_messages(response) if response is not None else ""
    detail = f" ({said})" if said else ""
    if status == 0:
        # Raised by the library itself, not from an answer (e.g. "Empty Response!").
        text = str(getattr(exc, "text", "") or "no answer")
        return UNANSWERED.error(f"{where}: {text}")
    failure = RULES.failure(status, getattr(response, "headers", None))
    if failure is not None and failure.status in RULES.throttles:
        why = "rate limited" if status == 429 else "unavailable"
        return failure.error(
            f"{where}: Jira is {why} (HTTP {status}), retry after {failure.wait:g}s"
        )
    if failure is not None and failure.retry:
        # A 5xx often carries an HTML page: name the status, not the body.
        return failure.error(f"{where}: Jira failed (HTTP {status}); will retry")
    if status in _FIXES:
        return PermanentDeliveryError(f"{where}: " + _FIXES[status].format(detail=detail))
    return PermanentDeliveryError(f"{where}: Jira answered HTTP {status}{detail}")

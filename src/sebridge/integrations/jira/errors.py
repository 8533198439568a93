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

from sebridge.integrations.library_deadlines import CallExpired
from sebridge.kernel.delivery_status import NO_ANSWER, UNANSWERED, StatusRules
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError, RetryableDeliveryError
from sebridge.kernel.net_cause import no_answer_cause
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
    exc: BaseException,
    *,
    what: str,
    secrets: Iterable[str],
    server: str = "Jira",
    sign_in: str = "jira.api_token",
) -> DeliveryError:
    """The DeliveryError for `exc`, raised while doing `what` ("create an issue in OPS");
    its `key` is the one to look at (jira.url, `sign_in`, jira.project...).

    Args:
        server: how to name Jira when it cannot be reached (its URL, which carries no secret).
        sign_in: the key of the credential in use (jira.pat or jira.api_token).
    """
    error = _classify(exc, what, server)
    clean = scrub(str(error), list(secrets))
    key = sign_in if error.key == _SIGN_IN_KEY else error.key
    return type(error)(clean, retry_after=error.retry_after, key=key)


def _classify(exc: BaseException, what: str, server: str) -> DeliveryError:
    from jira.exceptions import JIRAError

    where = f"jira: cannot {what}"
    if isinstance(exc, JIRAError):
        return _http_error(exc, where)
    if isinstance(exc, CallExpired):  # an answer dripped or stalled: the deadline cut it
        return _about(
            UNANSWERED.error(
                f"{where}: cannot reach Jira at {server}: timed out (did not answer within"
                f" {exc.seconds:g} s); will retry"
            ),
            _URL,
        )
    if isinstance(exc, NO_ANSWER):  # requests' errors are OSErrors
        # Refused, reset, timed out, DNS, TLS: the request may or may not have landed.
        cause = no_answer_cause(exc)
        return _about(UNANSWERED.error(f"{where}: cannot reach Jira at {server}: {cause}"), _URL)
    if isinstance(exc, ValueError | KeyError):
        return RetryableDeliveryError(
            f"{where}: Jira's answer is not the JSON it documents (a proxy's page?); will retry",
            key=_URL,
        )
    return RetryableDeliveryError(f"{where}: unexpected {type(exc).__name__}", key=_URL)


# The keys a failure is about (DeliveryError.key); the credential's is the caller's.
_URL = "jira.url"
_SIGN_IN_KEY = "sign-in"
_KEYS = {401: _SIGN_IN_KEY, 403: "jira.project", 404: "jira.project", 400: "jira.issue_type"}


def _about(error: DeliveryError, key: str) -> DeliveryError:
    error.key = key
    return error


def _http_error(exc: Any, where: str) -> DeliveryError:
    status = int(exc.status_code or 0)
    response = exc.response
    said = jira_messages(response) if response is not None else ""
    detail = f" ({said})" if said else ""
    if status == 0:
        # Raised by the library itself, not from an answer (e.g. "Empty Response!").
        text = str(getattr(exc, "text", "") or "no answer")
        return _about(UNANSWERED.error(f"{where}: {text}"), _URL)
    failure = RULES.failure(status, getattr(response, "headers", None))
    if failure is not None and failure.status in RULES.throttles:
        why = "rate limited" if status == 429 else "unavailable"
        said = f"{where}: Jira is {why} (HTTP {status}), retry after {failure.wait:g}s"
        return _about(failure.error(said), _URL)
    if failure is not None and failure.retry:
        # A 5xx often carries an HTML page: name the status, not the body.
        return _about(failure.error(f"{where}: Jira failed (HTTP {status}); will retry"), _URL)
    if status in _FIXES:
        return PermanentDeliveryError(
            f"{where}: " + _FIXES[status].format(detail=detail), key=_KEYS[status]
        )
    return PermanentDeliveryError(f"{where}: Jira answered HTTP {status}{detail}", key=_URL)

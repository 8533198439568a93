"""Slack Web API failures -> RetryableDeliveryError or PermanentDeliveryError.

The kernel's one mapping decides (kernel/delivery_status.py), told Slack's
own words for a throttle or an outage (`"ok": false` answered with HTTP 200):
those, 408, 429 and 5xx are retried by the dispatcher; everything that a
person has to fix is permanent, with a message saying what to fix. Messages
never carry the bot token: the caller passes it in and it is scrubbed from
every text.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from slack_sdk.errors import SlackApiError, SlackClientError

from sebridge.integrations.library_deadlines import CallExpired
from sebridge.kernel.delivery_status import NO_ANSWER, UNANSWERED, StatusRules
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError, RetryableDeliveryError
from sebridge.kernel.redact import scrub

__all__ = ["RULES", "delivery_error"]

# Slack's error words that mean "later" rather than "fix something" (Web API reference).
RULES = StatusRules(
    default_wait=1.0,
    codes={
        "ratelimited": 429,
        "request_timeout": 408,
        "internal_error": 500,
        "fatal_error": 500,
        "service_unavailable": 503,
    },
)
_AUTH_CODES = frozenset({"invalid_auth", "not_authed", "token_revoked", "account_inactive"})
_FIXES = {
    "channel_not_found": "channel {channel} not found: check slack.channel "
    "(a channel id like C0123456789)",
    "not_in_channel": "the bot is not in {channel}: /invite @sebridge in that channel",
    "is_archived": "channel {channel} is archived: unarchive it or change slack.channel",
    "invalid_blocks": "Slack rejected the blocks of slack/message.j2{detail}: "
    "fix the template (or your override of it)",
    "msg_too_long": "the message is too long for Slack: shorten the slack/ templates",
}


def delivery_error(exc: BaseException, *, method: str, channel: str, token: str) -> DeliveryError:
    """The DeliveryError to raise for `exc`, raised by WebClient `method` for `channel`.

    Args:
        token: the bot token, removed from the message should anything echo it.
    """
    error = _classify(exc, method=method, channel=channel)
    text = str(error)
    clean = scrub(text, [token], mask="xox?-***")
    return error if clean == text else type(error)(clean, retry_after=error.retry_after)


def _classify(exc: BaseException, *, method: str, channel: str) -> DeliveryError:
    where = f"slack: {method} to {channel}"
    if isinstance(exc, SlackApiError):
        return _api_error(exc, where=where, channel=channel)
    if isinstance(exc, CallExpired):  # an answer dripped or stalled: the deadline cut it
        return UNANSWERED.error(
            f"{where}: Slack did not answer within {exc.seconds:g} s; will retry"
        )
    if isinstance(exc, NO_ANSWER):
        # urllib's URLError, socket timeouts, refused and reset connections, cut-off bodies.
        reason = getattr(exc, "reason", None) or exc
        return UNANSWERED.error(f"{where}: cannot reach Slack: {reason}")
    if isinstance(exc, SlackClientError):
        return PermanentDeliveryError(f"{where}: the request was refused by slack_sdk: {exc}")
    return RetryableDeliveryError(f"{where}: unexpected {type(exc).__name__}: {exc}")


def _api_error(exc: SlackApiError, *, where: str, channel: str) -> DeliveryError:
    response = exc.response
    status = int(getattr(response, "status_code", 0) or 0)
    data = response.data if isinstance(getattr(response, "data", None), dict) else {}
    code = str(data.get("error") or "")
    failure = RULES.failure(status, getattr(response, "headers", None), code=code)
    if failure is not None and failure.status == 429:
        return failure.error(f"{where}: rate limited by Slack, retry after {failure.wait:g}s")
    if failure is not None and failure.retry:
        # A 5xx often carries an HTML page, not JSON: name the status, not the body.
        what = code if code in RULES.codes else f"HTTP {status}"
        return failure.error(f"{where}: Slack failed ({what}); will retry")
    if code in _AUTH_CODES:
        return PermanentDeliveryError(
            f"{where}: slack.bot_token is not valid ({code}): set a current bot token "
            "(xoxb-...) from the app's OAuth & Permissions page"
        )
    if code == "missing_scope":
        needed = str(data.get("needed") or "the scope the method needs")
        return PermanentDeliveryError(
            f"{where}: slack.bot_token lacks the {needed} scope: add it under "
            "OAuth & Permissions and reinstall the app"
        )
    if code in _FIXES:
        return PermanentDeliveryError(
            f"{where}: {code}: " + _FIXES[code].format(channel=channel, detail=_details(data))
        )
    return PermanentDeliveryError(f"{where}: Slack answered {code or f'HTTP {status}'}")


def _details(data: Mapping[str, Any]) -> str:
    """Slack's own explanation of rejected blocks ("errors", response_metadata.messages)."""
    meta = data.get("response_metadata")
    messages = data.get("errors") or (meta.get("messages") if isinstance(meta, dict) else None)
    if not isinstance(messages, list) or not messages:
        return ""
    return " (" + "; ".join(str(m) for m in messages[:3]) + ")"

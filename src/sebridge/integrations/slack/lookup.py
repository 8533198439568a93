"""Finding what an earlier attempt may already have posted, so a retry never posts twice.

When chat.postMessage fails without a clear answer (a 5xx, a timeout, a
dropped connection) Slack may have posted the message anyway. Before a retry
posts again, these look for it by the metadata every sebridge message
carries. The same holds after a crash between the post and its record in the
store: the attempt was recorded as begun first (Message.maybe_sent). They
run only then, so Slack's tight history rate limits (the reason receipts are
kept in the store) still hold.
"""

from __future__ import annotations

import logging
from datetime import datetime
from typing import Any

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

__all__ = ["PARENT_TYPE", "REPLY_TYPE", "find_parent", "reply_posted"]

log = logging.getLogger(__name__)

PARENT_TYPE = "sebridge_event"  # metadata of an event's message
REPLY_TYPE = "sebridge_transition"  # metadata of a thread reply
# Look this far before the transition: clocks differ, and the first attempt came after it.
SLACK = 120.0
# Without the scope or with a channel name, the lookup cannot work: posting
# (perhaps twice) beats never posting. Other failures propagate: retried later.
_CANNOT_LOOK = frozenset({"missing_scope", "channel_not_found", "not_in_channel"})


def find_parent(client: WebClient, channel: str, event_id: str, since: datetime) -> str | None:
    """The ts of the event's message in `channel`, if one was posted since `since`."""
    messages = _messages(
        "conversations.history",
        client,
        channel=channel,
        oldest=f"{since.timestamp() - SLACK:.6f}",
        limit=200,
    )
    for message in messages:
        if _payload(message, PARENT_TYPE).get("event_id") == event_id:
            return str(message.get("ts"))
    return None


def reply_posted(client: WebClient, channel: str, ts: str, key: str, since: datetime) -> bool:
    """Whether the thread under `ts` already has the reply marked `key`."""
    messages = _messages(
        "conversations.replies",
        client,
        channel=channel,
        ts=ts,
        oldest=f"{since.timestamp() - SLACK:.6f}",
        limit=200,
    )
    return any(_payload(m, REPLY_TYPE).get("key") == key for m in messages)


def _messages(method: str, client: WebClient, **params: Any) -> list[dict[str, Any]]:
    try:
        response = client.api_call(method, params={**params, "include_all_metadata": "true"})
    except SlackApiError as exc:
        error = exc.response.get("error")
        if error in _CANNOT_LOOK:
            log.warning(
                "cannot check Slack for an earlier post (%s: %s); posting again may duplicate it "
                "(add channels:history, use a channel id)",
                method,
                error,
            )
            return []
        raise
    return list(response.get("messages") or [])


def _payload(message: dict[str, Any], kind: str) -> dict[str, Any]:
    metadata = message.get("metadata") or {}
    if metadata.get("event_type") != kind:
        return {}
    payload = metadata.get("event_payload")
    return payload if isinstance(payload, dict) else {}

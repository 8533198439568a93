"""`sebridge check --send-test` for Teams: one card that only says what it is.

A Workflows webhook answers 202 once it has the card, before its flow posts
it: the finding says accepted, not shown. A problem is named by
teams.webhook_url, the key it reached, and says why, from the sink's table
(teams/errors.py): the webhook's answer or the kind of network failure, and
what to fix; never the URL.
"""

from __future__ import annotations

from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.teams.settings import ADAPTIVE
from sebridge.integrations.teams.sink import TeamsSink
from sebridge.kernel.errors import DeliveryError

__all__ = ["send_trial"]


def send_trial(sink: TeamsSink, format: str, note: TrialNote) -> Finding:
    """Post the note as the configured format's card."""
    try:
        status = sink.post_text("sebridge test message", note.text)
    except DeliveryError as exc:
        said = str(exc).removeprefix("teams: ").removesuffix("; will retry")
        return Finding("teams.webhook_url", False, f"test card not delivered: {said}")
    finally:
        sink.close()
    if format == ADAPTIVE:
        return Finding(
            "teams",
            True,
            f"test card accepted by the webhook (HTTP {status}); its flow then posts it to the"
            " channel: look there (a flow that fails shows in its run history, not here)",
        )
    return Finding("teams", True, f"test card posted by the connector (HTTP {status})")

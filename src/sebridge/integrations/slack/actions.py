"""What a click on a Slack button does, free of any framework.

Bolt (Socket Mode or HTTP mode) acks the click first, then hands a `Click`
here. Approve goes through the same `Approver.approve()` as the CLI, then
carries the approval out at once (the click -> IMDS POST path must not wait
for the next tick). Only configured approvers may click; anyone else gets an
ephemeral refusal and an audit entry. A click on an event that is gone or
started updates the message to say so.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from sebridge.approve import Approver
from sebridge.errors import ApprovalError
from sebridge.integrations.slack.approvers import SlackApprovers
from sebridge.model import Transition, TransitionKind
from sebridge.store import AuditEntry, EventRecord, Store

__all__ = ["APPROVE", "TAKE", "Click", "SlackActions"]

log = logging.getLogger(__name__)

APPROVE, TAKE = "approve", "take"


@dataclass(frozen=True)
class Click:
    """A button click, converted from Slack's payload at the edge."""

    action: str  # APPROVE or TAKE
    event_id: str
    user_id: str
    channel: str
    message_ts: str


# Updates the clicked message to show an event that can no longer be approved.
ShowState = Callable[[str, str, EventRecord, str], None]


def _utcnow() -> datetime:
    return datetime.now(UTC)


class SlackActions:
    """Handles Approve and "I'm on it" clicks.

    Args:
        carry_out: runs right after an approval is recorded (POST it to IMDS,
            wake the dispatcher).
        show_state: updates the clicked message for a gone or started event.
        sinks: where a TAKEN transition goes.
    """

    def __init__(
        self,
        approver: Approver,
        store: Store,
        approvers: SlackApprovers,
        client: WebClient,
        *,
        carry_out: Callable[[], None],
        show_state: ShowState,
        sinks: Callable[[], Sequence[str]],
        clock: Callable[[], datetime] = _utcnow,
    ) -> None:
        self._approver = approver
        self._store = store
        self._approvers = approvers
        self._client = client
        self._carry_out = carry_out
        self._show_state = show_state
        self._sinks = sinks
        self._clock = clock

    def handle(self, click: Click) -> None:
        """Act on a click (already acked)."""
        if not self._approvers.allows(click.user_id):
            self._refuse(click)
            return
        if click.action == TAKE:
            self._take(click)
            return
        try:
            approval, new = self._approver.approve(click.event_id, click.user_id, "slack")
        except ApprovalError as exc:
            self._stale(click, str(exc))
            return
        if new:
            log.info("%s approved %s from Slack", click.user_id, approval.event_id)
            self._carry_out()
        else:
            self._ephemeral(click, f"Already approved by {_who(approval.actor)}.")

    def _refuse(self, click: Click) -> None:
        log.warning(
            "refused %s on %s by %s: not an approver", click.action, click.event_id, click.user_id
        )
        self._store.audit(
            AuditEntry(
                self._clock(),
                click.event_id,
                click.user_id,
                "slack",
                "refused",
                f"{click.action}: not in slack.approvers",
            )
        )
        self._ephemeral(
            click,
            "You are not one of sebridge's approvers, so nothing was done. "
            "Ask an admin to add you (or your user group) to slack.approvers.",
        )

    def _take(self, click: Click) -> None:
        record = self._store.event(click.event_id)
        if record is None or not record.present:
            self._ephemeral(click, "This event is gone from IMDS: nothing to take.")
            return
        now = self._clock()
        taken = Transition(
            TransitionKind.TAKEN, record.event, now, actor=click.user_id, via="slack"
        )
        self._store.record_transition(taken, self._sinks(), now)
        self._carry_out()

    def _stale(self, click: Click, reason: str) -> None:
        record = self._store.event(click.event_id)
        if record is None:
            self._ephemeral(click, f"Nothing was approved: {reason}")
            return
        try:
            self._show_state(click.channel, click.message_ts, record, reason)
        except Exception:  # the refusal stands even if Slack cannot show it
            log.exception("could not update the message of %s", click.event_id)

    def _ephemeral(self, click: Click, text: str) -> None:
        try:
            self._client.chat_postEphemeral(channel=click.channel, user=click.user_id, text=text)
        except (SlackApiError, OSError) as exc:
            log.warning("could not tell %s: %s", click.user_id, exc)


def _who(actor: str) -> str:
    return f"<@{actor}>" if actor[:1] in ("U", "W") and actor.isalnum() else actor

"""What a click on a Slack button does, free of any framework.

Bolt (Socket Mode or HTTP mode) acks the click first, then hands a `Click`
here. Approve is one request to the approval use case (the same as the CLI,
the link page and Jira), which the carrier carries out at once; the person
hears the outcome: nothing more when it was approved (the message itself
changes), an ephemeral note when someone approved first or it is held, the
message redrawn when the event is gone or started. Only configured
approvers may click; anyone else gets an ephemeral refusal and an audit
entry.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from dataclasses import dataclass

from slack_sdk import WebClient
from slack_sdk.errors import SlackApiError

from sebridge.integrations.base import Desk
from sebridge.integrations.slack.approvers import SlackApprovers
from sebridge.integrations.slack.names import SlackNames
from sebridge.model.approval import ApprovalState, OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from sebridge.model.records import EventRecord
from sebridge.model.wording.outlook import ways_out

__all__ = ["APPROVE", "APPROVE_ANYWAY", "TAKE", "Click", "SlackActions"]

log = logging.getLogger(__name__)

APPROVE, TAKE = "approve", "take"
# Approve despite failed or unfinished prepare hooks; Slack asks to confirm first (sink.py).
APPROVE_ANYWAY = "approve_anyway"
VIA = "slack"


@dataclass(frozen=True)
class Click:
    """A button click, converted from Slack's payload at the edge."""

    action: str  # APPROVE, APPROVE_ANYWAY or TAKE
    event_id: str
    user_id: str
    channel: str
    message_ts: str
    user_name: str = ""  # the payload's name of the user ("": none given)


# Updates the clicked message to show an event that can no longer be approved.
ShowState = Callable[[str, str, EventRecord, str], None]


class SlackActions:
    """Handles Approve and "I'm on it" clicks.

    Args:
        desk: the approval use case.
        show_state: updates the clicked message for a gone or started event.
        names: what each user is called (default: users.info through `client`): every
            channel names the approver, Slack says the member id as a mention.
    """

    def __init__(
        self,
        desk: Desk,
        approvers: SlackApprovers,
        client: WebClient,
        *,
        show_state: ShowState,
        names: SlackNames | None = None,
    ) -> None:
        self._names = names or SlackNames(client)
        self._desk = desk
        self._approvers = approvers
        self._client = client
        self._show_state = show_state

    def handle(self, click: Click) -> None:
        """Act on a click (already acked)."""
        if not self._approvers.allows(click.user_id):
            self._refuse(click)
            return
        name = self._names.name_of(click.user_id, click.user_name)
        if click.action == TAKE:
            if not self._desk.take(click.event_id, name, VIA, click.user_id):
                self._ephemeral(click, "This event is gone from IMDS: nothing to take.")
            return
        anyway = click.action == APPROVE_ANYWAY
        request = ApprovalRequest(click.event_id, name, VIA, anyway=anyway, actor_id=click.user_id)
        outcome = self._desk.request(request)
        if outcome.kind == OutcomeKind.APPROVED:
            log.info("%s approved %s from Slack", click.user_id, outcome.event_id)
        elif outcome.kind == OutcomeKind.ALREADY and outcome.approval is not None:
            approval = outcome.approval
            who, _, who_id = approval.decider
            how = " anyway" if approval.anyway_by is not None else ""
            self._ephemeral(
                click,
                f"Already approved{how} by {_who(who, who_id)} at {approval.at:%H:%M:%S} UTC "
                f"({outcome.reason}).",
            )
        elif outcome.blocker is not None:  # gone, started or unknown: the message says so
            self._desk.refuse(request, outcome.reason)  # `sebridge history` shows it
            self._stale(click, outcome.reason)
        elif outcome.kind == OutcomeKind.HELD and outcome.approval is not None:
            state = outcome.approval.state
            if state in (ApprovalState.HELD, ApprovalState.WAITING):  # say the ways out
                out = ways_out(outcome.event_id, held=state == ApprovalState.HELD)
                self._ephemeral(click, f"Not carried out: {outcome.reason}. {out}")
            else:
                self._ephemeral(click, f"Your approval is recorded: {outcome.reason}.")
        else:  # refused by IMDS (the thread hears that too)
            self._ephemeral(click, f"Your approval is recorded: {outcome.reason}.")

    def _refuse(self, click: Click) -> None:
        log.warning(
            "refused %s on %s by %s: not an approver", click.action, click.event_id, click.user_id
        )
        name = click.user_name or click.user_id  # no lookup for someone who may not act
        request = ApprovalRequest(click.event_id, name, VIA, actor_id=click.user_id)
        self._desk.refuse(request, f"{click.action}: not in slack.approvers ({click.user_id})")
        self._ephemeral(
            click,
            "You are not one of sebridge's approvers, so nothing was done. "
            "Ask an admin to add you (or your user group) to slack.approvers.",
        )

    def _stale(self, click: Click, reason: str) -> None:
        record = self._desk.event(click.event_id)
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


def _who(actor: str, actor_id: str | None = None) -> str:
    """A person in an ephemeral reply: a mention when Slack knows them, else their name."""
    for ref in (actor_id or "", actor):
        if ref[:1] in ("U", "W") and ref.isalnum():
            return f"<@{ref}>"
    return actor

"""What a channel asks of the approval use case, and the one outcome it gets back.

Slack, the approval link page, Jira, the CLI and the demo each turn their
input into an `ApprovalRequest` and show the `Outcome` as they can (an
ephemeral message, a page, a comment, a line and an exit code). Pure data in the
model, so a channel speaks to the use case (approval/usecase.py) without importing it.
"""

from __future__ import annotations

from dataclasses import dataclass

from sebridge.model.approval import Blocker, OutcomeKind
from sebridge.model.records import ApprovalRecord, EventRecord

__all__ = ["ApprovalRequest", "Outcome"]


@dataclass(frozen=True)
class ApprovalRequest:
    """Someone asks that an event may start now.

    Args:
        event_id: as typed or clicked (matched case-insensitively).
        actor: who, as people call them ("alice" for a Slack user: the click's name,
            "approval link (Ann)", a Jira user, a login name).
        via: through what: "slack", "link", "jira", "cli", "demo".
        anyway: carry it out despite failed or unfinished prepare hooks (approve anyway):
            an approval held or waiting for the VMs' readiness is carried out now.
        actor_id: the channel's own id of the actor (a Slack member id, said as a mention
            in Slack); None elsewhere.
    """

    event_id: str
    actor: str
    via: str
    anyway: bool = False
    actor_id: str | None = None


@dataclass(frozen=True)
class Outcome:
    """What became of one request, as the store says it is now.

    Args:
        approval: the event's approval (this request's, or the earlier one), if any.
        record: the event as the store holds it after the request (None: unknown).
        blocker: for REFUSED before anything was recorded: what stood in the way.
    """

    kind: OutcomeKind
    event_id: str
    reason: str = ""
    approval: ApprovalRecord | None = None
    record: EventRecord | None = None
    blocker: Blocker | None = None

"""What the policy decided for an event: the words every layer reads (the store keeps
it with the event, messages offer an approval or not, the carrier holds or goes on).

The rules that decide are policy/rules.py. See docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

from collections.abc import Collection, Sequence
from dataclasses import dataclass, replace

from sebridge.model import ScheduledEvent
from sebridge.model.leads import Lead, leads_of

__all__ = [
    "ACTIONS",
    "APPROVE",
    "ASK",
    "IGNORE",
    "INFORM",
    "NO_MATCH",
    "NO_RULE",
    "UNREADABLE",
    "Decision",
    "effective",
    "offers_anyway",
    "offers_approval",
    "sinks_for",
]

APPROVE, ASK, INFORM, IGNORE = "approve", "ask", "inform", "ignore"
ACTIONS = (APPROVE, ASK, INFORM, IGNORE)
NO_RULE = "no rule matched"


@dataclass(frozen=True)
class Decision:
    """What happens to one event, decided when it is first seen and stored with it.

    Args:
        action: "approve" (at once, after the prepare hooks), "ask" (a person
            decides), "inform" (announced, no approval offered), "ignore"
            (recorded, sent nowhere).
        rule: the matching rule's name; a built-in rule's readable name; or
            "no rule matched".
        prepare, recover: hook names ([hooks.<name>]).
        remind: seconds before NotBefore at which an event is announced again while
            nobody approved it ("ask") or its approval is held, descending.
        remind_after: seconds after the event was first announced at which it is
            announced again, on the same terms, ascending (model/leads.py).
        on_prepare_failure: "hold" (nothing is POSTed) or "approve" (POST anyway).
        notify: the instances ("slack.dba") that hear every transition of the event, as
            the rule's `notify` names them; None: every instance not `route_only`
            (see `sinks_for`).
        require_agents: a listed VM no sebridge agent ever ran on holds the approval
            (by default it is only named: "no agent: sebridge cannot drain it").
    """

    action: str
    rule: str
    prepare: tuple[str, ...] = ()
    recover: tuple[str, ...] = ()
    remind: tuple[int, ...] = ()
    on_prepare_failure: str = "hold"
    remind_after: tuple[int, ...] = ()
    notify: tuple[str, ...] | None = None
    require_agents: bool = False

    @property
    def leads(self) -> tuple[Lead, ...]:
        """Its reminders' leads, `remind` and `remind_after` alike."""
        return leads_of(self.remind, self.remind_after)


NO_MATCH = Decision(ASK, NO_RULE)
# The stand-in of an event IMDS lists that sebridge cannot read (model.UnreadableEvent):
# announced to every sink a rule without `notify` reaches, never offered for approval
# (its id is not IMDS's).
UNREADABLE = Decision(INFORM, "an event sebridge cannot read")


def effective(decision: Decision, event: ScheduledEvent) -> Decision:
    """The decision as it applies to this event: approve on a started event informs."""
    if decision.action == APPROVE and event.started:
        return replace(decision, action=INFORM)
    return decision


def offers_approval(action: str) -> bool:
    """Whether people are offered an approval (buttons, links, Jira status) for an event
    with this action: not for "inform" (Azure starts it at NotBefore) nor "ignore"; nor
    for "approve": the policy's own approval is recorded with the event, and an Approve
    button beside "sebridge approves this at once" would only answer "already"."""
    return action not in (INFORM, IGNORE, APPROVE)


def offers_anyway(action: str) -> bool:
    """Whether people are offered "Approve anyway" for an event with this action whose
    approval waits for or is held by its prepare hooks: as offers_approval, and for
    "approve" too: the policy's own approval is held by a failed hook like a person's."""
    return action not in (INFORM, IGNORE)


def sinks_for(
    decision: Decision, sinks: Sequence[str], route_only: Collection[str] = ()
) -> tuple[str, ...]:
    """Which of `sinks` (this agent's outbound instances, in registry order) hear an
    event's transitions: none for an ignored event; those its rule's `notify` names; else
    every one not `route_only` (an instance only a rule's notify reaches). A name in
    `notify` this agent has not configured is not its to deliver (a fleet's agents may
    differ). See docs/ARCHITECTURE.md, "Integrations"."""
    if decision.action == IGNORE:
        return ()
    if decision.notify is None:
        return tuple(s for s in sinks if s not in route_only)
    return tuple(s for s in sinks if s in decision.notify)

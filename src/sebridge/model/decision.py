"""What the policy decided for an event: the words every layer reads (the store keeps
it with the event, messages offer an approval or not, the carrier holds or goes on).

The rules that decide are policy/rules.py. See docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace

from sebridge.model import ScheduledEvent
from sebridge.model.leads import Lead, leads_of

__all__ = [
    "ACTIONS",
    "ALL",
    "APPROVE",
    "ASK",
    "DEFAULT_ROUTE",
    "IGNORE",
    "INFORM",
    "NAMED",
    "NO_MATCH",
    "NO_RULE",
    "ROUTES",
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
# What an instance hears (its `route`): every event whatever its rule; the events whose rule
# names no instance in `notify`, and those naming it; only those naming it.
ALL, DEFAULT_ROUTE, NAMED = "all", "default", "named"
ROUTES = (ALL, DEFAULT_ROUTE, NAMED)


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
            the rule's `notify` names them (beside those whose route is "all"); None:
            every instance whose route is "default" or "all" (see `sinks_for`).
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
    decision: Decision, sinks: Sequence[str], routes: Mapping[str, str] | None = None
) -> tuple[str, ...]:
    """Which of `sinks` (this agent's outbound instances, in registry order) hear an
    event's transitions, by each instance's route (`routes`; absent: "default"): none for
    an ignored event (recorded, sent nowhere); a route "all" instance, every other event;
    those its rule's `notify` names; and, for a rule without `notify`, every "default"
    instance. A name in `notify` this agent has not configured is not its to deliver (a
    fleet's agents may differ). See docs/ARCHITECTURE.md, "Integrations"."""
    if decision.action == IGNORE:
        return ()
    routes = routes or {}
    notify = decision.notify
    return tuple(
        s
        for s in sinks
        if routes.get(s) == ALL
        or (s in notify if notify is not None else routes.get(s, DEFAULT_ROUTE) == DEFAULT_ROUTE)
    )

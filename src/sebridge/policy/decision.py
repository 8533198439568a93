"""What the policy decided for an event, and the one function that decides.

Rules are ordered; the first that matches decides; none: `ask`. A started
(unplanned) event has nothing to approve, so an `approve` rule that matches
it announces it instead (`inform`). Pure and fast: decide() runs once per
event first seen, and `sebridge policy explain` asks the same rules why.
See docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace
from datetime import datetime

from sebridge.model import ScheduledEvent
from sebridge.policy.matchers import Facts, Matcher

__all__ = [
    "ACTIONS",
    "APPROVE",
    "ASK",
    "IGNORE",
    "INFORM",
    "NO_MATCH",
    "NO_RULE",
    "Decision",
    "Policy",
    "Rule",
    "decide",
    "effective",
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
        remind: seconds before NotBefore at which an unapproved "ask" event is
            announced again, descending.
        on_prepare_failure: "hold" (nothing is POSTed) or "approve" (POST anyway).
    """

    action: str
    rule: str
    prepare: tuple[str, ...] = ()
    recover: tuple[str, ...] = ()
    remind: tuple[int, ...] = ()
    on_prepare_failure: str = "hold"


NO_MATCH = Decision(ASK, NO_RULE)


@dataclass(frozen=True)
class Rule:
    """One compiled rule: every matcher must hold (none: any event), then `decision`."""

    name: str
    matchers: tuple[Matcher, ...]
    decision: Decision

    def matches(self, f: Facts) -> bool:
        """Whether every matcher holds for this event, on this VM, at this time."""
        # A plain loop, not all(<generator>): decide() runs this for every rule, and the
        # generator cost more than the matchers (bench/policy_rules.py).
        for m in self.matchers:  # noqa: SIM110
            if not m.test(f):
                return False
        return True

    def misses(self, f: Facts) -> list[str]:
        """Why it does not match: one line per matcher that fails, with the value it saw."""
        return [m.why_not(f) for m in self.matchers if not m.test(f)]


@dataclass(frozen=True)
class Policy:
    """The compiled rules (the configured ones, or the built-in ones) and when prepare
    hooks start before NotBefore. Built once from config (policy/compile.py)."""

    rules: tuple[Rule, ...] = ()
    prepare_lead_seconds: int = 300
    builtin: bool = False  # rules from the old keys, not from [[policy.rules]]


def decide(event: ScheduledEvent, policy: Policy, vm_name: str, now: datetime) -> Decision:
    """The first matching rule's decision; "ask" when none matches. A started event is
    never approved (nothing to approve): an "approve" rule announces it ("inform")."""
    facts = Facts(event, vm_name, now)
    for rule in policy.rules:
        if rule.matches(facts):
            return effective(rule.decision, event)
    return NO_MATCH


def effective(decision: Decision, event: ScheduledEvent) -> Decision:
    """The decision as it applies to this event: approve on a started event informs."""
    if decision.action == APPROVE and event.started:
        return replace(decision, action=INFORM)
    return decision


def offers_approval(action: str) -> bool:
    """Whether people are offered an approval (buttons, links, Jira status) for an event
    with this action: not for "inform" (Azure starts it at NotBefore) nor "ignore"."""
    return action not in (INFORM, IGNORE)


def sinks_for(action: str, sinks: Sequence[str]) -> tuple[str, ...]:
    """Which sinks hear an event's transitions: none for an ignored event, else all of them."""
    return () if action == IGNORE else tuple(sinks)

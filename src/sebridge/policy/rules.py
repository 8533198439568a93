"""The rules and the one function that decides.

Rules are ordered; the first that matches decides; none: `ask`. A started
(unplanned) event has nothing to approve, so an `approve` rule that matches
it announces it instead (`inform`). Pure and fast: decide() runs once per
event first seen, and `sebridge policy explain` asks the same rules why.
See docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from sebridge.model import ScheduledEvent
from sebridge.model.decision import NO_MATCH, Decision, effective
from sebridge.policy.matchers import Facts, Matcher, TagsOf, no_tags

__all__ = ["Policy", "Rule", "decide"]


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

    def reasons(self, f: Facts) -> list[str]:
        """Why it matches: one line per matcher, with the value it saw (none: every event
        matches a rule without conditions)."""
        return [m.why(f) for m in self.matchers] or ["no conditions: it matches every event"]


@dataclass(frozen=True)
class Policy:
    """The compiled rules (the configured ones, or the built-in ones) and when prepare
    hooks start before NotBefore. Built once from config (policy/compile.py)."""

    rules: tuple[Rule, ...] = ()
    prepare_lead_seconds: int = 300
    builtin: bool = False  # rules from the old keys, not from [[policy.rules]]


def decide(
    event: ScheduledEvent,
    policy: Policy,
    vm_name: str,
    now: datetime,
    tags_of: TagsOf = no_tags,
) -> Decision:
    """The first matching rule's decision; "ask" when none matches. A started event is
    never approved (nothing to approve): an "approve" rule announces it ("inform").
    tags_of: every VM's recorded Azure tags (read only when a rule's `tags` asks)."""
    facts = Facts(event, vm_name, now, tags_of)
    for rule in policy.rules:
        if rule.matches(facts):
            return effective(rule.decision, event)
    return NO_MATCH

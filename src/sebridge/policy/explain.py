"""Why the policy decides what it decides for one event: `sebridge policy explain`.

The same rules in the same order as decide(), looked at one by one: each
earlier rule with the matchers that failed and what they saw, then the rule
that matched and its decision (or none: ask). Pure; the command
(cli/policy.py) finds the event and prints `lines()`.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from sebridge.model import ScheduledEvent
from sebridge.model.decision import APPROVE, IGNORE, NO_MATCH, Decision, effective
from sebridge.model.leads import leads_words, unreachable, unreachable_line
from sebridge.policy.matchers import Facts, TagsOf, no_tags
from sebridge.policy.rules import Policy

__all__ = ["Explanation", "RuleVerdict", "explain"]

_ACTIONS = {
    "approve": "approve at once",
    "ask": "ask: a person decides (Approve buttons, links, Jira status)",
    "inform": "inform: announced, no approval offered; Azure starts it at NotBefore",
    "ignore": "ignore: recorded, sent to no sink",
}


@dataclass(frozen=True)
class RuleVerdict:
    """One rule looked at: its number (from 1), name, and why it did not match (empty:
    it matched, and `reasons` says why)."""

    number: int
    name: str
    misses: tuple[str, ...]
    reasons: tuple[str, ...] = ()


@dataclass(frozen=True)
class Explanation:
    """The rules looked at (up to the first match), and the decision."""

    event: ScheduledEvent
    vm_name: str
    at: datetime
    builtin: bool
    verdicts: tuple[RuleVerdict, ...]
    decision: Decision
    started_approve: bool  # an approve rule matched a started event: announced instead
    # When the event was first announced (the store's first sight; an event from a file:
    # `at`): which reminder leads its notice can never reach.
    first_seen: datetime | None = None
    # Where the event's transitions go: the instances its decision reaches (None: not
    # asked, no configuration at hand).
    sinks: tuple[str, ...] | None = None

    def lines(self) -> list[str]:
        """For people: the event, each rule looked at, the decision."""
        e = self.event
        where = "this VM" if e.affects(self.vm_name) else "not this VM"
        out = [
            f"event {e.event_id}: {e.event_type}, {e.status}, source {e.source or 'unknown'}, "
            f"duration {_duration(e.duration_seconds)}",
            f"  NotBefore {e.not_before_text or '-'}; Resources {', '.join(e.resources) or '-'} "
            f"({where}: {self.vm_name})",
            f"  Description {_quoted(e.description)}" if e.description is not None else "",
            f"at {self.at.astimezone(UTC):%Y-%m-%d %H:%M:%S} UTC, "
            + (
                "built-in rules (no [[policy.rules]]; shaped by approve_user_events, "
                "approve_freeze_under_seconds, only_this_vm):"
                if self.builtin
                else "[[policy.rules]] in order, first match wins:"
            ),
        ]
        for v in self.verdicts:
            label = f"rule {v.number}" if self.builtin else f"policy.rules[{v.number}]"
            if v.misses:
                out.append(f"  {label} {_quoted(v.name)}: no match")
                out.extend(f"      {why}" for why in v.misses)
            else:
                out.append(f"  {label} {_quoted(v.name)}: matches")
                out.extend(f"      {why}" for why in v.reasons)
        d = self.decision
        if not self.verdicts or self.verdicts[-1].misses:
            out.append("  no rule matched")
        out.append(f"decision: {_action(d)}")
        out.append(f"  rule: {d.rule}")
        if self.started_approve:
            out.append(
                "  the rule says approve, but the event has started: nothing to approve, "
                "so it is announced (inform)"
            )
        out.append(self._sinks_line())
        out.extend(_hooks(d))
        out.append(self._unreachable_line())
        return [line for line in out if line]

    def _sinks_line(self) -> str:
        """Where its transitions go, and why there ("" when not asked)."""
        if self.sinks is None:
            return ""
        said = ", ".join(self.sinks) or "none"
        if self.decision.action == IGNORE:
            return "  sinks: none (ignored)"
        notify = self.decision.notify
        if notify is not None:
            extra = [s for s in self.sinks if s not in notify]
            also = f'; {", ".join(extra)}: route "all"' if extra else ""
            return f"  sinks: {said} (the rule's notify{also})"
        return f'  sinks: {said} (the rule has no notify: every instance not route "named")'

    def _unreachable_line(self) -> str:
        """The decision's reminder leads this event's notice can never reach, as its first
        message says them (model/leads.py); "" when every lead can come."""
        first_seen = self.first_seen or self.at
        missed = unreachable(self.decision.leads, self.event.not_before, first_seen)
        line = unreachable_line(missed, self.event.not_before, first_seen)
        return f"  {line[0].lower()}{line[1:]}" if line else ""

    def as_json(self) -> dict[str, Any]:
        """For scripts: the same, as data."""
        d = self.decision
        return {
            "event_id": self.event.event_id,
            "vm_name": self.vm_name,
            "at": self.at.isoformat(),
            "builtin_rules": self.builtin,
            "rules": [
                {
                    "number": v.number,
                    "name": v.name,
                    "matched": not v.misses,
                    "misses": list(v.misses),
                    "reasons": list(v.reasons),
                }
                for v in self.verdicts
            ],
            "decision": {
                "action": d.action,
                "rule": d.rule,
                "prepare": list(d.prepare),
                "recover": list(d.recover),
                "remind": list(d.remind),
                "remind_after": list(d.remind_after),
                "on_prepare_failure": d.on_prepare_failure,
                "notify": None if d.notify is None else list(d.notify),
                "require_agents": d.require_agents,
            },
            "sinks": None if self.sinks is None else list(self.sinks),
            "started_approve": self.started_approve,
            "unreachable_reminders": [
                {lead.key: lead.seconds}
                for lead in unreachable(d.leads, self.event.not_before, self.first_seen or self.at)
            ],
        }


def explain(
    event: ScheduledEvent,
    policy: Policy,
    vm_name: str,
    now: datetime,
    first_seen: datetime | None = None,
    *,
    audience: Callable[[Decision], Sequence[str]] | None = None,
    tags_of: TagsOf = no_tags,
) -> Explanation:
    """What decide() decides at `now`, and why (the same rules, in the same order): `now`
    is when the event was first seen to explain a recorded decision (a window's answer
    depends on it), or this moment. first_seen: when the event was first announced (its
    reminders' leads count from then; None: as if at `now`). audience: the sinks a
    decision reaches (model/decision.py: sinks_for), to say where the event goes. tags_of:
    every VM's recorded Azure tags (store/vm_tags.py), for a rule's `tags`."""
    verdicts: list[RuleVerdict] = []
    decision, started_approve = NO_MATCH, False
    facts = Facts(event, vm_name, now, tags_of)
    for number, rule in enumerate(policy.rules, 1):
        misses = tuple(rule.misses(facts))
        reasons = () if misses else tuple(rule.reasons(facts))
        verdicts.append(RuleVerdict(number, rule.name, misses, reasons))
        if not misses:
            decision = effective(rule.decision, event)
            started_approve = rule.decision.action == APPROVE and event.started
            break
    return Explanation(
        event,
        vm_name,
        now,
        policy.builtin,
        tuple(verdicts),
        decision,
        started_approve,
        first_seen,
        None if audience is None else tuple(audience(decision)),
    )


def _action(d: Decision) -> str:
    """The action in words; an approval waits for prepare hooks only where the rule has some."""
    said = _ACTIONS.get(d.action, d.action)
    if d.action == APPROVE and d.prepare:
        return f"{said} (after the prepare hooks succeed)"
    return said


def _hooks(d: Decision) -> list[str]:
    lines = []
    if d.prepare:
        lines.append(
            f"  prepare hooks: {', '.join(d.prepare)} (on_prepare_failure: {d.on_prepare_failure})"
        )
    if d.prepare:
        lines.append(_agents(d))
    if d.recover:
        lines.append(f"  recover hooks: {', '.join(d.recover)}")
    if d.leads:
        leads = leads_words(d.leads)
        lines.append(f"  reminders: {leads}, while nobody approved it or its approval is held")
    if not (d.prepare or d.recover or d.leads):
        lines.append("  no hooks, no reminders")
    return lines


def _agents(d: Decision) -> str:
    """What a listed VM no sebridge agent runs on does to the approval (require_agents)."""
    if d.require_agents:
        return "  require_agents: a listed VM no agent runs on holds the approval"
    return "  a listed VM no agent runs on is named (not drained), and does not hold it"


def _quoted(text: str) -> str:
    return json.dumps(text, ensure_ascii=False)


def _duration(seconds: int | None) -> str:
    if seconds is None:
        return "not sent"
    return "unknown (-1)" if seconds < 0 else f"{seconds} s"

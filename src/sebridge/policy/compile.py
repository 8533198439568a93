"""Building the Policy once from config: [[policy.rules]], or the built-in rules.

The built-in rules are what sebridge did before rules existed (Microsoft's
sample), shaped by the old keys, so every existing config means what it
meant: only_this_vm ignores other VMs' events; a started event is announced
for a person (nothing to approve); approve_user_events approves what the
VM's owner started; Freeze under approve_freeze_under_seconds is approved;
anything else: no rule matched, a person decides.
"""

from __future__ import annotations

from zoneinfo import ZoneInfo

from sebridge.config.core import PolicyConfig
from sebridge.config.pattern import user_pattern
from sebridge.config.policy import DAYS, RuleSettings, WindowSettings, seconds_of_day
from sebridge.model.decision import APPROVE, ASK, IGNORE, Decision
from sebridge.policy.matchers import (
    Description,
    Duration,
    EventTypes,
    Matcher,
    Resources,
    Sources,
    Started,
    Tags,
    ThisVm,
    Window,
    shell_pattern,
)
from sebridge.policy.rules import Policy, Rule

__all__ = ["build_policy", "builtin_rules", "compile_rule", "uses_tags"]


def build_policy(config: PolicyConfig) -> Policy:
    """The configured rules, or the built-in ones when there are none."""
    lead = config.prepare_lead_seconds
    if config.rules:
        return Policy(tuple(compile_rule(r) for r in config.rules), lead)
    return Policy(builtin_rules(config), lead, builtin=True)


def uses_tags(config: PolicyConfig) -> bool:
    """Whether a rule matches on Azure tags: then each agent reads its VM's from IMDS."""
    return any(r.tags is not None for r in config.rules)


def compile_rule(rule: RuleSettings) -> Rule:
    """One checked rule (config_policy.check_rules) as matchers and its decision.
    Cheap matchers first: decide() stops at the first that fails."""
    matchers: list[Matcher] = []
    if rule.event_types is not None:
        matchers.append(EventTypes(frozenset(rule.event_types)))
    if rule.sources is not None:
        matchers.append(Sources(frozenset(rule.sources)))
    if rule.min_duration_seconds is not None or rule.max_duration_seconds is not None:
        matchers.append(Duration(rule.min_duration_seconds, rule.max_duration_seconds))
    if rule.this_vm is not None:
        matchers.append(ThisVm(rule.this_vm))
    if rule.description is not None:
        matchers.append(Description(user_pattern(rule.description)))
    if rule.window is not None:
        matchers.append(_window(rule.window))
    matchers.extend(_affected(rule))
    decision = Decision(
        rule.action,
        rule.name,
        prepare=rule.prepare,
        recover=rule.recover,
        remind=rule.remind,
        on_prepare_failure=rule.on_prepare_failure,
        remind_after=rule.remind_after,
        notify=rule.notify,
        require_agents=rule.require_agents,
    )
    return Rule(rule.name, tuple(matchers), decision)


def _affected(rule: RuleSettings) -> list[Matcher]:
    """Who the event affects: `resources` (names), then `tags` (the store is read once)."""
    found: list[Matcher] = []
    if rule.resources is not None:
        found.append(Resources(tuple((p, shell_pattern(p)) for p in rule.resources)))
    if rule.tags is not None:
        found.append(Tags(tuple((k, v, shell_pattern(v)) for k, v in rule.tags.items())))
    return found


def _window(w: WindowSettings) -> Window:
    return Window(
        frozenset(DAYS.index(d) for d in w.days),
        seconds_of_day(w.start),
        seconds_of_day(w.end),
        ZoneInfo(w.timezone),
    )


def builtin_rules(config: PolicyConfig) -> tuple[Rule, ...]:
    """Today's behaviour as rules, named after the keys that shape them."""
    rules: list[Rule] = []

    def add(name: str, action: str, *matchers: Matcher) -> None:
        rules.append(Rule(name, matchers, Decision(action, name)))

    if config.only_this_vm:
        add("other VMs' events (only_this_vm)", IGNORE, ThisVm(False))
    add("already started: nothing to approve", ASK, Started(True))
    if config.approve_user_events:
        add("user-initiated (approve_user_events)", APPROVE, Sources(frozenset({"User"})))
    under = config.approve_freeze_under_seconds
    if under > 0:
        add(
            f"Freeze under {under} s (approve_freeze_under_seconds)",
            APPROVE,
            EventTypes(frozenset({"Freeze"})),
            Duration(0, under - 1),
        )
    return tuple(rules)

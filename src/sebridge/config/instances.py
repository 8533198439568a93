"""Named instances of an integration's section: `[slack]`, `[slack.dba]`, `[slack.web]`.

TOML reads `[slack.dba]` as the table `dba` inside `[slack]`. A table inside
an integration's section whose key is not one of its settings' keys is a
named instance: the instance "slack.dba", read with the same dataclass as
`[slack]`. The keys of `[slack]` itself are the unnamed instance "slack", so
every file written before instances means what it meant. Each instance is
whole on its own: `[slack.dba]` inherits nothing from `[slack]`.

Every instance also takes `route` (what it hears: "all" events whatever their
rule, "default": those whose rule names no instance in `notify` and those
naming it, "named": only those naming it; model/decision.py: sinks_for), with
`route_only = true` kept as an alias of "named", and `transitions` (the kinds
of transition it delivers; unset: its integration's default). Which
integrations may be named at all, and what a rule's `notify` may name, is the
registry's to check (integrations/registry.py). See docs/ARCHITECTURE.md,
"Integrations".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from sebridge.config.reader import Reader, option
from sebridge.model import TransitionKind
from sebridge.model.decision import DEFAULT_ROUTE, NAMED, ROUTES

__all__ = [
    "INSTANCE_KEYS",
    "KINDS",
    "NAME",
    "ROUTE",
    "ROUTE_ONLY",
    "TRANSITIONS",
    "RoutingSettings",
    "Split",
    "named",
    "renamer",
    "split",
]

# An instance's name: it is a metric label value, part of an HTTP path and of a
# credential file's name, so plain.
NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
ROUTE, ROUTE_ONLY, TRANSITIONS = "route", "route_only", "transitions"
# The keys every instance of an integration that sends messages takes, beside its own.
INSTANCE_KEYS = (ROUTE, ROUTE_ONLY, TRANSITIONS)
# What `transitions` may name: every kind of transition.
KINDS = tuple(k.value for k in TransitionKind)


@dataclass(frozen=True)
class RoutingSettings:
    """The keys every instance of an integration that sends messages takes beside its own
    (`[slack]`, `[slack.dba]`): which events it hears, and which of their transitions it
    delivers (model/decision.py: sinks_for). Read like any section's keys: choices in any
    case, the nearest name for a slip.

    Args:
        route: Which events the instance hears: "all" whatever their rule; "default"
            (unset) those whose rule names no instance in `notify`, and those naming it;
            "named" only those whose rule names it in `notify`.
        route_only: true is route = "named" (an older spelling); it must not disagree
            with `route`.
        transitions: The kinds of transition it delivers; unset: its integration's
            default (below). An empty list is refused: it would deliver nothing.
    """

    route: str | None = option(None, choices=ROUTES)
    route_only: bool | None = None
    transitions: tuple[str, ...] | None = option(None, choices=KINDS)


@dataclass
class Split:
    """One integration section as instances: each instance's name ("slack", "slack.dba")
    and its own table (the routing keys taken out), each instance's route when not
    "default", and its `transitions` when given."""

    tables: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    routes: dict[str, str] = field(default_factory=dict)
    transitions: dict[str, tuple[str, ...]] = field(default_factory=dict)


def split(section: str, raw: Any, cls: type[Any], rd: Reader) -> Split:
    """`raw` (the file's `[section]`, absent: None) as its instances; problems to `rd`.

    The unnamed instance is there when the table has keys of its own, or nothing at all
    (`[slack]` written empty means what it meant before instances); a section holding
    only named instances (`[slack.dba]` alone) has no unnamed one."""
    out = Split()
    if raw is None:
        return out
    if not isinstance(raw, Mapping):
        out.tables[section] = raw  # the reader says it must be a table
        return out
    keys = {f.name for f in fields(cls)}
    own = {k: v for k, v in raw.items() if k in keys or not isinstance(v, Mapping)}
    for name, table in raw.items():
        if name in own:
            continue
        if NAME.fullmatch(name):
            _take(out, f"{section}.{name}", table, rd)
        else:
            rd.problems.append(
                f"[{section}.{name}]: an instance's name is a lower-case letter, then up to "
                "31 lower-case letters, digits, - or _"
            )
    if own or not raw:
        _take(out, section, own, rd)
    return out


def _take(out: Split, instance: str, table: Mapping[str, Any], rd: Reader) -> None:
    rest = {k: v for k, v in table.items() if k not in INSTANCE_KEYS}
    given = {k: v for k, v in table.items() if k in INSTANCE_KEYS}
    out.tables[instance] = rest
    if not given:
        return
    keys = rd.section(instance, given, RoutingSettings, {})
    route = keys.route
    if keys.route_only is not None:  # the alias: true is "named"
        alias = NAMED if keys.route_only else None
        if route is None:
            route = alias
        elif (route == NAMED) != keys.route_only:
            rd.error(
                f"{instance}.{ROUTE_ONLY}",
                f'{str(keys.route_only).lower()} disagrees with route = "{route}" '
                '(route_only = true is route = "named"): keep route alone',
            )
    if route is not None and route != DEFAULT_ROUTE:
        out.routes[instance] = route
    if keys.transitions is not None:
        if not keys.transitions:
            rd.error(
                f"{instance}.{TRANSITIONS}",
                "empty: it would deliver nothing; leave it out for the default, "
                f"or name kinds: {', '.join(KINDS)}",
            )
        out.transitions[instance] = tuple(dict.fromkeys(keys.transitions))


def renamer(section: str, instance: str, cls: type[Any]) -> Callable[[str], str]:
    """What rewrites a text written for `[section]` (a problem, a check's finding) to name
    `instance`: "jira.url" is said as "jira.change.url", "[jira]" as "[jira.change]", a
    leading "jira:" as "jira.change:". Only `cls`'s own keys are renamed (a host name like
    teams.microsoft.com is not)."""
    if instance == section:
        return lambda text: text
    keys = "|".join(re.escape(f.name) for f in fields(cls))
    pattern = re.compile(rf"(?<![\w.\-/]){re.escape(section)}(?=\.(?:{keys})(?:_file)?\b|\]|:)")
    return lambda text: pattern.sub(instance, text)


@contextmanager
def named(rd: Reader, section: str, instance: str, cls: type[Any]) -> Iterator[None]:
    """While an integration checks an instance's settings (its checks are written for
    `[section]`), the keys its problems and warnings name are the instance's (renamer)."""
    if instance == section:
        yield
        return
    rename = renamer(section, instance, cls)
    problems, warnings = len(rd.problems), len(rd.warnings)
    rd.scope(section, instance)
    try:
        yield
    finally:
        rd.scope(None, None)
        rd.problems[problems:] = [rename(p) for p in rd.problems[problems:]]
        rd.warnings[warnings:] = [rename(w) for w in rd.warnings[warnings:]]

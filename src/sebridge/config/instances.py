"""Named instances of an integration's section: `[slack]`, `[slack.dba]`, `[slack.web]`.

TOML reads `[slack.dba]` as the table `dba` inside `[slack]`. A table inside
an integration's section whose key is not one of its settings' keys is a
named instance: the instance "slack.dba", read with the same dataclass as
`[slack]`. The keys of `[slack]` itself are the unnamed instance "slack", so
every file written before instances means what it meant. Each instance is
whole on its own: `[slack.dba]` inherits nothing from `[slack]`.

Every instance also takes `route_only = true`: it hears only the events whose
rule names it in `notify` (model/decision.py: sinks_for). Which integrations
may be named at all, and what a rule's `notify` may name, is the registry's
to check (integrations/registry.py). See docs/ARCHITECTURE.md, "Integrations".
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass, field, fields
from typing import Any

from sebridge.config.reader import Reader

__all__ = ["INSTANCE_KEYS", "NAME", "ROUTE_ONLY", "Split", "named", "renamer", "split"]

# An instance's name: it is a metric label value, part of an HTTP path and of a
# credential file's name, so plain.
NAME = re.compile(r"[a-z][a-z0-9_-]{0,31}")
ROUTE_ONLY = "route_only"
# The keys every instance of an integration that sends messages takes, beside its own.
INSTANCE_KEYS = (ROUTE_ONLY,)


@dataclass
class Split:
    """One integration section as instances: each instance's name ("slack", "slack.dba")
    and its own table (route_only taken out), and the instances marked route_only."""

    tables: dict[str, Mapping[str, Any]] = field(default_factory=dict)
    route_only: set[str] = field(default_factory=set)


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
    rest = {k: v for k, v in table.items() if k != ROUTE_ONLY}
    if ROUTE_ONLY in table:
        value = table[ROUTE_ONLY]
        if not isinstance(value, bool):
            rd.error(f"{instance}.{ROUTE_ONLY}", f"expected true or false, got {value!r}")
        elif value:
            out.route_only.add(instance)
    out.tables[instance] = rest


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

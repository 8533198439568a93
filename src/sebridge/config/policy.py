"""The policy's config: `[[policy.rules]]`, their `window`, and `[hooks.<name>]`.

Plain settings, read by config/reader.py like every section (a field is a
key), then checked here with messages naming the key, one line each:
`policy.rules[2].description: bad regular expression: ...`. Rules are
numbered from 1, in file order. The policy package compiles them
(policy/compile.py); the hook runner reads `HookSettings`. See
docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

import os
import re
import shutil
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from sebridge.config.durations import Seconds, WholeSeconds
from sebridge.config.pattern import PatternError, user_pattern
from sebridge.config.reader import Reader, option
from sebridge.model import EventType

__all__ = [
    "ACTIONS",
    "DAYS",
    "EVENT_TYPES",
    "OLD_KEYS",
    "HookSettings",
    "RuleSettings",
    "WindowSettings",
    "check_rules",
    "read_hooks",
    "seconds_of_day",
]

ACTIONS = ("approve", "ask", "inform", "ignore")
DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")  # date.weekday() order
# The keys that shape the built-in rules; with [[policy.rules]] they would do nothing.
OLD_KEYS = ("approve_user_events", "approve_freeze_under_seconds", "only_this_vm")
# The documented types: a rule naming another (a slip: "Terminte") would match nothing.
EVENT_TYPES = tuple(t.value for t in EventType)
_CLOCK = re.compile(r"([01]\d|2[0-3]):([0-5]\d)|24:00")
# An environment variable's name as a shell takes it.
_VARIABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


@dataclass(frozen=True)
class WindowSettings:
    """A rule's `window`: `days` name the day the window starts on (a window crossing
    midnight runs into the next day); `end` before `start` crosses midnight."""

    # The days the window opens on.
    days: tuple[str, ...] = option(DAYS, choices=DAYS)
    # When it opens, "HH:MM" local time.
    start: str = "00:00"
    # When it closes, "HH:MM" up to "24:00"; before start: on the next day.
    end: str = "24:00"
    # The IANA time zone of start and end, e.g. "Europe/Berlin".
    timezone: str = "UTC"


@dataclass(frozen=True)
class RuleSettings:
    """One `[[policy.rules]]` table. A matcher left out matches any event."""

    # Shown in messages and by `sebridge policy explain`; empty: "rule N".
    name: str = ""
    # Matches events of these types.
    event_types: tuple[str, ...] | None = option(None, choices=EVENT_TYPES)
    # Matches events from these sources (EventSource).
    sources: tuple[str, ...] | None = option(None, choices=("Platform", "User"))
    # Matches events lasting at least this (DurationInSeconds; an unknown duration, -1,
    # meets neither bound).
    min_duration_seconds: WholeSeconds | None = option(None, ge=0)
    # Matches events lasting at most this.
    max_duration_seconds: WholeSeconds | None = option(None, ge=0)
    # true: matches events whose Resources list this VM; false: those that do not.
    this_vm: bool | None = None
    # A regular expression searched for in the event's Description, in any case.
    description: str | None = None
    # Matches while the time is inside this window (a table: see below).
    window: WindowSettings | None = None
    # Shell-style patterns, in any case: matches when a VM the event's Resources list
    # matches one.
    resources: tuple[str, ...] | None = None
    # Azure tags: matches when a listed VM has every one (name exact, value a shell-style
    # pattern, in any case). Each agent records its VM's tags at start: a VM no agent ran on
    # has none.
    tags: Mapping[str, str] | None = None
    # What is done with a matched event (required): approve it, ask a person, inform only,
    # or ignore it.
    action: str = option("", choices=ACTIONS)
    # Hooks (`[hooks.<name>]`) run before the event is approved.
    prepare: tuple[str, ...] = ()
    # Hooks run once the event completed or was cancelled.
    recover: tuple[str, ...] = ()
    # An "ask" event (or a held approve): seconds before NotBefore to announce it again.
    remind: tuple[WholeSeconds, ...] = option((), ge=1)
    # When a prepare hook fails: "hold" POSTs nothing; "approve" POSTs anyway.
    on_prepare_failure: str = option("hold", choices=("hold", "approve"))
    # Like remind, seconds after the event was first announced ("nobody answered in 10
    # minutes").
    remind_after: tuple[WholeSeconds, ...] = option((), ge=1)
    # The instances that hear the rule's events ("slack.dba", "email"), each configured and
    # enabled; unset: every instance whose route is not "named".
    notify: tuple[str, ...] | None = None
    # A listed VM no sebridge agent ever ran on holds the approval too (it cannot be drained;
    # by default it is only named). Readiness applies to a rule naming prepare hooks only.
    require_agents: bool = False


# The keys that narrow which events a rule matches; a rule without any matches them all.
_MATCHERS = (
    "event_types",
    "sources",
    "min_duration_seconds",
    "max_duration_seconds",
    "this_vm",
    "description",
    "window",
    "resources",
    "tags",
)


@dataclass(frozen=True)
class HookSettings:
    """One `[hooks.<name>]`: an argv run without a shell, killed after `timeout` seconds. A
    failed prepare hook runs again `retries` times, `retry_delay` seconds after each
    failure, while NotBefore leaves it its timeout (hooks/worker.py). Its environment is
    clean (hooks/process.py): PATH, HOME, LANG, the SEBRIDGE_* variables, `env` (values
    set here, `${VAR}` read now) and the daemon's own variables `inherit_env` names."""

    name: str = ""
    # The program and its arguments: run without a shell; the program must be executable.
    command: tuple[str, ...] = ()
    # Seconds; then its whole process group is killed.
    timeout: Seconds = option(300.0, gt=0.0, le=86400.0)
    # A failed prepare hook runs again this many times.
    retries: int = option(0, ge=0, le=100)
    # Seconds after each failure before it runs again.
    retry_delay: Seconds = option(30.0, ge=0.0, le=86400.0)
    # Variables set for it (${VAR} allowed); its environment is otherwise clean.
    env: Mapping[str, str] = field(default_factory=dict)
    # The daemon's own variables it gets, beside PATH, HOME and LANG.
    inherit_env: tuple[str, ...] = ()


def seconds_of_day(clock: str) -> int:
    """ "HH:MM" (or "24:00") as seconds since midnight; ValueError otherwise."""
    if not _CLOCK.fullmatch(clock):
        raise ValueError(f'expected a time as "HH:MM" (00:00 to 24:00), got "{clock}"')
    hours, minutes = clock.split(":")
    return int(hours) * 3600 + int(minutes) * 60


def read_hooks(raw: Any, rd: Reader) -> dict[str, HookSettings]:
    """[hooks.<name>] tables, each checked: a non-empty argv whose program is an
    executable file (a bare name is looked up on PATH, as the runner will)."""
    if not isinstance(raw, Mapping):
        rd.problems.append(f"[hooks] must be a table of [hooks.<name>] tables, got {raw!r}")
        return {}
    hooks: dict[str, HookSettings] = {}
    for name, table in raw.items():
        key = f"hooks.{name}"
        if not isinstance(table, Mapping):
            rd.error(key, 'expected a table, e.g. [hooks.drain] command = ["/usr/local/bin/drain"]')
            continue
        hook = rd.section(key, table, HookSettings, {"name": name})
        if "name" in table:
            rd.error(f"{key}.name", "a hook's name is its table's name; remove the key")
        unset = rd.env.empty_variables(f"{key}.command")
        if unset:
            # Not "": `kubectl drain "${NODE_NAME}"` must not run as `kubectl drain ""`.
            rd.error(f"{key}.command", _unset_advice(unset))
        elif not hook.command:
            if table.get("command", []) == []:  # else its type was wrong: said already
                rd.error(
                    f"{key}.command", 'required: the program and its arguments, e.g. ["drain"]'
                )
        elif not hook.command[0]:
            rd.error(f"{key}.command", "the program (its first item) is empty")
        else:
            problem = _not_executable(hook.command[0])
            if problem:
                rd.error(f"{key}.command", problem)
        _check_environment(key, hook, rd)
        hooks[name] = hook
    return hooks


def _unset_advice(unset: str) -> str:
    """What to do about `${VAR}`s that came up unset or empty in a hook's command or env: set
    them in the service's environment; but sebridge's own SEBRIDGE_* are the hook's, given
    to it when it runs, and never expanded in the config."""
    if "environment variable SEBRIDGE_" not in unset:
        return f"{unset}: set it in the service's environment"
    return (
        f"{unset}: the SEBRIDGE_* variables are given to the hook when it runs, not to the"
        " config: read them in the hook's program (its environment, or the event as JSON on"
        ' its stdin), e.g. a script that runs `drain "$SEBRIDGE_VM_NAME"`'
    )


def _check_environment(key: str, hook: HookSettings, rd: Reader) -> None:
    """`env` and `inherit_env`: names a shell takes, none of sebridge's own SEBRIDGE_*
    (they say which event this is), and no `${VAR}` that came up unset or empty."""
    for name, value in hook.env.items():
        problem = _bad_name(name)
        unset = rd.env.empty_variables(f"{key}.env.{name}")
        if problem:
            rd.error(f"{key}.env", f'"{name}" {problem}')
        elif unset:
            # As for command: a KUBECONFIG = "${KUBECONFIG}" that came up "" is a slip.
            rd.error(f"{key}.env.{name}", _unset_advice(unset))
        elif "\0" in value:
            rd.error(f"{key}.env.{name}", "contains a NUL character, which no environment holds")
    for name in hook.inherit_env:
        problem = _bad_name(name)
        if problem:
            rd.error(f"{key}.inherit_env", f'"{name}" {problem}')
        elif name in hook.env:
            rd.error(f"{key}.inherit_env", f'"{name}" is also set in env; keep one')


def _bad_name(name: str) -> str:
    if not _VARIABLE.fullmatch(name):
        return "is not a variable name (letters, digits and _, not starting with a digit)"
    if name.upper().startswith("SEBRIDGE_"):
        return "is sebridge's own: SEBRIDGE_* variables say which event this is"
    return ""


def _not_executable(program: str) -> str:
    if os.sep not in program:
        if shutil.which(program) is None:
            return f'"{program}" is not an executable file on PATH; give its full path'
        return ""
    if not os.path.isfile(program):
        return f'"{program}" is not a file'
    if not os.access(program, os.X_OK):
        return f'"{program}" is not executable (chmod +x)'
    return ""


def check_rules(
    rules: tuple[RuleSettings, ...],
    hooks: Mapping[str, HookSettings],
    given: frozenset[str],
    rd: Reader,
) -> tuple[RuleSettings, ...]:
    """Checks of the rules together and against [hooks]; returns them with their names
    filled in ("rule N"), `remind` in descending and `remind_after` in ascending order
    (the order they come in)."""
    old = [f"policy.{k}" for k in OLD_KEYS if f"policy.{k}" in given]
    if rules and old:
        rd.error(
            ", ".join(old),
            "set together with [[policy.rules]]: these keys shape only the built-in rules, "
            "so beside rules they would do nothing; remove them or write them as rules",
        )
    checked: list[RuleSettings] = []
    seen: dict[str, int] = {}
    catch_all = ""  # the first rule that matches every event: none after it ever decides
    for n, rule in enumerate(rules, 1):
        key = f"policy.rules[{n}]"
        name = rule.name or f"rule {n}"
        if name in seen:
            rd.error(f"{key}.name", f'"{name}" is also the name of rule {seen[name]}')
        seen[name] = n
        if catch_all:
            rd.warnings.append(f'{key} ("{name}"): never matches: {catch_all} matches every event')
        elif all(getattr(rule, m) is None for m in _MATCHERS):
            catch_all = f'policy.rules[{n}] ("{name}") before it'
        _check_rule(key, rule, hooks, rd)
        checked.append(
            replace(
                rule,
                name=name,
                remind=tuple(sorted(set(rule.remind))[::-1]),
                remind_after=tuple(sorted(set(rule.remind_after))),
            )
        )
    used = {h for r in rules for h in (*r.prepare, *r.recover)}
    for name in hooks:
        if name not in used:
            rd.warnings.append(f"hooks.{name}: no rule names it, so it never runs")
    return tuple(checked)


def _check_require_agents(key: str, rule: RuleSettings, rd: Reader) -> None:
    """`require_agents` holds an approval for readiness, and readiness is looked at only
    for a rule that names prepare hooks: without them it would protect nothing."""
    if rule.require_agents and not rule.prepare:
        rd.error(
            f"{key}.require_agents",
            "needs prepare hooks: readiness (and so an agent on every listed VM) is only "
            "required of a rule that names `prepare` hooks",
        )


def _check_rule(
    key: str, rule: RuleSettings, hooks: Mapping[str, HookSettings], rd: Reader
) -> None:
    if not rule.action:
        rd.error(f"{key}.action", f"required: one of {', '.join(ACTIONS)}")
    low, high = rule.min_duration_seconds, rule.max_duration_seconds
    if low is not None and high is not None and low > high:
        rd.error(f"{key}.min_duration_seconds", f"{low} is above max_duration_seconds ({high})")
    if rule.description is not None:
        try:
            user_pattern(rule.description)
        except PatternError as exc:
            rd.error(f"{key}.description", f"bad regular expression: {exc}")
    if rule.window is not None:
        _check_window(f"{key}.window", rule.window, rd)
    _check_affected(key, rule, rd)
    _check_require_agents(key, rule, rd)
    for stage in ("prepare", "recover"):
        for hook in getattr(rule, stage):
            if hook not in hooks and not rd.unreadable(f"hooks.{hook}"):
                known = ", ".join(hooks) or "none"
                rd.error(f"{key}.{stage}", f'no hook "{hook}" ([hooks.{hook}]; defined: {known})')
        if getattr(rule, stage) and rule.action == "ignore":
            rd.error(f"{key}.{stage}", "an ignored event runs no hooks")
    _check_reminders(key, rule, rd)


def _check_affected(key: str, rule: RuleSettings, rd: Reader) -> None:
    """`resources` and `tags`: an empty list or table, or an empty pattern or tag name, would
    match no event (or every one): a slip, refused. (A shell pattern cannot be malformed.)"""
    if rule.resources is not None:
        if not rule.resources:
            rd.error(
                f"{key}.resources",
                'empty: it would match no event; leave it out to match any, e.g. ["web*"]',
            )
        elif not all(p.strip() for p in rule.resources):
            rd.error(f"{key}.resources", "holds an empty pattern, which matches no VM")
    if rule.tags is not None:
        if not rule.tags:
            rd.error(
                f"{key}.tags",
                'empty: it would match no event; leave it out to match any, e.g. { team = "web" }',
            )
        for name, value in rule.tags.items():
            if not name.strip():
                rd.error(f"{key}.tags", "a tag's name is empty")
            elif not value:
                rd.error(
                    f"{key}.tags.{name}",
                    'empty: a pattern of its value, e.g. "payments", "prod*", or "*" for any value',
                )


def _check_reminders(key: str, rule: RuleSettings, rd: Reader) -> None:
    # Reminders follow an event nobody approved ("ask") or whose approval is held: an
    # "approve" rule's event is held when its prepare hooks fail and it says "hold".
    holds = rule.action == "approve" and rule.prepare and rule.on_prepare_failure == "hold"
    for remind in ("remind", "remind_after"):
        if getattr(rule, remind) and rule.action != "ask" and not holds:
            rd.error(
                f"{key}.{remind}",
                'only an "ask" event, or an "approve" one whose prepare hooks can hold it '
                f'(on_prepare_failure "hold"), is reminded of (action is "{rule.action}")',
            )


def _check_window(key: str, window: WindowSettings, rd: Reader) -> None:
    try:
        ZoneInfo(window.timezone)
    except (ZoneInfoNotFoundError, ValueError, OSError):
        rd.error(f"{key}.timezone", f'unknown time zone "{window.timezone}" (e.g. Europe/Berlin)')
    bounds = []
    for part in ("start", "end"):
        try:
            bounds.append(seconds_of_day(getattr(window, part)))
        except ValueError as exc:
            rd.error(f"{key}.{part}", str(exc))
    if window.start == "24:00":
        rd.error(f"{key}.start", "a window starts at 23:59 at the latest")
    if len(bounds) == 2 and bounds[0] == bounds[1]:
        rd.error(f"{key}.end", 'equals start: for the whole day use start "00:00", end "24:00"')
    if not window.days:
        rd.error(f"{key}.days", "empty: the window would never open; leave days out for every day")

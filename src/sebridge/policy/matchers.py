"""What a rule matches on: one small class per matcher, each able to say why it failed.

`test()` is the fast path decide() takes for every rule; `why_not()` and `why()`
name the matcher's key and the value it saw, for `sebridge policy explain`
(why a rule did not match; why the one that decided did). An event
field IMDS did not send (an old api-version) matches no matcher about it.
"""

from __future__ import annotations

import json
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Protocol
from zoneinfo import ZoneInfo

from sebridge.config.pattern import UserPattern
from sebridge.model import ScheduledEvent

__all__ = [
    "Description",
    "Duration",
    "EventTypes",
    "Facts",
    "Matcher",
    "Resources",
    "Sources",
    "Started",
    "Tags",
    "TagsOf",
    "ThisVm",
    "Window",
    "no_tags",
    "shell_pattern",
]

_DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


# Every VM's recorded Azure tags, by its name in lower case (store/vm_tags.py): asked only
# when a rule's `tags` matcher is tested, once per decision.
TagsOf = Callable[[], Mapping[str, Mapping[str, str]]]


def no_tags() -> Mapping[str, Mapping[str, str]]:
    return {}


class Facts:
    """What the matchers look at for one decision: the event, this VM, the time, the
    time in each zone a window asked for (converted once per zone, not once per rule),
    and the recorded tags of the VMs (read once, and only when a rule asks)."""

    __slots__ = ("_local", "_mine", "_names", "_tags", "_tags_of", "event", "now", "vm_name")

    def __init__(
        self, event: ScheduledEvent, vm_name: str, now: datetime, tags_of: TagsOf = no_tags
    ) -> None:
        self.event = event
        self.vm_name = vm_name
        self.now = now
        self._local: dict[ZoneInfo, datetime] = {}
        self._mine: bool | None = None
        self._names: tuple[str, ...] | None = None
        self._tags_of = tags_of
        self._tags: Mapping[str, Mapping[str, str]] | None = None

    @property
    def vms(self) -> tuple[str, ...]:
        """The VMs Resources list, as named (api-version 2017-03-01's "_" prefix taken off)."""
        if self._names is None:
            self._names = tuple(r[1:] if r.startswith("_") else r for r in self.event.resources)
        return self._names

    def tags(self, vm: str) -> Mapping[str, str] | None:
        """`vm`'s recorded Azure tags; None when no agent recorded any for it."""
        if self._tags is None:
            self._tags = self._tags_of()
        return self._tags.get(vm.lower())

    @property
    def on_this_vm(self) -> bool:
        """Whether Resources include this VM (asked once per decision)."""
        if self._mine is None:
            self._mine = self.event.affects(self.vm_name)
        return self._mine

    def local(self, zone: ZoneInfo) -> datetime:
        """The time in `zone`."""
        moment = self._local.get(zone)
        if moment is None:
            moment = self._local[zone] = self.now.astimezone(zone)
        return moment


class Matcher(Protocol):
    """One condition of a rule."""

    def test(self, f: Facts) -> bool:
        """Whether the event (on this VM, at this time) meets the condition."""
        ...

    def why_not(self, f: Facts) -> str:
        """Why it does not: "<key>: <what was seen>", for people."""
        ...

    def why(self, f: Facts) -> str:
        """Why it does: "<key>: <what was seen>", for people."""
        ...


def _listed(values: frozenset[str] | tuple[str, ...]) -> str:
    return ", ".join(sorted(values))


@dataclass(frozen=True)
class EventTypes:
    types: frozenset[str]

    def test(self, f: Facts) -> bool:
        return f.event.event_type in self.types

    def why_not(self, f: Facts) -> str:
        return f"event_types: {f.event.event_type} is not one of {_listed(self.types)}"

    def why(self, f: Facts) -> str:
        return f"event_types: {f.event.event_type} is one of {_listed(self.types)}"


@dataclass(frozen=True)
class Sources:
    sources: frozenset[str]

    def test(self, f: Facts) -> bool:
        return f.event.source in self.sources

    def why_not(self, f: Facts) -> str:
        seen = f.event.source or "unknown (the api-version in use has no EventSource)"
        return f"sources: {seen} is not one of {_listed(self.sources)}"

    def why(self, f: Facts) -> str:
        return f"sources: {f.event.source} is one of {_listed(self.sources)}"


@dataclass(frozen=True)
class Duration:
    """min_duration_seconds <= duration <= max_duration_seconds (either may be None);
    an unknown duration (-1, or none sent) meets neither bound."""

    low: int | None
    high: int | None

    def test(self, f: Facts) -> bool:
        d = f.event.duration_seconds
        if d is None or d < 0:
            return False
        return (self.low is None or d >= self.low) and (self.high is None or d <= self.high)

    def why_not(self, f: Facts) -> str:
        d = f.event.duration_seconds
        if d is None or d < 0:
            return f"duration: unknown ({'-1' if d is not None else 'not sent'}) meets no bound"
        if self.low is not None and d < self.low:
            return f"min_duration_seconds: {d} s is under {self.low}"
        return f"max_duration_seconds: {d} s is over {self.high}"

    def why(self, f: Facts) -> str:
        low = "" if self.low is None else f"at least {self.low} s"
        high = "" if self.high is None else f"at most {self.high} s"
        bounds = " and ".join(b for b in (low, high) if b)
        return f"duration: {f.event.duration_seconds} s is {bounds}"


@dataclass(frozen=True)
class ThisVm:
    """true: Resources include this VM; false: they don't."""

    wanted: bool

    def test(self, f: Facts) -> bool:
        return f.on_this_vm is self.wanted

    def why_not(self, f: Facts) -> str:
        listed = ", ".join(f.event.resources) or "none"
        verb = "do not include" if self.wanted else "include"
        return f"this_vm = {str(self.wanted).lower()}: Resources ({listed}) {verb} {f.vm_name}"

    def why(self, f: Facts) -> str:
        listed = ", ".join(f.event.resources) or "none"
        verb = "include" if self.wanted else "do not include"
        return f"this_vm = {str(self.wanted).lower()}: Resources ({listed}) {verb} {f.vm_name}"


@dataclass(frozen=True)
class Description:
    """A regular expression, searched (not anchored), case-insensitive."""

    pattern: UserPattern  # RE2: linear in the text (config/pattern.py)

    def test(self, f: Facts) -> bool:
        text = f.event.description
        return text is not None and self.pattern.search(text) is not None

    def why_not(self, f: Facts) -> str:
        if f.event.description is None:
            return "description: none sent (the api-version in use has no Description)"
        text = f.event.description
        text = text if len(text) <= 80 else text[:77] + "..."
        shown = json.dumps(text, ensure_ascii=False)
        return f"description: /{self.pattern.pattern}/ not found in {shown}"

    def why(self, f: Facts) -> str:
        found = self.pattern.search(f.event.description or "")
        shown = json.dumps(found.group(0)[:80] if found else "", ensure_ascii=False)
        return f"description: /{self.pattern.pattern}/ found ({shown})"


@dataclass(frozen=True)
class Window:
    """Local time in `zone` between `start` and `end` (seconds of the day) on a day the
    window starts: a window whose end comes before its start crosses midnight, and
    its hours after midnight belong to the day before. Across a DST change the local
    clock decides (an hour that does not exist that night is never inside)."""

    days: frozenset[int]  # date.weekday() numbers
    start: int
    end: int
    zone: ZoneInfo

    def test(self, f: Facts) -> bool:
        local = f.local(self.zone)
        second = local.hour * 3600 + local.minute * 60 + local.second
        day = local.weekday()
        if self.start < self.end:
            return self.start <= second < self.end and day in self.days
        return (second >= self.start and day in self.days) or (
            second < self.end and (day - 1) % 7 in self.days
        )

    def why_not(self, f: Facts) -> str:
        moment, window = self._said(f)
        return f"window: it is {moment}, outside {window}"

    def why(self, f: Facts) -> str:
        moment, window = self._said(f)
        return f"window: {moment} is inside {window}"

    def _said(self, f: Facts) -> tuple[str, str]:
        """The moment in the window's zone ("mon 08:15 in Europe/Berlin") and the window
        ("mon,tue 08:00-17:00"), as explain says them."""
        local = f.local(self.zone)
        days = ",".join(_DAY_NAMES[d] for d in sorted(self.days))
        moment = f"{_DAY_NAMES[local.weekday()]} {local:%H:%M} in {self.zone.key}"
        return moment, f"{days} {_clock(self.start)}-{_clock(self.end)}"


def _clock(second: int) -> str:
    return f"{second // 3600:02d}:{second % 3600 // 60:02d}"


@dataclass(frozen=True)
class Started:
    """Built-in rules only: the event is under way (EventStatus Started)."""

    wanted: bool

    def test(self, f: Facts) -> bool:
        return f.event.started is self.wanted

    def why_not(self, f: Facts) -> str:
        return f"status: {f.event.status}"

    def why(self, f: Facts) -> str:
        return f"status: {f.event.status}"


def shell_pattern(pattern: str) -> re.Pattern[str]:
    """A shell-style pattern (`*`, `?`, `[abc]`), matched whole and without regard to case."""
    import fnmatch  # only a rule with resources or tags needs it

    return re.compile(fnmatch.translate(pattern), re.IGNORECASE)


@dataclass(frozen=True)
class Resources:
    """Shell-style patterns of VM names: any VM Resources lists matching any pattern."""

    patterns: tuple[tuple[str, re.Pattern[str]], ...]  # (as written, compiled)

    def test(self, f: Facts) -> bool:
        return any(p.match(vm) for vm in f.vms for _, p in self.patterns)

    def why_not(self, f: Facts) -> str:
        listed = ", ".join(f.vms) or "none"
        return f"resources: no VM of Resources ({listed}) matches {self._said()}"

    def why(self, f: Facts) -> str:
        said = [f"{vm} matches {w}" for vm in f.vms for w, p in self.patterns if p.match(vm)]
        return f"resources: {'; '.join(said)}"

    def _said(self) -> str:
        return " or ".join(w for w, _ in self.patterns)


@dataclass(frozen=True)
class Tags:
    """Azure tags of a listed VM: some VM Resources lists has every tag named, each with a
    value matching its shell-style pattern (names exact, values without regard to case).
    A VM with no recorded tags (no agent read them) matches no `tags` matcher."""

    wanted: tuple[tuple[str, str, re.Pattern[str]], ...]  # (name, pattern as written, compiled)

    def test(self, f: Facts) -> bool:
        return any(self._fits(f.tags(vm)) for vm in f.vms)

    def _fits(self, tags: Mapping[str, str] | None) -> bool:
        if tags is None:
            return False
        for name, _, pattern in self.wanted:
            value = tags.get(name)
            if value is None or not pattern.match(value):
                return False
        return True

    def why_not(self, f: Facts) -> str:
        seen = "; ".join(self._seen(vm, f.tags(vm)) for vm in f.vms) or "Resources lists none"
        return f"tags: no listed VM has {self._said()} ({seen})"

    def why(self, f: Facts) -> str:
        fits = [vm for vm in f.vms if self._fits(f.tags(vm))]
        shown = ", ".join(f"{vm} has {self._had(f.tags(vm) or {})}" for vm in fits)
        return f"tags: {shown}"

    def _said(self) -> str:
        return ", ".join(f"{name}={w}" for name, w, _ in self.wanted)

    def _had(self, tags: Mapping[str, str]) -> str:
        return ", ".join(f"{name}={tags[name]}" for name, _, _ in self.wanted)

    def _seen(self, vm: str, tags: Mapping[str, str] | None) -> str:
        if tags is None:
            return f"{vm}: no tags recorded (no agent has read them: it matches no tags rule)"
        named = [f"{name}={tags[name]}" for name, _, _ in self.wanted if name in tags]
        return f"{vm}: {', '.join(named) if named else 'none of these tags'}"

"""What a rule matches on: one small class per matcher, each able to say why it failed.

`test()` is the fast path decide() takes for every rule; `why_not()` and `why()`
name the matcher's key and the value it saw, for `sebridge policy explain`
(why a rule did not match; why the one that decided did). An event
field IMDS did not send (an old api-version) matches no matcher about it.
"""

from __future__ import annotations

import json
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
    "Sources",
    "Started",
    "ThisVm",
    "Window",
]

_DAY_NAMES = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")


class Facts:
    """What the matchers look at for one decision: the event, this VM, the time, and the
    time in each zone a window asked for (converted once per zone, not once per rule)."""

    __slots__ = ("_local", "_mine", "event", "now", "vm_name")

    def __init__(self, event: ScheduledEvent, vm_name: str, now: datetime) -> None:
        self.event = event
        self.vm_name = vm_name
        self.now = now
        self._local: dict[ZoneInfo, datetime] = {}
        self._mine: bool | None = None

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

"""Scenario files: simulator settings and a script of events, in TOML (or JSON by extension).

    vm_name = "vm0"            # all optional
    tags = { team = "payments" }  # the VM's Azure tags (instance metadata)
    time_scale = 60
    terminate_notice = 300
    approval_delay = 2

    [[events]]
    at = 30                    # seconds after loading (scaled like every duration)
    type = "Reboot"            # plus any of: source, resources, description,
    source = "User"            # duration, notice, status, active, id

Loading validates everything and raises ValueError naming the file, the
event index and the key.
"""

from __future__ import annotations

import dataclasses
import json
import os
import tomllib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path
from typing import Any

from sebridge.imds.simulator.events import check_terminate_notice
from sebridge.imds.simulator.spec import EventSpec, parse_event

__all__ = ["DEMO", "SETTINGS_KEYS", "Scenario", "demo_scenario", "parse_scenario", "read_scenario"]

SETTINGS_KEYS: tuple[str, ...] = (
    "vm_name",
    "time_scale",
    "terminate_notice",
    "approval_delay",
    "tags",
)
DEMO = "demo"  # the name `serve` accepts for the shipped demo scenario
_DEFAULT_TERMINATE_NOTICE = 300.0


@dataclass(frozen=True)
class Scenario:
    """A validated scenario: optional settings (None = not set) and the events to schedule."""

    events: tuple[EventSpec, ...] = ()
    vm_name: str | None = None
    time_scale: float | None = None
    terminate_notice: float | None = None
    approval_delay: float | None = None
    tags: dict[str, str] | None = None
    source: str = "<scenario>"

    def settings(self) -> dict[str, Any]:
        """The settings the file sets, as keyword arguments for `Simulator(...)`."""
        values = {key: getattr(self, key) for key in SETTINGS_KEYS}
        return {key: value for key, value in values.items() if value is not None}


def _setting(data: dict[str, Any], key: str) -> Any:
    value = data.get(key)
    if value is None:
        return None
    if key == "tags":
        if not isinstance(value, dict) or not all(
            isinstance(k, str) and k and isinstance(v, str) for k, v in value.items()
        ):
            raise ValueError(f'{key}: must be a table of strings, e.g. {{ team = "web" }}')
        return dict(value)
    if key == "vm_name":
        if not isinstance(value, str) or not value:
            raise ValueError(f"{key}: must be a non-empty string, got {value!r}")
        return value
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{key}: must be a number, got {value!r}")
    if key == "time_scale" and not value > 0:
        raise ValueError(f"{key}: must be positive, got {value!r}")
    if key == "approval_delay" and value < 0:
        raise ValueError(f"{key}: must not be negative, got {value!r}")
    if key == "terminate_notice":
        try:
            check_terminate_notice(value)
        except ValueError as exc:
            raise ValueError(f"{key}: {exc}") from None
    return float(value)


def _parse(data: object) -> Scenario:
    if not isinstance(data, dict):
        raise ValueError(f"top level must be a table/object, got {type(data).__name__}")
    unknown = sorted(set(data) - {*SETTINGS_KEYS, "events"})
    if unknown:
        allowed = ", ".join((*SETTINGS_KEYS, "events"))
        raise ValueError(f"{unknown[0]}: unknown key; expected one of {allowed}")
    settings = {key: _setting(data, key) for key in SETTINGS_KEYS}
    raw_events = data.get("events", [])
    if not isinstance(raw_events, list):
        raise ValueError("events: must be a list of tables ([[events]])")
    terminate_notice = settings["terminate_notice"] or _DEFAULT_TERMINATE_NOTICE
    events = tuple(
        parse_event(raw, terminate_notice, f"events[{index}]")
        for index, raw in enumerate(raw_events)
    )
    seen: set[str] = set()
    for index, event in enumerate(events):
        if event.event_id is not None:
            if event.event_id.upper() in seen:
                raise ValueError(f"events[{index}].id: duplicate id {event.event_id}")
            seen.add(event.event_id.upper())
    return Scenario(events=events, **settings)


def parse_scenario(data: object, source: str = "<scenario>") -> Scenario:
    """Validate an already-decoded scenario (a dict as from TOML or JSON).

    Raises:
        ValueError: `"<source>: events[2].notice: ..."`.
    """
    try:
        scenario = _parse(data)
    except ValueError as exc:
        raise ValueError(f"scenario {source}: {exc}") from None
    return dataclasses.replace(scenario, source=source)


def _decode(text: str, is_json: bool, source: str) -> object:
    try:
        return json.loads(text) if is_json else tomllib.loads(text)
    except (json.JSONDecodeError, tomllib.TOMLDecodeError) as exc:
        kind = "JSON" if is_json else "TOML"
        raise ValueError(f"scenario {source}: invalid {kind}: {exc}") from None


def read_scenario(path: str | os.PathLike[str]) -> Scenario:
    """Read and validate a scenario file: JSON if it ends in .json, TOML otherwise.

    Raises:
        ValueError: for an unreadable file, bad syntax or bad content.
    """
    source = os.fspath(path)
    try:
        text = Path(source).read_text(encoding="utf-8")
    except (OSError, UnicodeDecodeError) as exc:
        raise ValueError(f"scenario {source}: cannot read: {exc}") from None
    return parse_scenario(_decode(text, source.lower().endswith(".json"), source), source)


def demo_scenario() -> Scenario:
    """The shipped demo: a Freeze, a User Reboot, a Platform Redeploy and a Preempt."""
    text = (
        resources.files("sebridge.imds.simulator")
        .joinpath("scenarios/demo.toml")
        .read_text("utf-8")
    )
    return parse_scenario(_decode(text, False, "demo.toml"), "demo.toml")

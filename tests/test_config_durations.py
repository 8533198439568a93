"""Durations (issue 22, deliver 1): every key that takes seconds also takes "90s", "10m",
"2h", "1d", numbers as before; a bad string is an error naming the key, with an example.

Keys opt in by their type (config/durations.py: Seconds, WholeSeconds); the guard below
keeps every key named like a number of seconds typed so.
"""

from __future__ import annotations

import dataclasses
import json
import types
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import cli_main
from sebridge.config.durations import is_seconds, parse_duration
from sebridge.config.loader import Config
from sebridge.config.policy import HookSettings
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError

pytestmark = pytest.mark.usefixtures("cli_in_process")
EXAMPLE = 'give seconds (600) or a number and a unit s, m, h or d ("90s", "10m", "2h", "1d")'


@pytest.mark.parametrize(
    ("text", "seconds"),
    [("90s", 90.0), ("10m", 600.0), ("2h", 7200.0), ("1d", 86400.0), ("1.5m", 90.0),
     ("0.5s", 0.5), (" 10 m ", 600.0), ("0s", 0.0)],
)  # fmt: skip
def test_a_duration_is_a_number_and_a_unit(text: str, seconds: float) -> None:
    assert parse_duration(text) == seconds


@pytest.mark.parametrize(
    "text", ["10", "10min", "1h30m", "10M", "ten minutes", "-5m", "", "m", "1e3s", "10 s s"]
)
def test_anything_else_is_not_a_duration(text: str) -> None:
    with pytest.raises(ValueError, match="is not a duration: give seconds"):
        parse_duration(text)


def _rule(**keys: Any) -> dict[str, Any]:
    return {"policy": {"rules": [{"action": "ask", **keys}]}}


def test_every_seconds_key_takes_a_duration_string() -> None:
    config = config_from_mapping(
        {
            "imds": {"poll_interval": "2s", "timeout": "10s"},
            "policy": {
                "prepare_lead_seconds": "10m",
                "rules": [
                    {
                        "action": "ask",
                        "min_duration_seconds": "1m",
                        "max_duration_seconds": "2h",
                        "remind": ["10m", 300, "1h"],
                        "prepare": ["drain"],
                    }
                ],
            },
            "dispatch": {
                "retry_for_seconds_after_gone": "1d",
                "max_backoff_seconds": "5m",
                "shutdown_grace_seconds": "2.5s",
            },
            "hooks": {"drain": {"command": ["true"], "timeout": "90s"}},
            "jira": {"poll_interval": "30s"},
            "teams": {"timeout": "1m"},
        }
    )
    assert (config.imds.poll_interval, config.imds.timeout) == (2.0, 10.0)
    built_in = config_from_mapping({"policy": {"approve_freeze_under_seconds": "5s"}})
    assert built_in.policy.approve_freeze_under_seconds == 5  # a key of the built-in rules
    assert config.policy.prepare_lead_seconds == 600
    (rule,) = config.policy.rules
    assert (rule.min_duration_seconds, rule.max_duration_seconds) == (60, 7200)
    assert rule.remind == (3600, 600, 300)  # in descending order, as ever
    assert config.dispatch.retry_for_seconds_after_gone == 86400
    assert config.dispatch.max_backoff_seconds == 300.0
    assert config.dispatch.shutdown_grace_seconds == 2.5
    assert config.hooks["drain"].timeout == 90.0
    assert config.section("jira").poll_interval == 30.0
    assert config.section("teams").timeout == 60.0
    # A whole number of seconds stays an int, a float key a float: the code using them
    # sees what it saw before.
    assert type(config.policy.prepare_lead_seconds) is int
    assert type(config.imds.poll_interval) is float


def test_numbers_are_read_as_before() -> None:
    config = config_from_mapping(
        {"imds": {"poll_interval": 2}, "policy": {"rules": [{"action": "ask", "remind": [60]}]}}
    )
    assert config.imds.poll_interval == 2.0
    assert config.policy.rules[0].remind == (60,)


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (_rule(remind=["10min"]), f'policy.rules[1].remind: "10min" is not a duration: {EXAMPLE}'),
        (_rule(remind=[600, "120"]), f'policy.rules[1].remind: "120" is not a duration: {EXAMPLE}'),
        (
            _rule(remind="10m"),
            'policy.rules[1].remind: expected a list of numbers, e.g. [600, "10m"], got "10m"',
        ),
        (
            _rule(remind=[True]),
            f"policy.rules[1].remind: expected {EXAMPLE.removeprefix('give ')}, got true",
        ),
        (_rule(remind=["0s"]), "policy.rules[1].remind: must be >= 1, got 0"),
        (
            _rule(min_duration_seconds="1.5s"),
            f'policy.rules[1].min_duration_seconds: "1.5s" is not a whole number of seconds; {EXAMPLE}',
        ),
        (
            _rule(max_duration_seconds=1.5),
            "policy.rules[1].max_duration_seconds: expected a whole number of seconds, got 1.5",
        ),
        (
            {"policy": {"prepare_lead_seconds": "2d"}},
            "policy.prepare_lead_seconds: must be <= 86400 (a day), got 172800",
        ),
        (
            {"imds": {"poll_interval": "100ms"}},
            f'imds.poll_interval: "100ms" is not a duration: {EXAMPLE}',
        ),
        (
            {"hooks": {"drain": {"command": ["true"], "timeout": "forever"}}},
            f'hooks.drain.timeout: "forever" is not a duration: {EXAMPLE}',
        ),
        ({"teams": {"timeout": "3m"}}, "teams.timeout: must be <= 120, got 180"),
    ],
)
def test_a_bad_duration_is_an_error_naming_the_key_with_an_example(
    data: dict[str, Any], line: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(data, source="f.toml")
    assert str(caught.value) == f"f.toml: {line}"


def test_check_takes_a_reminder_in_minutes_and_refuses_a_bad_one(
    tmp_path: Path, sim: Simulator
) -> None:
    path = tmp_path / "sebridge.toml"
    head = (
        f'[imds]\nvm_name = "vm0"\nendpoint = "{sim.url}"\n'
        f'[store]\nurl = "sqlite:///{tmp_path}/state.db"\n'
    )
    path.write_text(head + '[[policy.rules]]\naction = "ask"\nremind = ["10m", 300]\n')
    code, out, err = cli_main("check", "--json", "--config", str(path))
    assert code == 0, err
    (rule,) = json.loads(out)["config"]["policy"]["rules"]
    assert rule["remind"] == [600, 300]  # the effective config, in seconds
    path.write_text(head + '[[policy.rules]]\naction = "ask"\nremind = ["10 minutes"]\n')
    code, out, err = cli_main("check", "--config", str(path))
    assert (code, out) == (2, "")
    assert err == (
        f"sebridge: configuration error: {path}: policy.rules[1].remind:"
        f' "10 minutes" is not a duration: {EXAMPLE}\n'
    )


# -- every key of seconds opts in -------------------------------------------------------------

# A key is a number of seconds when its name says so; `store.retention_days` counts days.
_SECONDS_NAMES = ("seconds", "timeout", "interval", "delay", "remind", "_after", "_for")


def _numeric_keys(cls: type[Any], prefix: str) -> Iterator[tuple[str, Any]]:
    """(key, type) of every number or list of numbers, nested tables included."""
    hints = typing.get_type_hints(cls, include_extras=True)
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        if typing.get_origin(kind) in (types.UnionType, typing.Union):  # X | None
            kind = next(a for a in typing.get_args(kind) if a is not type(None))
        item = typing.get_args(kind)[0] if typing.get_origin(kind) is tuple else None
        for k in (kind, item):
            if dataclasses.is_dataclass(k) and isinstance(k, type):
                yield from _numeric_keys(k, f"{prefix}.{f.name}")
        for k in (kind, item):
            base = typing.get_args(k)[0] if is_seconds(k) else k
            if base in (int, float):
                yield f"{prefix}.{f.name}", k


def test_every_key_of_seconds_is_typed_so() -> None:
    default = config_from_mapping({})
    sections = {f.name: type(getattr(default, f.name)) for f in dataclasses.fields(Config)}
    sections = {n: c for n, c in sections.items() if dataclasses.is_dataclass(c)}
    sections |= {n: type(s) for n, s in default.sections.items() if s is not None}
    keys = [k for name, cls in sections.items() for k in _numeric_keys(cls, name)]
    keys += list(_numeric_keys(HookSettings, "hooks"))
    seconds = {key for key, _ in keys if any(n in key.rsplit(".")[-1] for n in _SECONDS_NAMES)}
    typed = {key for key, kind in keys if is_seconds(kind)}
    assert seconds == typed
    assert typed >= {
        "imds.poll_interval",
        "imds.timeout",
        "policy.prepare_lead_seconds",
        "policy.rules.remind",
        "policy.rules.min_duration_seconds",
        "dispatch.retry_for_seconds_after_gone",
        "hooks.timeout",
        "jira.poll_interval",
        "teams.timeout",
    }

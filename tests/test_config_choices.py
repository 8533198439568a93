"""Every enumerated config value fails closed (issue 22, finding 1): it matches its
canonical name without regard to case and is kept in that spelling; an unknown name is a
configuration error (exit 2 from check, run and once) naming the key and the nearest name.

The finding: `event_types = ["terminate"]`, meant as "never auto-approve Terminate", was
only a warning, so a catch-all approve rule after it approved a real Terminate at once.
"""

from __future__ import annotations

import dataclasses
import typing
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import cli_main, write_config
from sebridge.config.loader import Config
from sebridge.config.policy import HookSettings, RuleSettings
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError
from sebridge.model.decision import Decision
from sebridge.store import Store

pytestmark = pytest.mark.usefixtures("cli_in_process")

# The operator's policy: Terminate always goes to a person; everything else is approved.
TERMINATE_RULES = """
[[policy.rules]]
name = "never auto-approve Terminate"
event_types = ["terminate"]
action = "ask"

[[policy.rules]]
name = "everything else"
action = "approve"
"""


def _rule(**keys: Any) -> dict[str, Any]:
    return {"policy": {"rules": [{"action": "ask", **keys}]}}


# (the file's data, how to read the value back, what is kept): every key with choices.
SPELLINGS: list[tuple[str, dict[str, Any], Any, Any]] = [
    (
        "policy.rules.event_types",
        _rule(event_types=["terminate", "FREEZE"]),
        "event_types",
        ("Terminate", "Freeze"),
    ),
    ("policy.rules.sources", _rule(sources=["platform", "USER"]), "sources", ("Platform", "User")),
    ("policy.rules.action", {"policy": {"rules": [{"action": "Approve"}]}}, "action", "approve"),
    (
        "policy.rules.on_prepare_failure",
        _rule(on_prepare_failure="Approve"),
        "on_prepare_failure",
        "approve",
    ),
    ("policy.rules.window.days", _rule(window={"days": ["Mon", "SAT"]}), "window", ("mon", "sat")),
    ("log.level", {"log": {"level": "INFO"}}, "log.level", "info"),
    ("log.format", {"log": {"format": "JSON"}}, "log.format", "json"),
    ("imds.api_version", {"imds": {"api_version": "2019-08-01"}}, "imds.api_version", "2019-08-01"),
    ("teams.format", {"teams": {"format": "MessageCard"}}, "teams.format", "messagecard"),
    (
        "slack.mention_types",
        {"slack": {"mention_types": ["reboot"]}},
        "slack.mention_types",
        ("Reboot",),
    ),
]


def _read_back(config: Config, where: str) -> Any:
    if where == "window":
        return config.policy.rules[0].window.days  # type: ignore[union-attr]
    if "." not in where:
        return getattr(config.policy.rules[0], where)
    section, key = where.split(".")
    settings = getattr(config, section) if section in ("log", "imds") else config.section(section)
    return getattr(settings, key)


@pytest.mark.parametrize(("key", "data", "where", "kept"), SPELLINGS, ids=[s[0] for s in SPELLINGS])
def test_a_choice_in_any_case_is_kept_in_its_canonical_spelling(
    key: str, data: dict[str, Any], where: str, kept: Any
) -> None:
    config = config_from_mapping(data)
    assert _read_back(config, where) == kept
    assert config.warnings == ()


def _choice_keys(cls: type[Any], prefix: str) -> Iterator[str]:
    """Every key with choices in a settings dataclass, nested tables included."""
    hints = typing.get_type_hints(cls)
    for f in dataclasses.fields(cls):
        kind = hints[f.name]
        inner = [a for a in typing.get_args(kind) if a is not type(None)] or [kind]
        for k in (inner[0], *typing.get_args(inner[0])):
            if dataclasses.is_dataclass(k) and isinstance(k, type):
                yield from _choice_keys(k, f"{prefix}.{f.name}")
        if f.metadata.get("choices"):
            yield f"{prefix}.{f.name}"


def test_every_key_with_choices_is_covered_here() -> None:
    """A new enumerated key gets a case in SPELLINGS (and so is seen to fail closed)."""
    default = config_from_mapping({})
    sections = {f.name: type(getattr(default, f.name)) for f in dataclasses.fields(Config)}
    sections = {n: c for n, c in sections.items() if dataclasses.is_dataclass(c)}
    sections |= {n: type(s) for n, s in default.sections.items() if s is not None}
    keys = {k for name, cls in sections.items() for k in _choice_keys(cls, name)}
    keys |= set(_choice_keys(HookSettings, "hooks"))
    assert keys == {s[0] for s in SPELLINGS}
    assert RuleSettings.__dataclass_fields__["event_types"].metadata["choices"] == (
        "Freeze",
        "Reboot",
        "Redeploy",
        "Preempt",
        "Terminate",
    )


@pytest.mark.parametrize(
    ("data", "line"),
    [
        (
            _rule(event_types=["Terminte"]),
            "policy.rules[1].event_types: must be one of Freeze, Reboot, Redeploy, Preempt, "
            'Terminate; got "Terminte" (did you mean "Terminate"?)',
        ),
        (
            _rule(event_types=["Maintenance"]),
            "policy.rules[1].event_types: must be one of Freeze, Reboot, Redeploy, Preempt, "
            'Terminate; got "Maintenance"',
        ),
        (
            _rule(sources=["platfrom"]),
            'policy.rules[1].sources: must be one of Platform, User; got "platfrom" (did you mean "Platform"?)',
        ),
        (
            {"policy": {"rules": [{"action": "APROVE"}]}},
            'policy.rules[1].action: must be one of approve, ask, inform, ignore; got "APROVE" (did you mean "approve"?)',
        ),
        (
            _rule(on_prepare_failure="Hodl"),
            'policy.rules[1].on_prepare_failure: must be one of hold, approve; got "Hodl" (did you mean "hold"?)',
        ),
        (
            _rule(window={"days": ["Mon", "Tues"]}),
            'policy.rules[1].window.days: must be one of mon, tue, wed, thu, fri, sat, sun; got "Tues" (did you mean "tue"?)',
        ),
        (
            {"teams": {"format": "Adaptiv"}},
            'teams.format: must be one of adaptive, messagecard; got "Adaptiv" (did you mean "adaptive"?)',
        ),
        (
            {"log": {"format": "Jsonl"}},
            'log.format: must be one of text, json; got "Jsonl" (did you mean "json"?)',
        ),
        (
            {"slack": {"mention_types": ["Preemt"]}},
            "slack.mention_types: must be one of Freeze, Reboot, Redeploy, Preempt, Terminate; "
            'got "Preemt" (did you mean "Preempt"?)',
        ),
    ],
)
def test_an_unknown_name_is_an_error_naming_the_key_and_the_nearest(
    data: dict[str, Any], line: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        config_from_mapping(data, source="f.toml")
    assert str(caught.value) == f"f.toml: {line}"


def test_a_misspelt_event_type_stops_check_run_and_once(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "sebridge.toml",
        endpoint="http://127.0.0.1:9",  # never asked: the config is refused first
        db=tmp_path / "state.db",
        vm_name="vm0",
        extra=TERMINATE_RULES.replace('"terminate"', '"Terminte"'),
    )
    for command in ("check", "run", "once"):
        code, out, err = cli_main(command, "--config", str(path))
        assert (code, out) == (2, ""), (command, err)
        assert err == (
            f"sebridge: configuration error: {path}: policy.rules[1].event_types: must be one"
            ' of Freeze, Reboot, Redeploy, Preempt, Terminate; got "Terminte" (did you mean'
            ' "Terminate"?)\n'
        ), command
    assert not (tmp_path / "state.db").exists()


def test_a_terminate_rule_in_lower_case_decides_a_real_terminate(
    tmp_path: Path, sim: Simulator, store_url: str
) -> None:
    """The finding, replayed through `sebridge once`: the Terminate is decided by the first
    rule (asked), never approved by the catch-all after it; other events still are."""
    path = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        store_url=store_url,
        vm_name="vm0",
        extra=TERMINATE_RULES,
    )
    terminate = sim.schedule("Terminate")
    reboot = sim.schedule("Reboot")
    code, _, err = cli_main("once", "--config", str(path))
    assert code == 0, err
    assert sim.start_requests == [reboot]  # the Terminate waits for a person
    store = Store(store_url)
    try:
        asked, approved = store.events.get(terminate), store.events.get(reboot)
    finally:
        store.close()
    assert asked is not None and approved is not None
    assert asked.decision == Decision("ask", "never auto-approve Terminate")
    assert approved.decision == Decision("approve", "everything else")
    assert "warning" not in err.lower()  # nothing to warn about: the rule is exact

"""Each instance says what it hears with `route` (issue 34, finding 14): "all" (every event
whatever its rule's notify: the journal, the incident webhook), "default" (events whose rule
names no instance, and those naming it: the behaviour before `route`) or "named" (only where
a rule's notify names it; `route_only = true` is its alias). An ignored event reaches none.

Four JSON-lines files stand for four instances; both stores (conftest.py: store_url).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import run_cli
from sebridge.cli.runtime import build_daemon
from sebridge.engine.daemon import Daemon
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError

RULES: list[dict[str, Any]] = [
    {"name": "db", "description": "db", "action": "ask", "notify": ["jsonl.pager"]},
    {"name": "noise", "event_types": ["Freeze"], "action": "ignore"},
    {"name": "the rest", "action": "inform"},  # no notify
]


@pytest.fixture
def daemon(sim: Simulator, store_url: str, tmp_path: Path) -> Iterator[Daemon]:
    data = {
        "imds": {"endpoint": sim.url, "vm_name": "vm0"},
        "store": {"url": store_url},
        "console": {"enabled": False},
        "policy": {"rules": RULES},
        "jsonl": {
            "path": str(tmp_path / "journal.jsonl"),
            "route": "ALL",  # any case
            "team": {"path": str(tmp_path / "team.jsonl")},  # route "default"
            "pager": {"path": str(tmp_path / "pager.jsonl"), "route": "named"},
            "audit": {"path": str(tmp_path / "audit.jsonl"), "route_only": True},
        },
    }
    d = build_daemon(config_from_mapping(data, environ={}))
    yield d
    d.parts.dispatcher.stop(0.0)
    d.imds.close()
    d.store.close()


def heard(path: Path) -> set[str]:
    """The events a JSON-lines file heard of."""
    if not path.exists():
        return set()
    return {json.loads(line)["event_id"] for line in path.read_text().splitlines()}


def test_each_instance_hears_what_its_route_says(
    sim: Simulator, daemon: Daemon, tmp_path: Path
) -> None:
    db = sim.schedule("Reboot", description="db maintenance")
    other = sim.schedule("Redeploy")
    ignored = sim.schedule("Freeze", duration=5)
    daemon.tick()
    for name in daemon.parts.dispatcher.sinks:
        daemon.parts.dispatcher.deliver_due(name)

    # "all": every event whatever its rule names; never an ignored one (recorded, sent nowhere).
    assert heard(tmp_path / "journal.jsonl") == {db, other}
    # "named": only the rule that names it.
    assert heard(tmp_path / "pager.jsonl") == {db}
    # "default": the rule without notify (as before route); not the one naming jsonl.pager.
    assert heard(tmp_path / "team.jsonl") == {other}
    # route_only = true is "named": no rule names it, so it hears nothing.
    assert heard(tmp_path / "audit.jsonl") == set()
    assert ignored not in heard(tmp_path / "journal.jsonl")


@pytest.mark.parametrize(
    ("table", "expected"),
    [
        (
            {"route": "nmaed"},
            'jsonl.x.route: must be one of all, default, named; got "nmaed" '
            '(did you mean "named"?)',
        ),
        (
            {"route": "all", "route_only": True},
            'jsonl.x.route_only: true disagrees with route = "all"',
        ),
        ({"route": "named", "route_only": False}, "jsonl.x.route_only: false disagrees"),
        ({"route": 1}, "jsonl.x.route: expected a string"),
    ],
)
def test_an_unknown_or_contradicted_route_is_a_config_error(
    table: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"jsonl": {"x": {"path": "-", **table}}}, environ={})
    assert expected in str(info.value)


def test_check_exits_2_naming_the_route_key(tmp_path: Path) -> None:
    cfg = tmp_path / "sebridge.toml"
    cfg.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "s.db"}"\n[console]\nroute = "everything"\n',
        encoding="utf-8",
    )
    done = run_cli("check", "--config", str(cfg))
    assert done.returncode == 2
    assert "console.route: must be one of all, default, named" in done.stderr

"""Rules that match on who an event affects (issue 34, finding 13): `resources` (shell-style
patterns of the VMs Resources list) and `tags` (the Azure tags of a listed VM, as each agent
reads them from IMDS's instance metadata at start and records them in the store, so every
agent of a fleet matches another VM's tags). Both stores (conftest.py: store_url).
"""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from helpers import ListSink, run_cli
from sebridge.cli.assembly import compose_daemon
from sebridge.cli.runtime import record_tags
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.imds.simulator.compute import compute_document
from sebridge.imds.tags import parse_tags, read_tags
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError
from sebridge.model import ScheduledEvent
from sebridge.model.decision import Decision
from sebridge.policy.compile import build_policy
from sebridge.policy.explain import explain
from sebridge.store import Store

RULES: list[dict[str, Any]] = [
    {"name": "payments", "tags": {"team": "pay*", "env": "PROD"}, "action": "approve"},
    {"name": "web tier", "resources": ["WEB*", "api-?"], "action": "inform"},
]
NOW = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


def config_for(sim: Simulator, store_url: str) -> Any:
    return config_from_mapping(
        {
            "imds": {"endpoint": sim.url, "vm_name": sim.vm_name},
            "store": {"url": store_url},
            "policy": {"rules": RULES},
        },
        environ={},
    )


def reboot(*vms: str) -> ScheduledEvent:
    return ScheduledEvent("E-" + "-".join(vms), "Reboot", "Scheduled", resources=vms)


def test_each_agent_records_its_vms_tags_and_every_agent_matches_them(
    sim: Simulator, store_url: str, make_store: Callable[..., Store]
) -> None:
    store = make_store(store_url, agent="web1")
    # web2's agent starts: it reads its Azure tags from IMDS and records them in the store.
    sim.tags = {"team": "payments", "env": "prod", "note": "a;b:c"}
    record_tags(config_for(sim, store_url), store, "web2")
    assert store.vm_tags.all() == {"web2": {"team": "payments", "env": "prod", "note": "a;b:c"}}

    # web1's agent decides an event listing web1 and web2: web2's tags match the rule.
    sink = ListSink()
    daemon = compose_daemon(
        ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
        store,
        {"list": sink},
        policy=build_policy(config_for(sim, store_url).policy),
        vm_name="web1",
    )
    both = sim.schedule("Reboot", resources=["web1", "web2"])
    web3 = sim.schedule("Reboot", resources=["web1", "_web3"])  # 2017-03-01's "_" prefix
    db = sim.schedule("Reboot", resources=["db1"])
    try:
        daemon.tick()
    finally:
        daemon.imds.close()
    decided = {e: store.events.get(e).decision for e in (both, web3, db)}  # type: ignore[union-attr]
    assert decided == {
        both: Decision("approve", "payments"),
        # web3 has no recorded tags (no agent read them): the tags rule passes it by.
        web3: Decision("inform", "web tier"),
        db: Decision("ask", "no rule matched"),
    }


def test_policy_explain_says_why_resources_and_tags_matched_or_not() -> None:
    policy = build_policy(config_from_mapping({"policy": {"rules": RULES}}, environ={}).policy)
    tags = {"web2": {"team": "payments", "env": "prod"}, "web4": {"team": "web"}}

    paying = explain(reboot("web1", "WEB2"), policy, "web1", NOW, tags_of=lambda: tags).lines()
    assert '  policy.rules[1] "payments": matches' in paying
    assert "      tags: WEB2 has team=payments, env=prod" in paying

    other = explain(reboot("web3", "web4", "db1"), policy, "web1", NOW, tags_of=lambda: tags)
    lines = other.lines()
    assert '  policy.rules[1] "payments": no match' in lines
    assert (
        "      tags: no listed VM has team=pay*, env=PROD (web3: no tags recorded (no agent has "
        "read them: it matches no tags rule); web4: team=web; db1: no tags recorded (no agent "
        "has read them: it matches no tags rule))"
    ) in lines
    assert "      resources: web3 matches WEB*; web4 matches WEB*" in lines
    assert other.decision == Decision("inform", "web tier")

    nobody = explain(reboot("db1"), policy, "web1", NOW, tags_of=lambda: tags).lines()
    assert "      resources: no VM of Resources (db1) matches WEB* or api-?" in nobody


def test_the_policy_explain_command_reads_the_recorded_tags(sim: Simulator, tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    sim.tags = {"team": "payments", "env": "Prod"}
    cfg = tmp_path / "sebridge.toml"
    cfg.write_text(
        f'[imds]\nendpoint = "{sim.url}"\nvm_name = "web2"\n[store]\nurl = "sqlite:///{db}"\n'
        '[[policy.rules]]\nname = "payments"\ntags = { team = "pay*", env = "prod" }\n'
        'action = "approve"\n',
        encoding="utf-8",
    )
    assert run_cli("once", "--config", str(cfg)).returncode == 0  # records web2's tags
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "EventId": "E1",
                "EventType": "Reboot",
                "EventStatus": "Scheduled",
                "Resources": ["web2"],
            }
        ),
        encoding="utf-8",
    )
    done = run_cli("policy", "explain", "--config", str(cfg), "--event", str(event))
    assert done.returncode == 0, done.stderr
    assert "      tags: web2 has team=payments, env=Prod" in done.stdout
    assert "decision: approve at once" in done.stdout


def test_the_simulator_serves_tags_both_ways_and_the_client_reads_them(sim: Simulator) -> None:
    sim.tags = {"team": "payments", "cost": "a;b"}
    client = ImdsClient(sim.url, timeout=2.0)
    try:
        assert read_tags(client) == {"team": "payments", "cost": "a;b"}  # tagsList keeps ";"
    finally:
        client.close()
    # Before tagsList (api-version 2019-06-04), only the "name:value;..." string.
    old = compute_document("web2", {"team": "payments", "env": "prod"}, "2019-03-11")
    assert "tagsList" not in old and old["tags"] == "team:payments;env:prod"
    assert parse_tags(old) == {"team": "payments", "env": "prod"}


@pytest.mark.parametrize(
    ("rule", "expected"),
    [
        ({"resources": []}, "policy.rules[1].resources: empty: it would match no event"),
        ({"resources": [3]}, "policy.rules[1].resources: expected a list of strings"),
        ({"resources": ["web*", " "]}, "policy.rules[1].resources: holds an empty pattern"),
        ({"tags": {}}, "policy.rules[1].tags: empty: it would match no event"),
        ({"tags": {"team": 3}}, "policy.rules[1].tags: expected a table of strings"),
        (
            {"tags": {"team": ""}},
            'policy.rules[1].tags.team: empty: a pattern of its value, e.g. "payments"',
        ),
    ],
)
def test_a_bad_resources_or_tags_matcher_is_a_config_error(
    rule: dict[str, Any], expected: str
) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping({"policy": {"rules": [{**rule, "action": "ask"}]}}, environ={})
    assert expected in str(info.value)


def test_check_refuses_an_empty_resources_list_with_exit_2(tmp_path: Path) -> None:
    cfg = tmp_path / "sebridge.toml"
    cfg.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "s.db"}"\n'
        '[[policy.rules]]\nresources = []\naction = "ask"\n',
        encoding="utf-8",
    )
    done = run_cli("check", "--config", str(cfg))
    assert done.returncode == 2
    assert "policy.rules[1].resources: empty" in done.stderr


def test_a_scenario_gives_the_simulated_vm_its_tags() -> None:
    from sebridge.imds.simulator.scenario import parse_scenario

    scenario = parse_scenario({"vm_name": "web2", "tags": {"team": "payments"}})
    with Simulator(**scenario.settings()) as sim:
        client = ImdsClient(sim.url, timeout=2.0)
        try:
            assert read_tags(client) == {"team": "payments"}
        finally:
            client.close()
    with pytest.raises(ValueError, match="tags: must be a table of strings"):
        parse_scenario({"tags": {"team": 3}})

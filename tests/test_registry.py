"""The integration registry: one tuple read by everything; nothing else names an integration;
a configured integration is never skipped in silence."""

from __future__ import annotations

import ast
import filecmp
import shutil
from pathlib import Path

import pytest

import throwaway.jsonpost
from fakes.webhook import FakeWebhook
from helpers import cli_env, query, run_cli, toml_str, write_config
from sebridge.cli.runtime import build_daemon, build_sinks
from sebridge.imds.simulator import Simulator
from sebridge.integrations.base import Integration
from sebridge.integrations.registry import REGISTRY
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.integrations.registry import enabled as enabled_integrations
from sebridge.model.decision import Decision

SRC = Path(__file__).resolve().parent.parent / "src" / "sebridge"
INTEGRATIONS = SRC / "integrations"
# A JSON webhook, written the way a newcomer would: its folder is all it brings.
THROWAWAY = Path(throwaway.jsonpost.__file__).parent
NAMES = {i.name for i in REGISTRY}


def test_every_integration_has_its_own_folder_and_a_unique_name() -> None:
    assert len(NAMES) == len(REGISTRY)
    for integration in REGISTRY:
        assert isinstance(integration, Integration)
        assert (INTEGRATIONS / integration.name / "__init__.py").is_file(), integration.name
    folders = {p.parent.name for p in INTEGRATIONS.glob("*/__init__.py")}
    assert folders == NAMES  # no folder left out of the registry


def _imported_modules(path: Path) -> set[str]:
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.ImportFrom) and node.module:
            found.add(node.module)
            found.update(f"{node.module}.{alias.name}" for alias in node.names)
        elif isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
    return found


def test_nothing_outside_an_integrations_folder_names_a_concrete_integration() -> None:
    outside = [
        p
        for p in SRC.rglob("*.py")
        if not any(INTEGRATIONS / name in p.parents for name in NAMES)
        and p != INTEGRATIONS / "registry.py"
    ]
    assert len(outside) > 20
    for path in outside:
        for module in _imported_modules(path):
            parts = module.split(".")
            if parts[:2] == ["sebridge", "integrations"] and len(parts) > 2:
                assert parts[2] not in NAMES, f"{path.relative_to(SRC)} imports {module}"


def test_the_runtime_builds_a_sink_for_every_enabled_integration(tmp_path: Path) -> None:
    config = from_mapping(
        {
            "imds": {"vm_name": "vm0"},  # no IMDS here to say it
            "store": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
            "jsonl": {"path": str(tmp_path / "events.jsonl")},
            "slack": {"bot_token": "xoxb-1", "app_token": "xapp-1", "channel": "C1"},
        },
        environ={},
    )
    names = [i.name for i in enabled_integrations(config)]
    assert names == ["console", "jsonl", "slack"]
    assert list(build_sinks(config)) == names  # each sink by its integration's name
    daemon = build_daemon(config)
    try:
        assert daemon.sinks_for(Decision("ask", "r")) == tuple(names)
        assert daemon.sinks_for(Decision("ignore", "r")) == ()
    finally:
        daemon.store.close()


def test_the_defaults_turn_on_the_console_alone() -> None:
    assert [i.name for i in enabled_integrations(from_mapping({}, environ={}))] == ["console"]


@pytest.mark.parametrize("command", ["check", "run", "once"])
def test_a_section_no_integration_owns_is_refused_before_anything_runs(
    tmp_path: Path, command: str
) -> None:
    # No integration is skipped in silence: a section nothing reads is an error.
    path = write_config(
        tmp_path / "c.toml",
        endpoint="http://127.0.0.1:9",
        db=tmp_path / "s.db",
        extra='[pagerduty]\nrouting_key = "R0123"\n',  # reached by a webhook, not natively
    )
    result = run_cli(command, "--config", str(path))
    assert result.returncode == 2
    assert "unknown section [pagerduty]" in result.stderr
    assert not (tmp_path / "s.db").exists()  # refused before anything was opened


def test_an_unset_variable_in_a_secret_stops_run_naming_key_and_variable(tmp_path: Path) -> None:
    path = write_config(
        tmp_path / "c.toml",
        endpoint="http://127.0.0.1:9",
        db=tmp_path / "s.db",
        extra='[slack]\nbot_token = "${SLACK_BOT_TOKEN}"\napp_token = "xapp-1"\nchannel = "C1"\n',
    )
    result = run_cli("run", "--config", str(path))
    assert result.returncode == 2
    assert "slack.bot_token: environment variable SLACK_BOT_TOKEN is not set" in result.stderr


def _tree_differences(left: Path, right: Path) -> list[str]:
    """Paths that differ between two trees (added, removed or changed), relative to them."""
    found: list[str] = []

    def walk(cmp: filecmp.dircmp[str], prefix: str) -> None:
        found.extend(f"{prefix}{name}" for name in cmp.left_only + cmp.right_only)
        found.extend(f"{prefix}{name}" for name in cmp.diff_files)
        for name, sub in cmp.subdirs.items():
            walk(sub, f"{prefix}{name}/")

    walk(filecmp.dircmp(left, right, ignore=["__pycache__"]), "")
    return sorted(found)


@pytest.mark.slow
def test_a_new_integration_is_its_folder_and_one_registry_entry(tmp_path: Path) -> None:
    """A JSON webhook added to a copy of the package: its folder, and its import and entry in
    the registry. Configured, checked, delivered, keyed by its name: nothing else to touch
    (its sink does not even say its name: the dispatcher keys it by the integration's)."""
    package = tmp_path / "src" / "sebridge"
    shutil.copytree(SRC, package, ignore=shutil.ignore_patterns("__pycache__"))
    shutil.copytree(
        THROWAWAY,
        package / "integrations" / "jsonpost",
        ignore=shutil.ignore_patterns("__pycache__"),
    )
    registry = package / "integrations" / "registry.py"
    text = registry.read_text()
    text = text.replace(
        "from sebridge.integrations.teams import Teams\n",
        "from sebridge.integrations.teams import Teams\n"
        "from sebridge.integrations.jsonpost import JsonPost\n",
    )
    text = text.replace("    Kubernetes(),\n", "    Kubernetes(),\n    JsonPost(),\n")
    registry.write_text(text)
    assert _tree_differences(SRC, package) == [
        "integrations/jsonpost",
        "integrations/registry.py",
    ]
    with FakeWebhook() as hook, Simulator(port=0, vm_name="vm0") as sim:
        event_id = sim.schedule("Reboot")
        config = write_config(
            tmp_path / "c.toml",
            endpoint=sim.url,
            db=tmp_path / "s.db",
            extra=f"[jsonpost]\nurl = {toml_str(hook.url)}\n",
        )
        env = cli_env(PYTHONPATH=str(tmp_path / "src"))
        checked = run_cli("check", "--config", str(config), env=env)
        assert checked.returncode == 0, checked.stderr
        assert "sinks: jsonpost" in checked.stdout
        once = run_cli("once", "--config", str(config), env=env)
        assert once.returncode == 0, once.stderr
    assert hook.bodies == [{"transition": "scheduled", "event_id": event_id}]
    assert query(tmp_path / "s.db", "SELECT sink, state FROM outbox") == [("jsonpost", "delivered")]

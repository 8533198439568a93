"""The integration registry: one tuple read by everything; nothing else names an integration;
a configured integration is never skipped in silence."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from helpers import run_cli, write_config
from sebridge.config import Config, from_mapping
from sebridge.integrations.base import Integration
from sebridge.integrations.registry import REGISTRY
from sebridge.runtime import build_daemon, build_sinks, enabled_integrations

SRC = Path(__file__).resolve().parent.parent / "src" / "sebridge"
INTEGRATIONS = SRC / "integrations"
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
            "store": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
            "jsonl": {"path": str(tmp_path / "events.jsonl")},
            "slack": {"bot_token": "xoxb-1", "app_token": "xapp-1", "channel": "C1"},
        },
        environ={},
    )
    names = [i.name for i in enabled_integrations(config)]
    assert names == ["console", "jsonl", "slack"]
    assert [s.name for s in build_sinks(config)] == names
    daemon = build_daemon(config)
    try:
        assert daemon.sinks_for("notify") == names
    finally:
        daemon.store.close()


def test_the_defaults_turn_on_the_console_alone() -> None:
    assert [i.name for i in enabled_integrations(Config())] == ["console"]


@pytest.mark.parametrize(
    ("section", "line"),
    [
        ('[teams]\nwebhook_url = "https://x.example.com/h"\n', "[teams]: Microsoft Teams"),
        ('[jira]\nurl = "https://x.atlassian.net"\nproject = "OPS"\n', "[jira]: Jira"),
    ],
)
@pytest.mark.parametrize("command", ["check", "run", "once"])
def test_an_integration_not_in_this_version_is_refused_with_one_line(
    tmp_path: Path, section: str, line: str, command: str
) -> None:
    path = write_config(
        tmp_path / "c.toml", endpoint="http://127.0.0.1:9", db=tmp_path / "s.db", extra=section
    )
    result = run_cli(command, "--config", str(path))
    assert result.returncode == 2
    assert f"{line} is not available in this version" in result.stderr
    assert len(result.stderr.strip().splitlines()) == 1
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

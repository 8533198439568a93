"""The README states what installing needs (issue 10, item 8): pip on Python 3.10 refuses
with a bare version error, so the first thing a reader sees must say 3.11 or newer."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_names_the_python_version_pyproject_requires() -> None:
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    (version,) = re.findall(r"^>=(\d+\.\d+)$", required)
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    before_any_command = readme[: readme.index("```")]
    assert f"Python {version} or newer" in before_any_command


def _policy_examples() -> list[str]:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index("## Readiness hooks and reminders")
    section = readme[start : readme.index("\n## ", start + 1)]
    return re.findall(r"```toml\n(.*?)```", section, re.S)


def test_the_worked_policies_of_the_readme_are_valid_configs(tmp_path: Path) -> None:
    from sebridge.integrations.registry import config_from_mapping
    from sebridge.policy.compile import build_policy

    examples = _policy_examples()
    assert len(examples) == 5  # four worked policies and the one of "When the drain fails"
    hooks = str(ROOT / "deploy" / "hooks") + "/"
    # The Kubernetes example runs the image's kubectl (tests/test_kubernetes.py checks the
    # image has it); here a stand-in at a temporary path.
    kubectl = tmp_path / "kubectl"
    kubectl.write_text("#!/bin/sh\n")
    kubectl.chmod(0o755)
    environ = {"NODE_NAME": "node-1"}
    for text in examples:
        local = text.replace("/etc/sebridge/hooks/", hooks)
        data = tomllib.loads(local.replace("/usr/local/bin/kubectl", str(kubectl)))
        if "slack" in data:  # the example shows one key of a [slack] that has the rest
            data["slack"].update(bot_token="xoxb-1", app_token="xapp-1", channel="C1")
        config = config_from_mapping(data, environ=environ)
        policy = build_policy(config.policy)
        assert [r.name for r in policy.rules] == [r["name"] for r in data["policy"]["rules"]]
        for name, hook in data.get("hooks", {}).items():
            expected = [arg.replace("${NODE_NAME}", "node-1") for arg in hook["command"]]
            assert config.hooks[name].command == tuple(expected)


def _section(title: str) -> str:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    start = readme.index(title)
    return readme[start : readme.index("\n## ", start + 1)]


def test_the_policy_explain_example_prints_what_the_readme_shows(tmp_path: Path) -> None:
    from helpers import cli_env

    section = _section("## Policy rules: approve, ask, inform or ignore")
    (rules,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    (event,) = re.findall(r"```json\n(.*?)```", section, re.S)
    (command,) = re.findall(r"```sh\n(.*?)\n```", section, re.S)
    (shown,) = re.findall(r"```text\n(.*?)```", section, re.S)
    (tmp_path / "rules.toml").write_text(rules, encoding="utf-8")
    (tmp_path / "event.json").write_text(event, encoding="utf-8")
    argv = command.split()
    assert argv[:3] == ["sebridge", "policy", "explain"]
    result = subprocess.run(
        [sys.executable, "-m", "sebridge", *argv[1:]],
        capture_output=True,
        text=True,
        timeout=60,
        env=cli_env(),
        cwd=tmp_path,
        check=False,
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout == shown

"""What the README and the site's pages show runs as shown: the Python version installing
needs (issue 10, item 8: pip on Python 3.10 refuses with a bare version error, so the first
thing a reader sees must say 3.11 or newer), the worked policies, `policy explain`'s output.
The pages are read through tests/pages.py, by page and heading."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from pages import page

ROOT = Path(__file__).resolve().parent.parent


def test_the_readme_names_the_python_version_pyproject_requires() -> None:
    required = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["requires-python"]
    (version,) = re.findall(r"^>=(\d+\.\d+)$", required)
    for name in ("README.md", "getting-started.md"):
        text = page(name)
        before_any_command = text[: text.index("```sh")]
        assert f"Python {version} or newer" in before_any_command, name


def _policy_examples() -> list[str]:
    return re.findall(r"```toml\n(.*?)```", page("hooks.md"), re.S)


def test_the_worked_policies_of_the_hooks_page_are_valid_configs(tmp_path: Path) -> None:
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


def test_the_policy_explain_example_prints_what_the_policy_page_shows(tmp_path: Path) -> None:
    from helpers import cli_env

    section = page("policy.md")
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

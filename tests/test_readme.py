"""The README states what installing needs (issue 10, item 8): pip on Python 3.10 refuses
with a bare version error, so the first thing a reader sees must say 3.11 or newer."""

from __future__ import annotations

import re
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


def test_the_worked_policies_of_the_readme_are_valid_configs() -> None:
    from sebridge.integrations.registry import config_from_mapping
    from sebridge.policy.compile import build_policy

    examples = _policy_examples()
    assert len(examples) == 4
    hooks = str(ROOT / "deploy" / "hooks") + "/"
    for text in examples:
        data = tomllib.loads(text.replace("/etc/sebridge/hooks/", hooks))
        if "slack" in data:  # the example shows one key of a [slack] that has the rest
            data["slack"].update(bot_token="xoxb-1", app_token="xapp-1", channel="C1")
        config = config_from_mapping(data)
        policy = build_policy(config.policy)
        assert [r.name for r in policy.rules] == [r["name"] for r in data["policy"]["rules"]]
        for name, hook in data.get("hooks", {}).items():
            assert config.hooks[name].command == tuple(hook["command"])

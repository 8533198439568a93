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

"""config/example.toml holds every key the configuration accepts, and no other (issue 34,
finding 16): read against the configuration's own schema (config/schema.py: its sections'
dataclasses, the rules', the hooks', the keys every sending instance takes), so neither can
drift. docs/reference/configuration.md is written from the same schema."""

from __future__ import annotations

import re
import tomllib
from pathlib import Path

from sebridge.config.instances import INSTANCE_KEYS
from sebridge.config.schema import tables
from sebridge.integrations.registry import REGISTRY, SECTIONS

EXAMPLE = Path(__file__).resolve().parent.parent / "config" / "example.toml"

# A header, written or commented out: [imds], # [hooks.drain], # [[policy.rules]].
_HEADER = re.compile(r"#?\s*\[\[?([a-z_][a-z0-9_.-]*)\]\]?\s*(#.*)?")
# A key line, written or commented out: `port = 587`, `# notify = ["slack"]  # why`.
_KEY = re.compile(r"#?\s*([a-z_][a-z0-9_]*)\s*=\s*\S.*")


def example_keys() -> set[str]:
    """Every key the example writes or shows commented out, as "section.key" (rules as
    "policy.rules.key", a hook's as "hooks.key", a window's as "policy.rules.window.key",
    a named instance's as its integration's: "slack.dba.channel" is "slack.channel")."""
    found: set[str] = set()
    section = ""
    for line in EXAMPLE.read_text(encoding="utf-8").splitlines():
        header = _HEADER.fullmatch(line)
        if header:
            section = header.group(1)
            continue
        key = _KEY.fullmatch(line)
        if not key or not section:
            continue
        value = tomllib.loads(line.lstrip("# "))[key.group(1)]  # a key line must be TOML
        where = _where(section)
        found.add(f"{where}.{key.group(1)}")
        if key.group(1) == "window" and isinstance(value, dict):
            found.update(f"{where}.window.{k}" for k in value)
    return found


def _where(section: str) -> str:
    if section.startswith("hooks."):
        return "hooks"
    first, _, rest = section.partition(".")
    if first in SECTIONS.types() and rest:
        return first  # a named instance takes its integration's keys
    return section


def schema() -> tuple[set[str], set[str]]:
    """What the configuration accepts (config/schema.py): the keys a full example must
    show, and those it may show beside them (a secret's `_file` twin, an instance's
    routing keys)."""
    sending = [i.name for i in REGISTRY if i.outbound]
    keys = [k for t in tables(SECTIONS.types(), sending) for k in t.keys]
    required = {k.path for k in keys if not k.twin and not k.routing}
    return required, {k.path for k in keys} - required


def test_the_example_holds_every_key_the_configuration_accepts() -> None:
    required, also = schema()
    shown = example_keys()
    missing = required - shown
    assert not missing, f"accepted but not in config/example.toml: {sorted(missing)}"
    # The keys every sending instance takes are shown once, in some sending section.
    for key in INSTANCE_KEYS:
        assert any(k.endswith(f".{key}") for k in shown & also), f"{key} not in example.toml"


def test_the_example_holds_no_key_the_configuration_refuses() -> None:
    required, also = schema()
    unknown = example_keys() - required - also
    assert not unknown, f"in config/example.toml but not accepted: {sorted(unknown)}"


def test_the_comparison_sees_a_missing_key_and_an_unknown_one(tmp_path: Path) -> None:
    # The reading itself: a key commented out counts, a prose line does not.
    required, _ = schema()
    shown = example_keys()
    assert "hooks.retries" in shown and "policy.rules.notify" in shown
    assert "webhook.url" in shown and "webhook.url_file" not in required
    assert "policy.rules.window.timezone" in shown
    assert not any(k.startswith("hooks.holds") for k in shown)

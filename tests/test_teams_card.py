"""Pure parts of the Teams cards: markdown escaping, relative times, templates that go wrong."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from sebridge.cli.runtime import build_sinks
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.integrations.render import Renderer, relative
from sebridge.integrations.teams.card import CardBuilder, escape_markdown, samples
from sebridge.kernel.errors import ConfigError, PermanentDeliveryError

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)


@pytest.mark.parametrize(
    ("text", "escaped"),
    [
        ("Host update", "Host update"),
        ("**bold** _it_ ~~s~~", r"\*\*bold\*\* \_it\_ \~\~s\~\~"),
        ("[x](http://evil)", r"\[x\](http://evil)"),
        ("`code`", r"\`code\`"),
        ("a\\b", r"a\\b"),
        ("<at>bob</at>", r"\<at\>bob\</at\>"),
        ("- item\n+ item\n# head\n> quote", "\\- item\n\\+ item\n\\# head\n\\> quote"),
        ("1. first\n  22. second", "1\\. first\n  22\\. second"),
        ("vm-1 costs 1.5 - 2", "vm-1 costs 1.5 - 2"),  # only line starts are list markers
        (None, ""),
    ],
)
def test_escape_markdown(text: str | None, escaped: str) -> None:
    assert escape_markdown(text) == escaped


@pytest.mark.parametrize(
    ("delta", "said"),
    [
        (timedelta(minutes=14, seconds=5), "in 14 min"),
        (timedelta(seconds=40), "in 40 s"),
        (timedelta(seconds=0), "in 0 s"),
        (timedelta(seconds=-200), "3 min ago"),
        (timedelta(hours=3, minutes=7), "in 3 h 07 min"),
        (timedelta(days=3), "in 3 days"),
    ],
)
def test_relative(delta: timedelta, said: str) -> None:
    assert relative(NOW + delta, NOW) == said
    assert relative(None, NOW) == ""


def test_every_sample_renders_both_formats() -> None:
    builder = CardBuilder(Renderer())
    for message in samples():
        assert builder.adaptive(message)["attachments"][0]["content"]["type"] == "AdaptiveCard"
        assert builder.messagecard(message)["title"]


def _override(tmp_path: Path, name: str, text: str) -> Renderer:
    folder = tmp_path / "teams"
    folder.mkdir(exist_ok=True)
    (folder / name).write_text(text, encoding="utf-8")
    return Renderer(tmp_path)


def test_a_template_too_big_even_when_cut_is_refused(tmp_path: Path) -> None:
    big = (
        '{"type": "AdaptiveCard", "version": "1.5", "body": [{"type": "TextBlock", "text": "'
        + "x" * 40_000
        + '"}]}'
    )
    builder = CardBuilder(_override(tmp_path, "card.j2", big))
    with pytest.raises(PermanentDeliveryError, match="over Teams' 28 KB"):
        builder.adaptive(samples()[0])


@pytest.mark.parametrize(
    ("text", "says"),
    [
        ("{{ nope }}", "teams/card.j2"),
        ("{% if %}", "teams/card.j2, line 1"),
        ("not json", "did not produce valid JSON"),
        ("[1, 2]", "must produce a JSON object"),
    ],
)
def test_a_broken_override_stops_the_start(tmp_path: Path, text: str, says: str) -> None:
    config = from_mapping(
        {
            "store": {"url": "sqlite://"},
            "templates": {"dir": str(tmp_path)},
            "teams": {"webhook_url": "https://prod-1.westeurope.logic.azure.com/workflows/x"},
        },
        environ={},
    )
    _override(tmp_path, "card.j2", text)
    with pytest.raises(ConfigError, match="teams: template") as caught:
        build_sinks(config)
    assert says in str(caught.value)

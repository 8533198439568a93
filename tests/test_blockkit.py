"""scripts/blockkit.py, the Slack-like drawing of the docs' Slack pictures: mrkdwn as Slack
shows it, IMDS text never turned into markup, and every block sebridge's Slack templates send
drawn (a block it cannot draw stops the pictures, naming it)."""

from __future__ import annotations

import importlib.util
import re
import sys
from datetime import UTC, datetime
from pathlib import Path
from types import ModuleType

import pytest

from fakes.slack import FakeSlack
from sebridge.integrations.render import Renderer
from sebridge.integrations.samples import sample_messages
from sebridge.integrations.slack.sink import SlackSink, build_slack_client

pytestmark = pytest.mark.usefixtures("no_proxy")

SCRIPT = Path(__file__).resolve().parent.parent / "scripts" / "blockkit.py"
NOW = datetime(2030, 1, 1, 11, 45, tzinfo=UTC)


def _load() -> ModuleType:
    spec = importlib.util.spec_from_file_location("blockkit", SCRIPT)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


blockkit = _load()


@pytest.mark.parametrize(
    ("text", "html"),
    [
        ("*Reboot* of web1", "<b>Reboot</b> of web1"),
        ("_soon_ and ~gone~", "<i>soon</i> and <s>gone</s>"),
        ("event `A*B*C`", "event <code>A*B*C</code>"),  # nothing is styled inside code
        ("line one\nline two", "line one<br>line two"),
        (":no_entry: Held", "⛔ Held"),
        (":not_an_emoji:", ":not_an_emoji:"),
        ("by <@U0123ABCD>", 'by <span class="mention">@U0123ABCD</span>'),
        ("<!here> look", '<span class="mention">@here</span> look'),
        (
            "<https://example.net/a?b=1&amp;c=2|the page>",
            '<a href="https://example.net/a?b=1&amp;c=2">the page</a>',
        ),
        (
            "<!date^1893499200^{date_short_pretty} {time}|2030-01-01 12:00:00 UTC> (in 15 min)",
            '<span class="date">Today 12:00</span> (in 15 min)',
        ),
        (
            "<!date^1893672000^{date_short_pretty} {time}|fallback>",
            '<span class="date">Jan 3, 2030 12:00</span>',
        ),
        ("snake_case_name and 2*3*4", "snake_case_name and 2*3*4"),
    ],
)
def test_mrkdwn_shows_as_slack_shows_it(text: str, html: str) -> None:
    assert blockkit.mrkdwn(text, NOW) == html


def test_text_escaped_by_its_sender_stays_text() -> None:
    """IMDS text reaches Slack escaped (&lt; &gt; &amp;): drawn, it is text, never a tag."""
    shown = blockkit.mrkdwn('Host &lt;script&gt;alert(1)&lt;/script&gt; &amp; "quotes"', NOW)
    assert "<script" not in shown and '"quotes"' not in shown
    assert shown == "Host &lt;script&gt;alert(1)&lt;/script&gt; &amp; &quot;quotes&quot;"
    plain = [{"type": "header", "text": {"type": "plain_text", "text": "<b>bold?</b>"}}]
    assert "&lt;b&gt;bold?&lt;/b&gt;" in blockkit.page(plain, NOW)


def test_a_block_it_cannot_draw_is_named() -> None:
    with pytest.raises(blockkit.UnknownBlock, match="'video'"):
        blockkit.page([{"type": "video"}], NOW)


def test_every_message_sebridges_slack_templates_send_is_drawn() -> None:
    """Every sample message (each transition kind and readiness state) as SlackSink posts it
    to a fake Slack, then drawn: buttons keep their style, nothing of mrkdwn is left raw."""
    with FakeSlack() as slack:
        client = build_slack_client(slack.bot_token, slack.url)
        sink = SlackSink(client, "C0123456789", Renderer())
        for message in sample_messages(description="Host *update* & <b>more</b>"):
            sink.send(message)
        posted = [m.blocks for m in slack.messages.values() if m.blocks]
    assert len(posted) > 20
    kinds = {b["type"] for blocks in posted for b in blocks}
    assert {"section", "context", "actions"} <= kinds
    for blocks in posted:
        drawn = blockkit.page(blocks, NOW).split("</style>")[1]
        assert "<!date^" not in drawn and not re.search(r":[a-z_]+:", drawn)
        for block in blocks:
            for button in block.get("elements", []) if block["type"] == "actions" else []:
                style = button.get("style", "")
                assert f'<button class="{style}">{button["text"]["text"]}</button>' in drawn
    assert any(
        '<button class="danger">Approve anyway</button>' in blockkit.page(b, NOW) for b in posted
    )

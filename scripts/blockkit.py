"""Slack Block Kit as HTML in a Slack-like layout, for the documentation's pictures.

Slack publishes no renderer for Block Kit (its Block Kit Builder is a web app), and none on npm
or PyPI draws blocks as HTML, so this small one draws what sebridge's templates send: section
text and fields, context, actions with primary and danger buttons, header and divider blocks,
and mrkdwn (bold, italics, strike, code, links, mentions, dates and the emoji sebridge's
templates name). Anything else stops it, naming the block, rather than draw it wrong.
Times are shown as a reader in UTC sees them. scripts/pictures.py uses it.
"""

from __future__ import annotations

import html
import re
from datetime import UTC, datetime
from typing import Any

__all__ = ["CAPTION", "EMOJI", "UnknownBlock", "mrkdwn", "page"]

CAPTION = "sebridge's Block Kit as it renders in a Slack-like layout (times in UTC)"
# The emoji sebridge's Slack templates name (templates/slack/*.j2), as Slack shows them.
EMOJI = {
    "alarm_clock": "⏰",
    "arrow_forward": "▶️",
    "arrows_counterclockwise": "🔄",
    "calendar": "📆",
    "checkered_flag": "🏁",
    "grey_question": "❔",
    "hourglass": "⌛",
    "hourglass_flowing_sand": "⏳",
    "no_entry": "⛔",
    "no_entry_sign": "🚫",
    "raising_hand": "🙋",
    "repeat": "🔁",
    "rotating_light": "🚨",
    "snowflake": "❄️",
    "test_tube": "🧪",
    "toolbox": "🧰",
    "truck": "🚚",
    "warning": "⚠️",
    "white_check_mark": "✅",
    "x": "❌",
}
_TOKEN = re.compile(r"<([^<>\n]+)>")
_CODE = re.compile(r"`([^`\n]+)`")
_STYLES = (
    (re.compile(r"(?<![\w*])\*(?=\S)([^*\n]+?)(?<=\S)\*(?![\w*])"), "b"),
    (re.compile(r"(?<![\w_])_(?=\S)([^_\n]+?)(?<=\S)_(?![\w_])"), "i"),
    (re.compile(r"(?<![\w~])~(?=\S)([^~\n]+?)(?<=\S)~(?![\w~])"), "s"),
)
_EMOJI = re.compile(r":([a-z0-9_+-]+):")
_KEPT = re.compile("\x00(\\d+)\x00")


class UnknownBlock(ValueError):
    """A block this renderer does not draw."""


def _date(inner: str, now: datetime) -> str:
    """`!date^ts^format|fallback` as a reader in UTC sees it (Slack's date formatting)."""
    spec, _, fallback = inner.partition("|")
    parts = spec.split("^")
    if len(parts) < 3 or not parts[1].isdigit():
        return html.escape(fallback)
    moment = datetime.fromtimestamp(int(parts[1]), UTC)
    day = f"{moment:%b} {moment.day}, {moment:%Y}"
    pretty = {0: "Today", 1: "Tomorrow", -1: "Yesterday"}.get((moment.date() - now.date()).days)
    words = {
        "{date_short_pretty}": pretty or day,
        "{date_short}": day,
        "{time}": f"{moment:%H:%M}",
    }
    text = parts[2]
    for key, value in words.items():
        text = text.replace(key, value)
    return html.escape(text)


def _token(inner: str, now: datetime) -> str:
    """A `<...>` of mrkdwn: a date, a mention, a channel or a link. What it holds is escaped
    already by its sender (&amp; &lt; &gt;), so it goes into the HTML as it is."""
    target, _, label = inner.partition("|")
    if target.startswith("!date^"):
        return f'<span class="date">{_date(inner, now)}</span>'
    if target.startswith("!subteam^"):
        return f'<span class="mention">@{label or "team"}</span>'
    if target.startswith("!"):
        return f'<span class="mention">@{target[1:]}</span>'
    if target.startswith("@"):
        return f'<span class="mention">@{label or target[1:]}</span>'
    if target.startswith("#"):
        return f'<span class="mention">#{label or target[1:]}</span>'
    href = html.escape(html.unescape(target), quote=True)
    return f'<a href="{href}">{label or target}</a>'


def mrkdwn(text: str, now: datetime) -> str:
    """mrkdwn as HTML. Its sender escaped &, < and > (Slack's rule), so no tag can come from
    the text itself; quotes are escaped here."""
    kept: list[str] = []

    def keep(piece: str) -> str:
        kept.append(piece)
        return f"\x00{len(kept) - 1}\x00"

    text = text.replace('"', "&quot;")
    text = _TOKEN.sub(lambda m: keep(_token(m.group(1), now)), text)
    text = _CODE.sub(lambda m: keep(f"<code>{m.group(1)}</code>"), text)
    for pattern, tag in _STYLES:
        text = pattern.sub(rf"<{tag}>\1</{tag}>", text)
    text = _EMOJI.sub(lambda m: EMOJI.get(m.group(1), m.group(0)), text)
    text = _KEPT.sub(lambda m: kept[int(m.group(1))], text)
    return text.replace("\n", "<br>")


def _text(obj: dict[str, Any], now: datetime) -> str:
    """A text object: mrkdwn, or plain_text (escaped here)."""
    if obj.get("type") == "mrkdwn":
        return mrkdwn(str(obj.get("text", "")), now)
    return html.escape(str(obj.get("text", "")), quote=False).replace("\n", "<br>")


def _block(block: dict[str, Any], now: datetime) -> str:
    kind = block.get("type")
    if kind == "header":
        return f'<div class="header">{_text(block["text"], now)}</div>'
    if kind == "divider":
        return "<hr>"
    if kind == "context":
        parts = (_text(e, now) for e in block.get("elements", []) if "text" in e)
        return f'<div class="context">{" ".join(parts)}</div>'
    if kind == "actions":
        buttons = (
            f'<button class="{html.escape(e.get("style", ""))}">{_text(e["text"], now)}</button>'
            for e in block.get("elements", [])
        )
        return f'<div class="actions">{"".join(buttons)}</div>'
    if kind == "section":
        text = f"<div>{_text(block['text'], now)}</div>" if "text" in block else ""
        fields = "".join(f"<div>{_text(f, now)}</div>" for f in block.get("fields", []))
        grid = f'<div class="fields">{fields}</div>' if fields else ""
        return f'<div class="section">{text}{grid}</div>'
    raise UnknownBlock(f"no drawing for the Block Kit block {kind!r}: add one to {__file__}")


STYLE = """
body { margin: 0; padding: 16px; background: #f8f8f8; color: #1d1c1d;
       font: 15px/1.47 Lato, "Helvetica Neue", "Liberation Sans", Arial, sans-serif; }
#message { display: flex; gap: 8px; background: #fff; padding: 12px 16px 10px;
           border-radius: 8px; border: 1px solid #e2e2e2; }
.avatar { flex: 0 0 36px; height: 36px; border-radius: 6px; background: #0b6e4f; color: #fff;
          font-weight: 900; font-size: 13px; display: flex; align-items: center;
          justify-content: center; }
.who b { font-weight: 900; }
.app { font-size: 10px; font-weight: 700; color: #616061; background: #ececec;
       border-radius: 2px; padding: 1px 3px; margin: 0 4px; }
.when { color: #616061; font-size: 12px; }
.blocks { min-width: 0; flex: 1; }
.section { margin: 4px 0 8px; }
.fields { display: grid; grid-template-columns: 1fr 1fr; gap: 8px 16px; margin-top: 4px; }
.header { font-size: 18px; font-weight: 900; margin: 4px 0 8px; }
.context { color: #616061; font-size: 13px; margin: 4px 0 8px; }
.actions { display: flex; gap: 8px; flex-wrap: wrap; margin: 8px 0 4px; }
button { font: inherit; font-size: 15px; font-weight: 700; padding: 0 12px; height: 36px;
         border-radius: 4px; border: 1px solid #c6c6c6; background: #fff; color: #1d1c1d; }
button.primary { background: #007a5a; border-color: #007a5a; color: #fff; }
button.danger { background: #fff; border-color: #e01e5a; color: #e01e5a; }
code { font: 12px Menlo, "DejaVu Sans Mono", monospace; color: #e01e5a; background: #f5f5f5;
       border: 1px solid #ddd; border-radius: 3px; padding: 1px 3px; overflow-wrap: anywhere; }
.mention { background: #e8f5fa; color: #1264a3; border-radius: 3px; padding: 0 2px; }
.date, a { color: #1264a3; }
hr { border: 0; border-top: 1px solid #ddd; }
.caption { color: #8a8a8a; font-size: 11px; margin: 6px 0 0 2px; }
"""


def page(blocks: list[dict[str, Any]], now: datetime, app: str = "sebridge") -> str:
    """A page showing one message of `blocks` posted by `app` at `now`, captioned CAPTION;
    the element `#shot` holds the message and its caption. Raises UnknownBlock."""
    drawn = "\n".join(_block(b, now) for b in blocks)
    initials = html.escape(app[:2].upper())
    return (
        f'<!doctype html><html><head><meta charset="utf-8"><style>{STYLE}</style></head>'
        f'<body><div id="shot"><div id="message"><div class="avatar">{initials}</div>'
        f'<div class="blocks"><div class="who"><b>{html.escape(app)}</b>'
        f'<span class="app">APP</span><span class="when">{now.astimezone(UTC):%H:%M}</span>'
        f"</div>\n{drawn}\n</div></div>"
        f'<div class="caption">{html.escape(CAPTION, quote=False)}</div></div></body></html>'
    )

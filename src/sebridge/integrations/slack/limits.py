"""Block Kit's length limits, applied to what the templates produced.

Slack refuses a whole message (`invalid_blocks`) when one text is over its
limit, and a refusal is permanent: an event with a very long description or
a thousand Resources would never reach the channel. The templates cut what
they know to be long; this cuts whatever is still over, each text to its
limit, ending in "…". Limits from Slack's Block Kit reference.
"""

from __future__ import annotations

from typing import Any

from sebridge.kernel.text import clip

__all__ = ["MAX_BLOCKS", "MAX_TEXT", "fit_blocks"]

MAX_BLOCKS = 50
MAX_TEXT = 3000  # the message's fallback text: notifications show its start anyway
SECTION_TEXT = 3000
FIELD_TEXT = 2000
MAX_FIELDS = 10
HEADER_TEXT = 150
CONTEXT_TEXT = 2000
BUTTON_TEXT = 75
BUTTON_VALUE = 2000
CONFIRM_TITLE = 100
CONFIRM_TEXT = 300
CONFIRM_BUTTON = 30


def fit_blocks(blocks: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """`blocks` with every text within Block Kit's limits (the blocks are changed in place)."""
    for block in blocks[:MAX_BLOCKS]:
        kind = block.get("type")
        if kind == "header":
            _cut(block.get("text"), HEADER_TEXT)
        elif kind == "section":
            _cut(block.get("text"), SECTION_TEXT)
            fields = block.get("fields")
            if isinstance(fields, list):
                del fields[MAX_FIELDS:]
                for f in fields:
                    _cut(f, FIELD_TEXT)
        elif kind == "context":
            for element in block.get("elements") or []:
                _cut(element, CONTEXT_TEXT)
        elif kind == "actions":
            for element in block.get("elements") or []:
                _fit_button(element)
    return blocks[:MAX_BLOCKS]


def _fit_button(button: Any) -> None:
    if not isinstance(button, dict):
        return
    _cut(button.get("text"), BUTTON_TEXT)
    if isinstance(button.get("value"), str):
        button["value"] = clip(button["value"], BUTTON_VALUE)
    confirm = button.get("confirm")
    if isinstance(confirm, dict):
        _cut(confirm.get("title"), CONFIRM_TITLE)
        _cut(confirm.get("text"), CONFIRM_TEXT)
        _cut(confirm.get("confirm"), CONFIRM_BUTTON)
        _cut(confirm.get("deny"), CONFIRM_BUTTON)


def _cut(text_object: Any, limit: int) -> None:
    """Cut a text object's text ({"type": ..., "text": ...}) to `limit` characters."""
    if isinstance(text_object, dict) and isinstance(text_object.get("text"), str):
        text_object["text"] = clip(text_object["text"], limit)

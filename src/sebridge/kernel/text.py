"""One guard for text IMDS sends, wherever it is shown.

IMDS may send any JSON string: lone surrogates ("\\ud800" is valid JSON and
cannot be encoded to UTF-8), terminal escapes (ESC, BEL), NUL, newlines,
bidirectional overrides (U+202E turns "exe.txt" into "txt.exe" on screen)
and fields of any length. Each place shows it its own way:

- `visible()`: a terminal or a log line. Every character that would act
  instead of being seen (controls, line breaks, bidi and zero-width
  format characters, surrogates) becomes its escape (`\\x1b`, `\\n`,
  `\\u202e`): one line stays one line and shows what was sent.
- `displayable()`: a chat message, card or ticket. Lone surrogates become
  U+FFFD (they cannot be sent), line breaks and tabs stay, other controls
  and bidi/format characters become their escapes.
- `clip()`: a field cut to an API's limit, saying it was cut.
- `map_text()`: the same function over every string of a frozen dataclass
  (a Message, its Transition and event), so a sink gets a safe copy.
- `VisibleFormatter`: log lines in text format, their message `visible()`
  (an EventId holding a newline cannot forge a second log line).

See docs/ARCHITECTURE.md, "Hostile text".
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Callable
from enum import Enum
from typing import Any, TypeVar

__all__ = ["VisibleFormatter", "clip", "displayable", "map_text", "visible"]

_T = TypeVar("_T")

# Besides the C0 controls: DEL and the C1 controls; the line and paragraph separators;
# bidirectional marks, embeddings, overrides and isolates; zero-width and other
# invisible format characters; the byte order mark; lone surrogates.
_ACTING = (
    "\x7f-\x9f\u2028\u2029\u061c\u180e\u200b-\u200f\u202a-\u202e\u2060-\u2069\ufeff\ud800-\udfff"
)
_ALL = re.compile(f"[\x00-\x1f{_ACTING}]")
_ALL_BUT_LINES = re.compile(f"[\x00-\x08\x0b-\x1f{_ACTING}]")  # keeps \t and \n
_SURROGATE = re.compile("[\ud800-\udfff]")
_NAMED = {"\n": "\\n", "\r": "\\r", "\t": "\\t"}
ELLIPSIS = "…"


def _escape(match: re.Match[str]) -> str:
    char = match.group(0)
    if char in _NAMED:
        return _NAMED[char]
    code = ord(char)
    return f"\\x{code:02x}" if code < 0x100 else f"\\u{code:04x}"


def visible(text: str) -> str:
    """`text` for a terminal or log line: every acting character shown as its escape."""
    return _ALL.sub(_escape, text)


def displayable(text: str) -> str:
    """`text` for a chat message, card or ticket: newlines and tabs kept, lone surrogates
    replaced (U+FFFD), other acting characters shown as their escapes."""
    return _ALL_BUT_LINES.sub(_escape, _SURROGATE.sub("\ufffd", text))


def clip(text: str, limit: int) -> str:
    """`text` cut to at most `limit` characters, ending in "…" when it was cut."""
    if len(text) <= limit:
        return text
    return text[: max(0, limit - 1)] + ELLIPSIS if limit > 0 else ""


def map_text(value: _T, fn: Callable[[str], str]) -> _T:
    """`value` with `fn` applied to each string in it: in frozen dataclasses (rebuilt),
    tuples, lists and dict values. Anything else is kept as it is."""
    return _map(value, fn)  # type: ignore[no-any-return]


def _map(value: Any, fn: Callable[[str], str]) -> Any:
    if isinstance(value, str) and not isinstance(value, Enum):  # an Enum is ours: kept
        value = fn(value)
    elif dataclasses.is_dataclass(value) and not isinstance(value, type):
        changed = {
            f.name: _map(getattr(value, f.name), fn) for f in dataclasses.fields(value) if f.init
        }
        value = dataclasses.replace(value, **changed)
    elif type(value) in (tuple, list):  # not a NamedTuple: rebuilt only when plain
        value = type(value)(_map(v, fn) for v in value)
    elif isinstance(value, dict):
        value = {k: _map(v, fn) for k, v in value.items()}
    return value


class VisibleFormatter(logging.Formatter):
    """A text log formatter whose lines show their message `visible()`; a traceback
    (exc_info) keeps its own lines."""

    def formatMessage(self, record: logging.LogRecord) -> str:
        record.message = visible(record.message)
        return super().formatMessage(record)

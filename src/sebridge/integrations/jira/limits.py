"""Jira's length limits, applied to what the templates produced.

Jira refuses a whole issue or comment (400) when a field is over its limit,
and a refusal is permanent: an event with a very long description or a
thousand Resources would never reach the project. Jira counts as Java does,
in UTF-16 code units (an emoji counts two), so that is what is counted here.
"""

from __future__ import annotations

__all__ = ["SUMMARY_LIMIT", "TEXT_LIMIT", "fit"]

SUMMARY_LIMIT = 255
TEXT_LIMIT = 32_767  # a description or a comment (jira.text.field.character.limit)
_ELLIPSIS = "…"  # one code unit


def fit(text: str, limit: int) -> str:
    """`text` within `limit` UTF-16 code units, ending in "…" when it was cut."""
    units = text.encode("utf-16-le", errors="surrogatepass")
    if len(units) <= 2 * limit:
        return text
    # A pair cut in half is dropped whole (decoding ignores its lone first half).
    kept = units[: 2 * (limit - 1)].decode("utf-16-le", errors="ignore")
    return kept + _ELLIPSIS

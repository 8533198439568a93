"""Keeping secrets out of messages and logs: one scrubber and the URL helpers it needs.

Error texts quote what servers and libraries said, and those may echo a token,
a password or a webhook URL (whose signature grants posting). Every such text
goes through `scrub` with the secrets the caller knows; `url_secrets` names the
pieces of a webhook URL that a server may echo, and `redact_url` shows a URL
without its password and query.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

__all__ = ["MASK", "redact_url", "scrub", "url_secrets"]

MASK = "***"
# Shorter pieces of a URL ("/", "sv=1.0") are no secret, and masking them would mangle text.
_MIN_URL_SECRET = 9


def scrub(text: str, secrets: Iterable[str], *, mask: str = MASK) -> str:
    """`text` with every non-empty secret replaced by `mask`, nested or overlapping ones whole."""
    spans: list[tuple[int, int]] = []
    for secret in {s for s in secrets if s}:
        start = text.find(secret)
        while start != -1:
            spans.append((start, start + len(secret)))
            start = text.find(secret, start + 1)
    if not spans:
        return text
    # Every occurrence is marked before any is replaced, so a secret that contains
    # another (or overlaps it) goes whole, and no replacement is matched again.
    out: list[str] = []
    shown = 0  # the end of the text already copied or masked
    for begin, stop in sorted(spans):
        if begin > shown:
            out += [text[shown:begin], mask]
        elif not out:
            out.append(mask)
        shown = max(shown, stop)
    out.append(text[shown:])
    return "".join(out)


def url_secrets(url: str) -> list[str]:
    """The pieces of a webhook URL a server may echo: URL, path+query, path, query, values."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return [url] if len(url) >= _MIN_URL_SECRET else []
    query = "?" + parts.query if parts.query else ""
    decoded = [value for _, value in parse_qsl(parts.query)]
    written = [pair.partition("=")[2] for pair in parts.query.split("&")]
    encoded = [quote(value, safe="") for value in decoded]
    pieces = (url, parts.path + query, parts.path, parts.query, *written, *decoded, *encoded)
    return [p for p in dict.fromkeys(pieces) if len(p) >= _MIN_URL_SECRET]


def redact_url(value: str) -> str:
    """The URL with any password and query string replaced by "***"."""
    try:
        parts = urlsplit(value)
        netloc = parts.netloc
        if parts.password is not None:
            netloc = f"{parts.username}:{MASK}@{netloc.rpartition('@')[2]}"
    except ValueError:
        return MASK
    if netloc == parts.netloc and not parts.query:
        return value
    return urlunsplit(parts._replace(netloc=netloc, query=MASK if parts.query else ""))

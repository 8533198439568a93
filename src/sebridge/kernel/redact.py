"""Keeping secrets out of messages and logs: one scrubber and the URL helpers it needs.

Error texts quote what servers and libraries said, and those may echo a token,
a password or a webhook URL (whose signature grants posting). Every such text
goes through `scrub` with the secrets the caller knows; `url_secrets` names the
pieces of a webhook URL that a server may echo, and `redact_url` shows a URL
without its password and query. A `Masker` holds a fixed set of secrets (every
one the config holds: config/masked.py) for text that is not ours, a hook's
output, including the tail of a longer output.
"""

from __future__ import annotations

from collections.abc import Iterable
from urllib.parse import parse_qsl, quote, urlsplit, urlunsplit

__all__ = ["MASK", "Masker", "redact_url", "scrub", "url_secrets"]

MASK = "***"
# Shorter pieces of a URL ("/", "sv=1.0") are no secret, and masking them would mangle text.
_MIN_URL_SECRET = 9


def scrub(text: str, secrets: Iterable[str], *, mask: str = MASK, start: int = 0) -> str:
    """`text` with every non-empty secret replaced by `mask`, nested or overlapping ones whole.
    With `start`: only the text from there on, a secret that crosses it masked whole."""
    spans: list[tuple[int, int]] = []
    for secret in {s for s in secrets if s}:
        at = text.find(secret)
        while at != -1:
            spans.append((at, at + len(secret)))
            at = text.find(secret, at + 1)
    if not spans:
        return text[start:]
    # Every occurrence is marked before any is replaced, so a secret that contains
    # another (or overlaps it) goes whole, and no replacement is matched again.
    out: list[str] = []
    shown = start  # the end of the text already copied or masked
    for begin, stop in sorted(spans):
        if stop <= shown and not out:
            continue  # wholly before `start`
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


class Masker:
    """Masks a fixed set of secrets in text we did not write (a hook's output).

    `tail` masks the last part of a longer text: a secret the cut went through would
    leave its end behind, so `margin` (the longest secret's length) more is kept
    before the cut and masked with the rest.
    """

    def __init__(self, secrets: Iterable[str] = ()) -> None:
        self._secrets = tuple(dict.fromkeys(s for s in secrets if s))
        self.margin = max((len(s.encode("utf-8")) for s in self._secrets), default=0)

    def __bool__(self) -> bool:
        return bool(self._secrets)

    def __repr__(self) -> str:  # never the secrets themselves
        return f"Masker({len(self._secrets)} secrets)"

    def mask(self, text: str) -> str:
        """`text` with every secret replaced by "***"."""
        return scrub(text, self._secrets) if self._secrets else text

    def tail(self, text: str, *, cut: bool) -> str:
        """`text` masked; with `cut` (its beginning was dropped), without its first
        `margin` characters: any end of a secret the cut went through is among them,
        while a secret that begins there and crosses into the rest is masked whole."""
        if not cut:
            return self.mask(text)
        return scrub(text, self._secrets, start=min(self.margin, len(text)))

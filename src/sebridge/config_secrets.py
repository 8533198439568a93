"""Secrets and `${VAR}` interpolation for config.py.

`Secret` wraps a token so it cannot leak through `str()`, `repr()`, an
f-string or a dataclass repr; only `.reveal()` gives the value. `Expander`
replaces `${NAME}` with the environment variable (unset: "", an error for
secrets: see config_reader) and `$$` with a
literal `$`, and remembers which variables came up empty for which key, so a
later "required" error can say why the value is empty. A `$` followed by
anything else stays as it is.
"""

from __future__ import annotations

import hmac
import re
from collections.abc import Mapping

__all__ = ["Expander", "Secret", "read_secret_file"]

# "$$", "${...}" or a "${" that is never closed.
_TOKEN = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Secret:
    """A configured secret. Prints as "***" (set) or "" (not set); `bool()` says which.

    Equality compares the values in constant time; `reveal()` returns the value.
    """

    __slots__ = ("_value",)

    def __init__(self, value: str = "") -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself: pass it to the one call that needs it, never to a log."""
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value)

    def __str__(self) -> str:
        return "***" if self._value else ""

    def __repr__(self) -> str:
        return f"Secret('{self}')"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        return hmac.compare_digest(self._value.encode(), other._value.encode())

    def __hash__(self) -> int:
        return hash(self._value)


class Expander:
    """Interpolates `${NAME}` from one environment snapshot, recording empty results per key."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self._empty: dict[str, list[str]] = {}

    def expand(self, text: str, key: str, *, secret: bool = False) -> str:
        """Return `text` interpolated. Raises ValueError (without the value if `secret`)."""

        def substitute(match: re.Match[str]) -> str:
            if match.group(0) == "$$":
                return "$"
            name = match.group(1)
            if name is None or not _NAME.fullmatch(name):
                shown = "" if secret or name is None else f' "${{{name}}}"'
                raise ValueError(
                    f"bad variable reference{shown}: write ${{NAME}} (letters, digits, _)"
                    " or $$ for a literal $"
                )
            value = self._environ.get(name)
            if not value:
                state = "not set" if value is None else "empty"
                self._empty.setdefault(key, []).append(f"environment variable {name} is {state}")
            return value or ""

        return _TOKEN.sub(substitute, text)

    def empty_variables(self, key: str) -> str:
        """ "environment variable X is not set" for each variable that emptied `key`, or ""."""
        return ", ".join(dict.fromkeys(self._empty.get(key, [])))

    def why_empty(self, key: str) -> str:
        """ " (environment variable X is not set)" when interpolation emptied `key`, else ""."""
        reasons = self._empty.get(key, []) + self._empty.get(f"{key}_file", [])
        return f" ({', '.join(dict.fromkeys(reasons))})" if reasons else ""


def read_secret_file(path: str) -> str:
    """Read a `*_file` secret, without its trailing newline.

    Raises ValueError naming the path (never the content) when the file cannot be
    read, is not UTF-8 text, or is empty.
    """
    try:
        with open(path, encoding="utf-8") as fh:
            text = fh.read()
    except OSError as exc:
        raise ValueError(f'cannot read "{path}": {exc.strerror or type(exc).__name__}') from None
    except UnicodeDecodeError:
        raise ValueError(f'"{path}" is not UTF-8 text') from None
    text = text.rstrip("\r\n")
    if not text:
        raise ValueError(f'"{path}" is empty')
    return text

"""Secrets and `${VAR}` interpolation for config/loader.py.

`Secret` wraps a token so it cannot leak through `str()`, `repr()`, an
f-string or a dataclass repr; only `.reveal()` gives the value. A command
that sends nothing (`events`, `history`, `approve`) loads the config without
reading secrets: each configured one is then `Secret.unread(key)`, true (its
integration is on) but with no value, and revealing it is an error rather
than an empty token (docs/ARCHITECTURE.md, "Config"). `Expander`
replaces `${NAME}` with the environment variable (unset: "", an error for
secrets: see config/reader.py) and `$$` with a
literal `$`, and remembers which variables came up empty for which key, so a
later "required" error can say why the value is empty, and the values of the
variables read into secrets, which a hook's output then masks (config/masked.py).
A `$` followed by anything else stays as it is.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping

from sebridge.kernel.errors import ConfigError

__all__ = ["Expander", "Secret", "read_secret_file"]

# "$$", "${...}" or a "${" that is never closed.
_TOKEN = re.compile(r"\$\$|\$\{([^}]*)\}|\$\{")
_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")


class Secret:
    """A configured secret. Prints as "***" (set) or "" (not set); `bool()` says which.

    Equality compares the values in constant time; `reveal()` returns the value.
    """

    __slots__ = ("_unread", "_value")

    def __init__(self, value: str = "") -> None:
        self._value = value
        self._unread = ""  # the key of a configured secret that was not read

    @classmethod
    def unread(cls, key: str) -> Secret:
        """A secret the config sets (`key` or `key_file`) but this command did not read."""
        secret = cls()
        secret._unread = key
        return secret

    @property
    def is_unread(self) -> bool:
        """Configured, but not read: there is no value to check or use."""
        return bool(self._unread)

    def reveal(self) -> str:
        """The secret itself: pass it to the one call that needs it, never to a log."""
        if self._unread:
            # A command that loaded the config without secrets reached for one: a bug,
            # said plainly instead of sending an empty token.
            raise ConfigError(f"{self._unread} was not read: this command loads no secrets")
        return self._value

    def __bool__(self) -> bool:
        return bool(self._value or self._unread)

    def __str__(self) -> str:
        return "***" if self else ""

    def __repr__(self) -> str:
        return f"Secret('{self}')"

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Secret):
            return NotImplemented
        import hmac  # here: it loads OpenSSL's hashes, which `run` does not need at start

        same = hmac.compare_digest(self._value.encode(), other._value.encode())
        return same and self._unread == other._unread

    def __hash__(self) -> int:
        return hash((self._value, self._unread))


class Expander:
    """Interpolates `${NAME}` from one environment snapshot, recording empty results per key."""

    def __init__(self, environ: Mapping[str, str]) -> None:
        self._environ = environ
        self._empty: dict[str, list[str]] = {}
        # Each variable's value read into a secret ("Bearer ${TOKEN}": TOKEN's alone too).
        self.secret_parts: list[str] = []
        # What a key asked of why_empty() means: the Reader's scope (an instance's checks).
        self.rename: Callable[[str], str] = lambda key: key

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
            if secret and value:
                self.secret_parts.append(value)
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
        key = self.rename(key)
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

"""Regular expressions a user writes and IMDS's text is matched against: linear time.

A rule's `description` pattern is searched in whatever Description IMDS sends,
text we do not control. Python's `re` backtracks: `^(a+)+$` against 31 characters
stopped the daemon for half a minute, each further character doubling it. RE2
(google-re2) matches in time linear in the text for every pattern it accepts, and
refuses what it cannot do that way (backreferences, lookaround): such a pattern is
a configuration error, said when the config is read. See docs/ARCHITECTURE.md, "Policy".
"""

from __future__ import annotations

from typing import Any, Protocol

__all__ = ["PatternError", "UserPattern", "user_pattern"]


class PatternError(ValueError):
    """A pattern RE2 does not accept; the message says why, for people."""


class UserPattern(Protocol):
    """A compiled pattern: `search` finds it anywhere in a text."""

    @property
    def pattern(self) -> str: ...

    def search(self, text: str) -> Any: ...


def user_pattern(text: str) -> UserPattern:
    """`text` compiled case-insensitively by RE2 (PatternError when RE2 refuses it)."""
    import re2  # only where a rule has a pattern: a daemon without one never loads it

    options = re2.Options()
    options.case_sensitive = False
    options.log_errors = False  # RE2 would write its own line to stderr; the caller says it
    try:
        return re2.compile(text, options)  # type: ignore[no-any-return]
    except re2.error as exc:
        why = exc.args[0] if exc.args else "not a pattern"
        why = why.decode("utf-8", "replace") if isinstance(why, bytes) else str(why)
        raise PatternError(
            f"{why} (patterns are matched by RE2, in linear time: no backreferences or lookaround)"
        ) from None

"""What "now" means: aware UTC, and the type a component takes to be told the time.

Components take a `Clock` so tests can pass their own; `utcnow` is the one default,
instead of a `lambda: datetime.now(UTC)` in every constructor.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import TypeAlias

__all__ = ["Clock", "utcnow"]

Clock: TypeAlias = Callable[[], datetime]


def utcnow() -> datetime:
    """The current time as an aware datetime in UTC."""
    return datetime.now(UTC)

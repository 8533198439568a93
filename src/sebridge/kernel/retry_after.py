"""Reading Retry-After (RFC 9110 section 10.2.3), once for every HTTP client.

A server that throttles says how long to wait, as delta-seconds ("120") or as
an HTTP date ("Fri, 31 Dec 1999 23:59:59 GMT"). Clients hand the header over
in different shapes: a plain mapping in any key case, or (slack_sdk) lists of
values. Each caller has its own idea of a default when the header is absent or
unreadable, and may cap what it is willing to wait; the answer is never negative.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import UTC
from typing import Any, overload

from sebridge.kernel.clock import Clock, utcnow

__all__ = ["parse_retry_after", "retry_after"]

HEADER = "retry-after"


@overload
def retry_after(
    headers: Mapping[str, Any] | None,
    *,
    default: float,
    cap: float | None = None,
    now: Clock = utcnow,
) -> float: ...


@overload
def retry_after(
    headers: Mapping[str, Any] | None,
    *,
    default: None,
    cap: float | None = None,
    now: Clock = utcnow,
) -> float | None: ...


def retry_after(
    headers: Mapping[str, Any] | None,
    *,
    default: float | None,
    cap: float | None = None,
    now: Clock = utcnow,
) -> float | None:
    """Seconds to wait from the Retry-After in `headers` (any key case); `default` if none."""
    for key, value in (headers or {}).items():
        if isinstance(key, str) and key.lower() == HEADER:
            return parse_retry_after(value, default=default, cap=cap, now=now)
    return default


@overload
def parse_retry_after(
    value: object, *, default: float, cap: float | None = None, now: Clock = utcnow
) -> float: ...


@overload
def parse_retry_after(
    value: object, *, default: None, cap: float | None = None, now: Clock = utcnow
) -> float | None: ...


def parse_retry_after(
    value: object, *, default: float | None, cap: float | None = None, now: Clock = utcnow
) -> float | None:
    """Seconds (>= 0, at most `cap`) from one Retry-After value; `default` if none or unreadable."""
    seconds = _seconds(_first(value), now)
    if seconds is None:
        return default
    seconds = max(0.0, seconds)
    return min(cap, seconds) if cap is not None else seconds


def _first(value: object) -> object:
    """The value itself, or the first of a list of values (slack_sdk's headers)."""
    if isinstance(value, list | tuple):
        return value[0] if value else None
    return value


def _seconds(value: object, now: Clock) -> float | None:
    """The wait as written, possibly negative (a date in the past); None if unreadable."""
    if isinstance(value, bytes):
        value = value.decode("latin-1")
    if isinstance(value, int | float) and not isinstance(value, bool):
        seconds = float(value)
    elif isinstance(value, str) and value.strip():
        text = value.strip()
        try:
            seconds = float(text)
        except ValueError:
            return _until(text, now)
    else:
        return None
    # "inf" and "nan" parse as floats but are no wait anyone meant.
    return seconds if math.isfinite(seconds) else None


def _until(text: str, now: Clock) -> float | None:
    """Seconds from now until an HTTP date; None if `text` is not one."""
    # Loaded here: email.utils brings socket-free but sizeable modules (calendar, email's
    # parsers) that `run` would load at start for a header most answers never carry.
    from email.utils import parsedate_to_datetime

    try:
        moment = parsedate_to_datetime(text)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    if moment.tzinfo is None:  # "-0000": HTTP dates are in UTC anyway
        moment = moment.replace(tzinfo=UTC)
    return (moment - now()).total_seconds()

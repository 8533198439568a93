"""Durations in the config: a key that takes seconds also takes "90s", "10m", "2h", "1d".

A key opts in by its type: `Seconds` (a float) or `WholeSeconds` (an int), alone,
`| None`, or as the item of a tuple (`tuple[WholeSeconds, ...]`). To everything
but config/reader.py they are plain float and int (typing.Annotated), so code
using the settings, mypy and `typing.get_type_hints` see no difference.
"""

from __future__ import annotations

import json
import re
import typing
from typing import Annotated, Any

__all__ = ["EXAMPLE", "Seconds", "WholeSeconds", "is_seconds", "parse_duration"]


class _SecondsMarker:
    """The Annotated metadata that makes a number of seconds also take a duration string."""

    def __repr__(self) -> str:
        return "SECONDS"


SECONDS = _SecondsMarker()
Seconds = Annotated[float, SECONDS]
WholeSeconds = Annotated[int, SECONDS]

EXAMPLE = 'seconds (600) or a number and a unit s, m, h or d ("90s", "10m", "2h", "1d")'
_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400}
# One number and one unit: "1h30m" is written "90m". Units are lowercase: "M" reads as months.
_DURATION = re.compile(r"(\d+(?:\.\d+)?|\.\d+) ?([smhd])")


def is_seconds(kind: Any) -> bool:
    """Whether a field's type (as `get_type_hints(..., include_extras=True)` gives it) is
    `Seconds` or `WholeSeconds`."""
    return typing.get_origin(kind) is Annotated and SECONDS in kind.__metadata__


def parse_duration(text: str) -> float:
    """ "10m" as 600.0; ValueError (completing "<key>: ...") for anything else."""
    match = _DURATION.fullmatch(text.strip())
    if match is None:
        shown = text if len(text) <= 30 else text[:27] + "..."
        raise ValueError(
            f"{json.dumps(shown, ensure_ascii=False)} is not a duration: give {EXAMPLE}"
        )
    return float(match[1]) * _UNITS[match[2]]

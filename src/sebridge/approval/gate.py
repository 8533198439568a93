"""The gate before StartRequests: may the carrier POST an event's approval now?

The carrier asks it for every approval it claims; the readiness hooks answer
(hooks/gate.py). Without hooks every answer is GO.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime

from sebridge.model.records import EventRecord

__all__ = ["GO", "Gate", "GateAnswer"]


@dataclass(frozen=True)
class GateAnswer:
    """Go (nothing set), go with a word (`note`), wait (`wait`: what for), or hold (`hold`: why)."""

    wait: str = ""  # not yet: the listed VMs are still preparing
    hold: str = ""  # never: a prepare hook failed and the rule says hold
    note: str = ""  # go, and say this (a prepare hook failed; the rule says approve anyway)
    # With wait or hold: the VMs not ready and why (what an approval anyway names).
    unready: str = ""
    # With wait: news for every sink (a VM whose agent stopped answering), said once, and
    # when the answer changes without any hook ending (the carrier looks again then).
    news: str = ""
    recheck: datetime | None = None


GO = GateAnswer()
Gate = Callable[[EventRecord], GateAnswer]

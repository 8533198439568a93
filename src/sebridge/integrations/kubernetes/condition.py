"""The node condition `ScheduledMaintenance`: which scheduled events are open on a node.

The condition is its own record: its message lists each open event as
`<type> <id> <state> NotBefore=<time>`, "; " between them, so an agent (any
agent of a fleet, after a restart too) reads what is open from the node, adds,
updates or removes one event, and writes it back. Status True while one is
open, False when none is. Ids and types are reduced to characters that cannot
break that format (IMDS's ids are GUIDs; a hostile one is changed, not obeyed).
Pure: the sink reads and writes it (sink.py).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime

from sebridge.model import TransitionKind
from sebridge.model.approval import CARRIED_OUT, ApprovalState
from sebridge.model.message import Message

__all__ = ["NONE_OPEN", "TYPE", "Entry", "condition", "entries_of", "entry_of", "safe_id"]

TYPE = "ScheduledMaintenance"
NONE_OPEN = "NoMaintenanceScheduled"  # the reason while no event is open
_ENDS = (TransitionKind.COMPLETED, TransitionKind.CANCELLED)
_ENTRY = re.compile(r"(\w+) (\S+) (\w+) NotBefore=(\S+)")
_MAX_ENTRIES = 20  # a node has one or two events at a time; the message stays short


@dataclass(frozen=True)
class Entry:
    """One open event as the condition lists it."""

    event_type: str
    event_id: str
    state: str
    not_before: str  # ISO 8601 UTC, or "unknown"

    def text(self) -> str:
        return f"{self.event_type} {self.event_id} {self.state} NotBefore={self.not_before}"


def safe_id(text: str, limit: int = 80) -> str:
    """`text` with only letters, digits and `._:-` (others become "_"), at most `limit`."""
    return re.sub(r"[^A-Za-z0-9._:-]", "_", text)[:limit] or "_"


def entry_of(message: Message) -> Entry | None:
    """The entry this message's event has on its nodes; None once it ended."""
    t = message.transition
    if t.kind in _ENDS:
        return None
    e = t.event
    if e.started:
        state = "Started"
    elif message.approval in CARRIED_OUT:
        state = "Approved"
    elif message.approval == ApprovalState.HELD:
        state = "Held"
    elif message.approval == ApprovalState.WAITING:
        state = "Preparing"
    else:
        state = "Scheduled"
    not_before = _utc(e.not_before) if e.not_before else "unknown"
    return Entry(
        re.sub(r"\W", "", e.event_type)[:40] or "Unknown", safe_id(e.event_id), state, not_before
    )


def entries_of(message: str) -> dict[str, Entry]:
    """The entries a condition's message lists, by event id (what does not parse is dropped)."""
    found: dict[str, Entry] = {}
    for part in message.split("; "):
        m = _ENTRY.fullmatch(part)
        if m:
            found[m.group(2)] = Entry(*m.groups())
    return found


def condition(entries: dict[str, Entry]) -> tuple[str, str, str]:
    """(status, reason, message) of the condition for these open events."""
    if not entries:
        return "False", NONE_OPEN, "no scheduled event is open for this node"
    ordered = sorted(entries.values(), key=lambda x: (x.not_before == "unknown", x.not_before))
    shown = ordered[:_MAX_ENTRIES]
    first = shown[0]
    return "True", f"{first.event_type}{first.state}", "; ".join(x.text() for x in shown)


def _utc(at: datetime) -> str:
    return at.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

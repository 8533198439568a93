"""The fleet page's filters, as query parameters: `type`, `vm` (a shell pattern) and `state`.

See docs/fleet-page.md, "What it shows".
"""

from __future__ import annotations

from fnmatch import fnmatchcase

from sebridge.web.fleet_rows import FleetEvent

__all__ = ["LIFECYCLE", "STATES", "bad_state", "matches"]

# An event's lifecycle states (events.state), and the `state` filters beyond them.
LIFECYCLE = ("scheduled", "changed", "unplanned", "started", "completed", "cancelled")
STATES = ("open", "ended", "held")


def matches(row: FleetEvent, *, kind: str, vm: str, state: str) -> bool:
    """`type` (any case), `vm` (a shell pattern, any case, matched against every listed
    VM), `state` (a lifecycle state, or open, ended, held); an empty one matches any."""
    r = row.record
    if kind and r.event.event_type.lower() != kind.lower():
        return False
    if vm and not any(fnmatchcase(v.vm.lower(), vm.lower()) for v in row.vms):
        return False
    state = state.lower()
    if state == "open":
        return r.present
    if state == "ended":
        return not r.present
    if state == "held":
        return row.held
    return not state or r.state == state


def bad_state(state: str) -> str:
    """What the page says of a `state` it cannot take ("" when it takes it)."""
    if not state or state.lower() in (*STATES, *LIFECYCLE):
        return ""
    return f'state "{state}" is none of: {", ".join((*STATES, *LIFECYCLE))}'

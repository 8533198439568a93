"""The default policy: what happens to an event when it is first seen.

Mirrors Microsoft's sample: approve what the VM's owner initiated, approve
Freeze under 9 s (no impact), let a human decide the rest. Ordered rules and
drain hooks replace these settings later; the decisions stay the same words.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sebridge.model import EventType, ScheduledEvent

__all__ = ["APPROVE", "IGNORE", "NOTIFY", "PolicySettings", "decide", "sinks_for"]

APPROVE, NOTIFY, IGNORE = "approve", "notify", "ignore"


@dataclass(frozen=True)
class PolicySettings:
    """The [policy] settings the decision reads."""

    approve_user_events: bool = True
    approve_freeze_under_seconds: int = 9
    only_this_vm: bool = False


def decide(event: ScheduledEvent, settings: PolicySettings, vm_name: str) -> str:
    """approve, notify or ignore. A started event is only ever notified: nothing to approve."""
    if settings.only_this_vm and not event.affects(vm_name):
        return IGNORE
    if event.started:
        return NOTIFY
    if settings.approve_user_events and event.user_initiated:
        return APPROVE
    duration = event.duration_seconds
    if (
        event.event_type == EventType.FREEZE
        and duration is not None
        and 0 <= duration < settings.approve_freeze_under_seconds
    ):
        return APPROVE
    return NOTIFY


def sinks_for(decision: str, sinks: Sequence[str]) -> tuple[str, ...]:
    """Which sinks hear an event's transitions: none for an ignored event, else all of them."""
    return () if decision == IGNORE else tuple(sinks)

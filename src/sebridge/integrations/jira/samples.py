"""Sample messages covering every transition and field variant, to try templates at start-up."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

from sebridge.model import ScheduledEvent, Transition, TransitionKind
from sebridge.sink import Message

__all__ = ["sample_messages"]


def sample_messages(vm: str = "vm1") -> list[Message]:
    """One message per transition kind (and an unknown one), plus sparse and odd events."""
    now = datetime.now(UTC)
    full = ScheduledEvent(
        "C7061BAC-AFDC-4513-B24B-AA5F13A16123", "Reboot", "Scheduled", (vm, "vm2"),
        not_before=now + timedelta(minutes=15), not_before_text="Mon, 11 Apr 2022 22:26:58 GMT",
        description='Host update {code} [link|x] & "quotes"\nnew line', source="Platform",
        duration_seconds=-1,
    )  # fmt: skip
    bare = ScheduledEvent("1", "Hibernate", "Scheduled", not_before_text="soon")  # api 2017-03-01
    started = ScheduledEvent("2", "Freeze", "Started", (vm,), duration_seconds=5)

    def msg(kind: str, event: ScheduledEvent = full, **more: Any) -> Message:
        changes = ("not_before", "resources", "description", "duration_seconds", "new_field")
        t = Transition(kind, event, now, changes, "alice", "jira", note="IMDS refused it")
        return Message(t, vm, more.pop("policy", "notify"), **more)

    return [msg(kind) for kind in [*TransitionKind, "mystery"]] + [
        msg("scheduled", bare, policy="approve"), msg("changed", policy="ignore"),
        msg("scheduled", approve_url="https://vm1.example.net/approve/t0k3n"),
        msg("approved", approved_by="policy", dry_run=True),
        msg("started", approved_by="alice"), msg("cancelled", bare), msg("unplanned", started),
    ]  # fmt: skip

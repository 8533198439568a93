"""Sample messages that cover every transition kind and field variant.

A sink renders each of them at start-up (`check_templates()`), so a broken
template, built-in or a user's override, stops `run` and `check` with its
name instead of failing the first real delivery.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from sebridge.kernel.clock import utcnow
from sebridge.model import HookRun, ScheduledEvent, Transition, TransitionKind
from sebridge.model.leads import REMIND, Lead
from sebridge.model.message import Message
from sebridge.model.readiness import VmReadiness, VmState

__all__ = ["sample_messages"]

CHANGES = ("not_before", "resources", "description", "duration_seconds", "new_field")
APPROVE_URL = "https://vm1.example.net/approve/c2FtcGxl.c2lnbmF0dXJl"


def sample_messages(
    vm: str = "vm1", *, description: str = 'Host update & "quotes"\nnew line', actor: str = "alice"
) -> list[Message]:
    """One message per transition kind (and an unknown one), plus sparse and odd events.

    Args:
        description: the IMDS text to try the sink's escaping on.
        actor: who approves (a Slack user id shows as a mention there).
    """
    now = utcnow()
    full = ScheduledEvent(
        "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
        "Redeploy",
        "Scheduled",
        (vm, "vm2", "vm3"),
        not_before=now + timedelta(minutes=14, seconds=5),
        not_before_text="Mon, 11 Apr 2022 22:26:58 GMT",
        description=description,
        source="Platform",
        duration_seconds=-1,
    )
    bare = ScheduledEvent("1", "Hibernate", "Scheduled", not_before_text="soon")  # api 2017-03-01
    started = ScheduledEvent("2", "Freeze", "Started", (vm,), duration_seconds=5)
    no_time = ScheduledEvent("3", "Reboot", "Scheduled", (vm,), not_before_text="20170702")

    def msg(kind: str, event: ScheduledEvent = full, who: str = actor, **more: Any) -> Message:
        note = "IMDS refused the approval by alice: 400 Bad Request"
        t = Transition(kind, event, now, CHANGES, who, "cli", note=note)
        return Message(t, vm, more.pop("policy", "ask"), **more)

    return [msg(kind) for kind in [*TransitionKind, "mystery"]] + [
        msg("scheduled", approve_url=APPROVE_URL),
        msg("changed", approve_url=APPROVE_URL),
        msg("scheduled", bare, policy="approve"),
        msg("changed", policy="ignore"),
        msg("scheduled", policy="inform"),
        msg("scheduled", no_time),
        msg("would_approve", who="policy", dry_run=True),
        msg("approved", who="policy", approved_by="policy"),
        msg("started", approved_by="alice"),
        msg("cancelled", bare),
        msg("unplanned", started),
        *_readiness_samples(full, vm, now),
    ]


def _readiness_samples(event: ScheduledEvent, vm: str, now: datetime) -> list[Message]:
    """Hook runs, a hold and a reminder, with every VM readiness state shown."""
    ready = (
        VmReadiness(vm, VmState.READY),
        VmReadiness("vm2", VmState.FAILED, "drain", "exit 1", "lb said 503"),
        VmReadiness("vm3", VmState.PREPARING, "drain"),
        VmReadiness("vm4", VmState.WAITING, "drain"),
        VmReadiness("vm5", VmState.NO_AGENT),
        VmReadiness("vm6", VmState.DRY_RUN, "drain"),
        VmReadiness("vm7", VmState.SILENT, "drain", until=now + timedelta(minutes=5)),
        VmReadiness("vm8", VmState.NO_AGENT, "drain", until=now - timedelta(minutes=1)),
    )
    failed = HookRun(
        "drain", "prepare", "vm2", exit_code=1, seconds=3.2, output="lb said 503\n", why="exit 1"
    )
    said = [
        Transition(
            TransitionKind.HOOK_STARTED, event, now, hook=HookRun("drain", "prepare", vm, 2)
        ),
        Transition(
            TransitionKind.HOOK_SUCCEEDED,
            event,
            now,
            hook=HookRun("drain", "prepare", vm, exit_code=0, seconds=12.4),
        ),
        Transition(TransitionKind.HOOK_FAILED, event, now, hook=failed),
        Transition(
            TransitionKind.HOOK_SUCCEEDED,
            event,
            now,
            hook=HookRun("undrain", "recover", vm, exit_code=0, seconds=0.3),
        ),
        Transition(
            TransitionKind.HELD,
            event,
            now,
            actor="alice",
            via="slack",
            note="Approval by alice held: drain failed (exit 1) on vm2: lb said 503. "
            "Nothing was sent to Azure.",
        ),
        Transition(TransitionKind.READY, event, now, note="not ready: vm2: failed: drain exit 1"),
        Transition(TransitionKind.REMINDER, event, now, remind_before=600),
        Transition(TransitionKind.REMINDER, event, now, remind_after=600, while_held=True),
    ]
    return [
        Message(t, vm, "ask", readiness=ready, prepare=("drain",), approve_url=APPROVE_URL)
        for t in said
    ] + [
        Message(
            # A first message naming a reminder its notice can never reach.
            Transition(TransitionKind.SCHEDULED, event, now, unreachable=(Lead(REMIND, 86400),)),
            vm,
            "ask",
            readiness=ready,
            prepare=("drain",),
            approve_url=APPROVE_URL,
        )
    ]

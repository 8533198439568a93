"""The approval use case put together once, for the daemon and for `sebridge approve`.

Both need the same parts wired the same way: the carrier (when this process
carries approvals out) woken by the use case, and both telling the dispatcher
when a transition was queued. Only what differs is handed in: whether this
process carries approvals out, its readiness gate and its wake-ups.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, nullcontext

from sebridge.approval.carrier import Carrier
from sebridge.approval.counts import NOT_COUNTED, ApprovalCounts
from sebridge.approval.gate import GO, Gate
from sebridge.approval.usecase import Approvals
from sebridge.imds import ImdsClient
from sebridge.kernel.clock import Clock, utcnow
from sebridge.model.decision import Decision
from sebridge.model.readiness import VmReadiness
from sebridge.model.records import EventRecord
from sebridge.store import Store

__all__ = ["assemble"]


def assemble(
    store: Store,
    imds: ImdsClient,
    sinks_for: Callable[[Decision], Sequence[str]],
    *,
    carries: bool,
    dry_run: bool,
    gate: Gate = lambda record: GO,
    clock: Clock = utcnow,
    on_recorded: Callable[[], None] = lambda: None,
    batch: Callable[[], AbstractContextManager[object]] = nullcontext,
    metrics: ApprovalCounts = NOT_COUNTED,
    readiness_of: Callable[[EventRecord], Sequence[VmReadiness]] = lambda record: (),
) -> tuple[Approvals, Carrier | None]:
    """The use case and, when `carries`, the carrier that POSTs for it (else None: another
    process carries approvals out, and a request waits for what the store then says).

    Args:
        on_recorded: a transition was queued (wakes the dispatcher).
        readiness_of: an event's listed VMs' readiness (the ways out of a hold name them).
        batch: what a carrier's round runs within (Carrier).
    """
    carrier = (
        Carrier(
            store,
            imds,
            sinks_for,
            dry_run=dry_run,
            clock=clock,
            on_recorded=on_recorded,
            gate=gate,
            batch=batch,
            metrics=metrics,
        )
        if carries
        else None
    )
    approvals = Approvals(
        store,
        carrier,
        sinks_for,
        clock=clock,
        on_recorded=on_recorded,
        metrics=metrics,
        readiness_of=readiness_of,
    )
    return approvals, carrier

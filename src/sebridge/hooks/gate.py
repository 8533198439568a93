"""The readiness gate the carrier asks before StartRequests (approval/gate.py's Gate).

Go when the event's decision names no prepare hooks, or when every listed VM
whose agent is alive succeeded them; wait while any still prepares; when one
failed, hold (the default) or go and say so, as the rule's
`on_prepare_failure` says. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sebridge.approval.gate import GO, GateAnswer
from sebridge.hooks.readiness import Readiness, readiness
from sebridge.hooks.words import last_lines
from sebridge.kernel.clock import Clock, utcnow
from sebridge.store import EventRecord, Store

__all__ = ["GatePlan", "ReadinessGate"]


class GatePlan(Protocol):
    """What the gate reads of an event's policy decision."""

    @property
    def prepare(self) -> tuple[str, ...]: ...

    @property
    def on_prepare_failure(self) -> str: ...


class ReadinessGate:
    """Answers the carrier from the store's hook runs and the fleet's live agents."""

    def __init__(
        self,
        store: Store,
        vm_name: Callable[[], str],
        plan_of: Callable[[EventRecord], GatePlan],
        *,
        dry_run: bool = False,
        clock: Clock = utcnow,
    ) -> None:
        self._dry_run = dry_run
        self._store = store
        self._vm_name = vm_name
        self._plan_of = plan_of
        self._clock = clock

    def readiness(self, record: EventRecord) -> Readiness:
        """Every listed VM's readiness for this event (messages show it too)."""
        plan = self._plan_of(record)
        if not plan.prepare:
            return Readiness()
        live = self._store.live_agents(self._clock()) | {self._vm_name()}
        runs = self._store.hook_runs(record.event.event_id)
        return readiness(record.event, plan.prepare, runs, live=live, dry_run=self._dry_run)

    def __call__(self, record: EventRecord) -> GateAnswer:
        ready = self.readiness(record)
        failed = ready.failed
        if failed is not None:
            why = f"{failed.hook} failed ({failed.why}) on {failed.vm}"
            tail = last_lines(failed.output, lines=1, limit=200)
            why += f": {tail}" if tail else ""
            if self._plan_of(record).on_prepare_failure == "approve":
                return GateAnswer(note=f"{why}; approved anyway (on_prepare_failure = approve)")
            return GateAnswer(hold=why, unready=ready.not_ready())
        if not ready.ready:
            wait = f"waiting for prepare hooks: {ready.waiting_for()}"
            return GateAnswer(wait=wait, unready=ready.not_ready())
        return GO

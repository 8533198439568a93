"""The readiness gate the carrier asks before StartRequests (approval/gate.py's Gate).

Go when the event's decision names no prepare hooks, or when every listed VM
whose agent is alive succeeded them; wait while any still prepares; when one
failed, hold (the default) or go and say so, as the rule's
`on_prepare_failure` says. A VM whose agent stopped answering during a prepare
hook is waited for until a stated time (hooks/readiness.py: SILENT_MARGIN),
said once to every sink; then the approval goes, saying it went without that
VM. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from sebridge.approval.gate import GO, GateAnswer
from sebridge.hooks.readiness import DEFAULT_TIMEOUT, SILENT_MARGIN, Readiness, readiness
from sebridge.hooks.words import last_lines
from sebridge.kernel.clock import Clock, utcnow
from sebridge.model.readiness import VmReadiness
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
        timeout_of: Callable[[str], float] = lambda hook: DEFAULT_TIMEOUT,
        dry_run: bool = False,
        clock: Clock = utcnow,
    ) -> None:
        self._timeout_of = timeout_of
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
        now = self._clock()
        live = self._store.live_agents(now) | {self._vm_name()}
        runs = self._store.hook_runs(record.event.event_id)
        return readiness(
            record.event,
            plan.prepare,
            runs,
            live=live,
            now=now,
            timeout_of=self._timeout_of,
            dry_run=self._dry_run,
        )

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
            news = "; ".join(self._silence(v) for v in ready.silent)
            return GateAnswer(
                wait=wait, unready=ready.not_ready(), news=news, recheck=ready.recheck
            )
        given_up = ready.given_up()
        return GateAnswer(note=f"carried out without {given_up}") if given_up else GO

    def _silence(self, silent: VmReadiness) -> str:
        """What every sink is told, once, of a VM whose agent stopped answering mid-hook."""
        vm, hook, until = silent.vm, silent.hook, silent.until
        timeout, margin = self._timeout_of(hook), SILENT_MARGIN.total_seconds()
        return (
            f"{vm}'s agent stopped answering during its prepare hook {hook}: waiting for {vm} "
            f"until {until:%H:%M:%S} UTC (the hook's timeout, {timeout:g} s, plus {margin:g} s), "
            "then the approval is carried out without it"
        )

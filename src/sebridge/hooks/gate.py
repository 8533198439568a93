"""The readiness gate the carrier asks before StartRequests (approval/gate.py's Gate).

Go when the event's decision names no prepare hooks, or when every listed VM
is ready; wait while any still prepares; hold, whatever the rule's
`on_prepare_failure` says, while a listed VM's known agent is silent (it
cannot drain: fail closed), or while a listed VM has no agent at all and the
rule says `require_agents`; when a prepare hook failed, hold (the default) or
go and say so, as `on_prepare_failure` says. A VM whose agent stopped
answering during a prepare hook is waited for until a stated time
(hooks/readiness.py: SILENT_MARGIN), said once to every sink; then it is
silent and holds. A VM no agent ever ran on is named in what the approval
says (the approved line, the wait, the hold). See docs/ARCHITECTURE.md,
"Readiness hooks".
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Protocol

from sebridge.approval.gate import GO, GateAnswer
from sebridge.hooks.readiness import (
    DEFAULT_TIMEOUT,
    SILENT_MARGIN,
    Agents,
    Readiness,
    agents,
    readiness,
)
from sebridge.kernel.clock import Clock, utcnow
from sebridge.model.readiness import VmReadiness, VmState
from sebridge.model.records import EventRecord
from sebridge.model.wording.hooks import last_lines
from sebridge.store import Store
from sebridge.store.store import HEARTBEAT

__all__ = ["KNOWN_FOR", "SILENT_AFTER", "GatePlan", "ReadinessGate"]

# [fleet]'s defaults (config/core.py: FleetConfig): an agent ran in this store within a week
# is known; one not heard from for two heartbeats is silent.
KNOWN_FOR = timedelta(days=7)
SILENT_AFTER = 2 * HEARTBEAT


class GatePlan(Protocol):
    """What the gate reads of an event's policy decision."""

    @property
    def prepare(self) -> tuple[str, ...]: ...

    @property
    def on_prepare_failure(self) -> str: ...

    @property
    def require_agents(self) -> bool: ...


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
        known_for: timedelta = KNOWN_FOR,
        silent_after: timedelta = SILENT_AFTER,
    ) -> None:
        self._known_for = known_for
        self._silent_after = silent_after
        self._timeout_of = timeout_of
        self._dry_run = dry_run
        self._store = store
        self._vm_name = vm_name
        self._plan_of = plan_of
        self._clock = clock

    def agents(self, now: datetime) -> Agents:
        """The fleet's agents as of `now`: live (this one always) and silent ([fleet])."""
        known = self._store.agents.known(now, self._known_for)
        return agents(known, self._vm_name(), now, self._silent_after)

    def readiness(self, record: EventRecord) -> Readiness:
        """Every listed VM's readiness for this event (messages show it too)."""
        return self._readiness(record, self._clock())[0]

    def _readiness(self, record: EventRecord, now: datetime) -> tuple[Readiness, Agents]:
        plan = self._plan_of(record)
        if not plan.prepare:
            return Readiness(), Agents()
        fleet = self.agents(now)
        runs = self._store.hook_runs.of_event(record.event.event_id)
        ready = readiness(
            record.event,
            plan.prepare,
            runs,
            live=fleet.live,
            now=now,
            timeout_of=self._timeout_of,
            dry_run=self._dry_run,
            silent=fleet.silent,
        )
        return ready, fleet

    def __call__(self, record: EventRecord) -> GateAnswer:
        ready, fleet = self._readiness(record, self._clock())
        plan = self._plan_of(record)
        failed = ready.failed
        why = ""
        if failed is not None:
            why = f"{failed.hook} failed ({failed.why}) on {failed.vm}"
            tail = last_lines(failed.output, lines=1, limit=200)
            why += f": {tail}" if tail else ""
        # Fail closed: a VM nobody can drain (its agent silent, or none there and the rule
        # requires one) holds, whatever on_prepare_failure says of a hook that failed.
        cannot = [v.line() for v in ready.silent_agents]
        if plan.require_agents:
            cannot += [f"{v.line()} (require_agents)" for v in ready.no_agent]
        no_agent = [] if plan.require_agents else [v.line() for v in ready.no_agent]
        if cannot:
            hold = "; ".join([why, *cannot] if why else cannot)
            return GateAnswer(hold=_named(hold, no_agent), unready=ready.not_ready())
        if failed is not None:
            if plan.on_prepare_failure == "approve":
                note = f"{why}; approved anyway (on_prepare_failure = approve)"
                return GateAnswer(note=_named(note, no_agent))
            return GateAnswer(hold=_named(why, no_agent), unready=ready.not_ready())
        if not ready.ready:
            wait = f"waiting for prepare hooks: {ready.waiting_for()}"
            news = "; ".join(self._silence(v) for v in ready.silent)
            return GateAnswer(
                wait=_named(wait, no_agent),
                unready=ready.not_ready(),
                news=news,
                recheck=_recheck(ready, fleet, self._silent_after),
            )
        return GateAnswer(note="; ".join(no_agent)) if no_agent else GO

    def _silence(self, silent: VmReadiness) -> str:
        """What every sink is told, once, of a VM whose agent stopped answering mid-hook."""
        vm, hook, until = silent.vm, silent.hook, silent.until
        timeout, margin = self._timeout_of(hook), SILENT_MARGIN.total_seconds()
        return (
            f"{vm}'s agent stopped answering during its prepare hook {hook}: waiting for {vm} "
            f"until {until:%H:%M:%S} UTC (the hook's timeout, {timeout:g} s, plus {margin:g} s), "
            "then the approval is held: sebridge cannot drain it"
        )


def _named(text: str, no_agent: list[str]) -> str:
    """What the approval says, with the listed VMs no agent runs on named after it."""
    return "; ".join([text, *no_agent])


def _recheck(ready: Readiness, fleet: Agents, silent_after: timedelta) -> datetime | None:
    """When the answer may change with no hook ending: a VM waited for stops being waited
    for (readiness.recheck), or a VM still to prepare whose agent stays quiet turns silent
    (its last beat plus [fleet] silent_after)."""
    busy = {v.vm for v in ready.vms if v.state in (VmState.WAITING, VmState.PREPARING)}
    quiet = [at + silent_after for vm, at in fleet.heard.items() if vm in busy]
    due = [t for t in (ready.recheck, *quiet) if t is not None]
    return min(due, default=None)

"""Whether an event's VMs are ready: the gate before StartRequests, and what messages show.

One StartRequests releases every VM the event lists in Resources, so one VM's
readiness is not enough: every listed VM must be ready, or sebridge must say
why it is not. A listed VM whose agent the fleet knows ([fleet] known_for) but
has not heard from within [fleet] silent_after, or which stopped, cannot drain:
"agent silent since 08:02 UTC", and it holds the approval (fail closed), except
while a prepare hook it began may still run: until the run's start plus the
hook's timeout plus SILENT_MARGIN ("stopped answering"). A listed VM no agent
ever ran on is "no agent": named, not waited for (unless a rule requires
agents: hooks/gate.py). Pure: the carrier and the dispatcher hand in the
store's rows and the time. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sebridge.model import ScheduledEvent
from sebridge.model.readiness import NOT_READY, VmReadiness, VmState
from sebridge.store.store import STALE

if TYPE_CHECKING:  # the store's rows
    from sebridge.model.records import HookRunRecord
    from sebridge.store.store import AgentSeen

__all__ = [
    "DEFAULT_TIMEOUT",
    "SILENT_MARGIN",
    "Agents",
    "Readiness",
    "agents",
    "listed_vms",
    "readiness",
]

# A VM whose agent stopped answering (no beat for STALE) while one of its prepare hooks ran
# is waited for until that run's start plus the hook's timeout plus this margin; then it
# counts as "agent silent" and holds the approval. The hook's processes may outlive their
# agent (a frozen process, a lost database connection), still draining: a live agent would
# have ended the hook at its timeout and recorded that. The margin is STALE, so an agent
# that died during its hook (before its timeout) has been taken for dead by then: the wait
# is exactly this bound.
SILENT_MARGIN = STALE
# A hook this agent's config does not define ([hooks.<name>] timeout's default): a fleet
# shares one config, so this is only a stand-in.
DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Agents:
    """The fleet's agents as the readiness sees them: `live` (heard from within [fleet]
    silent_after, not stopped; this agent always), and `silent` (known, not live), each
    with when it was last heard from."""

    live: frozenset[str] = frozenset()
    silent: Mapping[str, datetime] = field(default_factory=dict)
    # The live agents' last beats: one that stays quiet turns silent at its beat plus
    # silent_after (the gate looks again then).
    heard: Mapping[str, datetime] = field(default_factory=dict)


def agents(
    known: Mapping[str, AgentSeen], me: str, now: datetime, silent_after: timedelta
) -> Agents:
    """Tell the fleet's known agents (Store.agents.known) live from silent as of `now`."""
    live = {
        a.agent: a.seen_at
        for a in known.values()
        if not a.stopped and a.seen_at > now - silent_after  # silent at its beat + silent_after
    }
    silent = {a.agent: a.seen_at for a in known.values() if a.agent not in live and a.agent != me}
    return Agents(frozenset(live) | {me}, silent, {k: v for k, v in live.items() if k != me})


@dataclass(frozen=True)
class Readiness:
    """Every listed VM's readiness, in Resources' order."""

    vms: tuple[VmReadiness, ...] = ()

    @property
    def ready(self) -> bool:
        """Every VM that can prepare has: StartRequests may go (a VM no agent ever ran on is
        not waited for unless the rule requires agents: hooks/gate.py)."""
        return all(v.state in (VmState.READY, VmState.NO_AGENT, VmState.DRY_RUN) for v in self.vms)

    @property
    def failed(self) -> VmReadiness | None:
        """The first VM whose prepare hook failed, if any."""
        return next((v for v in self.vms if v.state == VmState.FAILED), None)

    @property
    def silent_agents(self) -> tuple[VmReadiness, ...]:
        """The VMs whose known agent is silent: they hold the approval (they cannot drain)."""
        return tuple(v for v in self.vms if v.state == VmState.AGENT_SILENT)

    @property
    def no_agent(self) -> tuple[VmReadiness, ...]:
        """The VMs no sebridge agent ever ran on (or none within [fleet] known_for)."""
        return tuple(v for v in self.vms if v.state == VmState.NO_AGENT)

    def not_ready(self) -> str:
        """The VMs not ready or not drained (failed, preparing, not started, agent silent,
        no agent), one line each, for people ("" when every VM is ready): what an approval
        anyway and started_unready name."""
        return "; ".join(
            no_agent_line(v.vm) if v.state == VmState.NO_AGENT else v.line()
            for v in self.vms
            if v.state in NOT_READY or v.state == VmState.NO_AGENT
        )

    def waiting_for(self) -> str:
        """What the approval waits for, for people ("" when ready)."""
        busy = (VmState.WAITING, VmState.PREPARING, VmState.SILENT)
        return "; ".join(v.line() for v in self.vms if v.state in busy)

    @property
    def recheck(self) -> datetime | None:
        """When a VM whose agent stopped answering stops being waited for (the earliest)."""
        return min((v.until for v in self.silent if v.until is not None), default=None)

    @property
    def silent(self) -> tuple[VmReadiness, ...]:
        """The VMs waited for although their agent stopped answering during a hook."""
        return tuple(v for v in self.vms if v.state == VmState.SILENT)


def no_agent_line(vm: str) -> str:
    """A VM no agent runs on, as started_unready and an approval anyway name it."""
    return f"{vm}: no agent, not drained"


def listed_vms(event: ScheduledEvent) -> tuple[str, ...]:
    """The VM names Resources lists (api-version 2017-03-01's "_" prefix taken off)."""
    names = (r[1:] if r.startswith("_") else r for r in event.resources)
    return tuple(dict.fromkeys(names))


def readiness(
    event: ScheduledEvent,
    prepare: Sequence[str],
    runs: Iterable[HookRunRecord],
    *,
    live: frozenset[str],
    now: datetime,
    timeout_of: Callable[[str], float] = lambda hook: DEFAULT_TIMEOUT,
    dry_run: bool = False,
    silent: Mapping[str, datetime] | None = None,
) -> Readiness:
    """Each listed VM's readiness for `prepare` (the decision's prepare hooks, in order), as
    of `now`; `timeout_of` gives a hook's timeout in seconds; `silent`: the known agents
    not heard from (not live), with when they were last (Agents.silent). No prepare hooks:
    nothing to wait for, nothing to show. Dry run: no hook runs, and the messages say so
    instead of "waiting" for ever."""
    if not prepare:
        return Readiness()
    silent = silent or {}
    if dry_run:
        return Readiness(
            tuple(
                VmReadiness(vm, VmState.DRY_RUN, prepare[0])
                if vm in live
                else _absent(vm, prepare[0], silent)
                for vm in listed_vms(event)
            )
        )
    by_vm: dict[tuple[str, str], HookRunRecord] = {
        (r.run.vm, r.run.hook): r for r in runs if r.run.stage == "prepare"
    }
    # A started event's retries never come: its failures are final.
    retrying = not event.started
    vms = (_vm(vm, prepare, by_vm, vm in live, retrying, silent=silent) for vm in listed_vms(event))
    return Readiness(tuple(_silent(v, by_vm, now, timeout_of, silent) for v in vms))


def _absent(vm: str, hook: str, silent: Mapping[str, datetime]) -> VmReadiness:
    """A VM without a live agent, its hook not begun: its known agent is silent (since its
    last beat), or no agent ever ran there."""
    if vm in silent:
        return VmReadiness(vm, VmState.AGENT_SILENT, hook, since=silent[vm])
    return VmReadiness(vm, VmState.NO_AGENT, hook)


def _silent(
    vm: VmReadiness,
    runs: dict[tuple[str, str], HookRunRecord],
    now: datetime,
    timeout_of: Callable[[str], float],
    silent: Mapping[str, datetime],
) -> VmReadiness:
    """A VM without a live agent whose prepare hook was running: waited for until the run's
    start plus the hook's timeout plus SILENT_MARGIN ("stopped answering"), then its agent
    is silent (since its last beat) and it holds the approval: fail closed."""
    run = runs.get((vm.vm, vm.hook))
    if vm.state != VmState.AGENT_SILENT or run is None or run.state != "running":
        return vm
    until = run.started_at + timedelta(seconds=timeout_of(vm.hook)) + SILENT_MARGIN
    return VmReadiness(vm.vm, VmState.SILENT, vm.hook, until=until) if now < until else vm


def _vm(
    vm: str,
    prepare: Sequence[str],
    runs: dict[tuple[str, str], HookRunRecord],
    alive: bool,
    retrying: bool,
    *,
    silent: Mapping[str, datetime],
) -> VmReadiness:
    for hook in prepare:
        run = runs.get((vm, hook))
        if run is None:
            return VmReadiness(vm, VmState.WAITING, hook) if alive else _absent(vm, hook, silent)
        if run.retry_pending and retrying and alive:  # not final: the gate waits for it
            return VmReadiness(vm, VmState.WAITING, hook, _again(run))
        if run.state == "failed":
            # Which run failed last: a hold after a retry is news, not the same hold again.
            why = run.run.why + (f", attempt {run.run.attempt}" if run.run.attempt > 1 else "")
            return VmReadiness(vm, VmState.FAILED, hook, why, run.run.output)
        if run.state != "succeeded":
            if alive:
                return VmReadiness(vm, VmState.PREPARING, hook)
            # An agent ran it: known, whatever [fleet] known_for says (_silent: how long a
            # hook it began is waited for).
            return VmReadiness(vm, VmState.AGENT_SILENT, hook, since=silent.get(vm, run.started_at))
    return VmReadiness(vm, VmState.READY)


def _again(run: HookRunRecord) -> str:
    """When a failed hook runs again, for people: "failed (exit 1), runs again at 08:12:03
    UTC", or "failed (exit 1), runs again (asked)"."""
    if run.asked or run.retry_at is None:
        return f"failed ({run.run.why}), runs again (hooks retry requested)"
    return f"failed ({run.run.why}), runs again at {run.retry_at:%H:%M:%S} UTC"

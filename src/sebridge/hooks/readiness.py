"""Whether an event's VMs are ready: the gate before StartRequests, and what messages show.

One StartRequests releases every VM the event lists in Resources, so one VM's
readiness is not enough: every listed VM whose agent is alive must have
succeeded its prepare hooks. A listed VM without a live agent cannot prepare
and is not waited for (messages say "no agent"), except while a prepare hook it
began may still run: until the run's start plus the hook's timeout plus
SILENT_MARGIN ("stopped answering"). Pure: the carrier and the dispatcher hand
in the store's rows and the time. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING

from sebridge.model import ScheduledEvent
from sebridge.model.readiness import VmReadiness, VmState
from sebridge.store.store import STALE

if TYPE_CHECKING:  # the store's rows
    from sebridge.store.records import HookRunRecord

__all__ = ["DEFAULT_TIMEOUT", "SILENT_MARGIN", "Readiness", "listed_vms", "readiness"]

# A VM whose agent stopped answering (no beat for STALE) while one of its prepare hooks ran
# is waited for until that run's start plus the hook's timeout plus this margin; then it
# counts as "no agent". The hook's processes may outlive their agent (a frozen process, a
# lost database connection), still draining: a live agent would have ended the hook at its
# timeout and recorded that. The margin is STALE, so an agent that died during its hook
# (before its timeout) has been taken for dead by then: the wait is exactly this bound.
SILENT_MARGIN = STALE
# A hook this agent's config does not define ([hooks.<name>] timeout's default): a fleet
# shares one config, so this is only a stand-in.
DEFAULT_TIMEOUT = 300.0


@dataclass(frozen=True)
class Readiness:
    """Every listed VM's readiness, in Resources' order."""

    vms: tuple[VmReadiness, ...] = ()

    @property
    def ready(self) -> bool:
        """Every VM that can prepare has: StartRequests may go."""
        return all(v.state in (VmState.READY, VmState.NO_AGENT, VmState.DRY_RUN) for v in self.vms)

    @property
    def failed(self) -> VmReadiness | None:
        """The first VM whose prepare hook failed, if any."""
        return next((v for v in self.vms if v.state == VmState.FAILED), None)

    def not_ready(self) -> str:
        """The VMs that can prepare and have not (failed, preparing, not started), one line
        each, for people ("" when ready): what an approval anyway and started_unready name."""
        unready = (VmState.FAILED, VmState.WAITING, VmState.PREPARING, VmState.SILENT)
        return "; ".join(v.line() for v in self.vms if v.state in unready)

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

    def given_up(self) -> str:
        """The VMs no longer waited for because their agent stopped answering during a hook,
        one line each ("" when none): what the approval carried out without them says."""
        gone = [v.line() for v in self.vms if v.state == VmState.NO_AGENT and v.until]
        return "; ".join(gone)


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
) -> Readiness:
    """Each listed VM's readiness for `prepare` (the decision's prepare hooks, in order), as
    of `now`; `timeout_of` gives a hook's timeout in seconds. No prepare hooks: nothing to
    wait for, nothing to show. Dry run: no hook runs, and the messages say so instead of
    "waiting" for ever."""
    if not prepare:
        return Readiness()
    if dry_run:
        return Readiness(
            tuple(
                VmReadiness(vm, VmState.DRY_RUN if vm in live else VmState.NO_AGENT, prepare[0])
                for vm in listed_vms(event)
            )
        )
    by_vm: dict[tuple[str, str], HookRunRecord] = {
        (r.run.vm, r.run.hook): r for r in runs if r.run.stage == "prepare"
    }
    # A started event's retries never come: its failures are final.
    retrying = not event.started
    vms = (_vm(vm, prepare, by_vm, vm in live, retrying) for vm in listed_vms(event))
    return Readiness(tuple(_silent(v, by_vm, now, timeout_of) for v in vms))


def _silent(
    vm: VmReadiness,
    runs: dict[tuple[str, str], HookRunRecord],
    now: datetime,
    timeout_of: Callable[[str], float],
) -> VmReadiness:
    """A VM without a live agent whose prepare hook was running: waited for until the run's
    start plus the hook's timeout plus SILENT_MARGIN, then "no agent" (saying until when)."""
    run = runs.get((vm.vm, vm.hook))
    if vm.state != VmState.NO_AGENT or run is None or run.state != "running":
        return vm
    until = run.started_at + timedelta(seconds=timeout_of(vm.hook)) + SILENT_MARGIN
    state = VmState.SILENT if now < until else VmState.NO_AGENT
    return VmReadiness(vm.vm, state, vm.hook, until=until)


def _vm(
    vm: str,
    prepare: Sequence[str],
    runs: dict[tuple[str, str], HookRunRecord],
    alive: bool,
    retrying: bool,
) -> VmReadiness:
    for hook in prepare:
        run = runs.get((vm, hook))
        if run is None:
            return VmReadiness(vm, VmState.WAITING if alive else VmState.NO_AGENT, hook)
        if run.retry_pending and retrying and alive:  # not final: the gate waits for it
            return VmReadiness(vm, VmState.WAITING, hook, _again(run))
        if run.state == "failed":
            # Which run failed last: a hold after a retry is news, not the same hold again.
            why = run.run.why + (f", attempt {run.run.attempt}" if run.run.attempt > 1 else "")
            return VmReadiness(vm, VmState.FAILED, hook, why, run.run.output)
        if run.state != "succeeded":
            return VmReadiness(vm, VmState.PREPARING if alive else VmState.NO_AGENT, hook)
    return VmReadiness(vm, VmState.READY)


def _again(run: HookRunRecord) -> str:
    """When a failed hook runs again, for people: "failed (exit 1), runs again at 08:12:03
    UTC", or "failed (exit 1), runs again (asked)"."""
    if run.asked or run.retry_at is None:
        return f"failed ({run.run.why}), runs again (hooks retry requested)"
    return f"failed ({run.run.why}), runs again at {run.retry_at:%H:%M:%S} UTC"

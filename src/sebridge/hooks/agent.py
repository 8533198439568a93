"""One agent's readiness hooks, put together: the worker, the gate, and what messages show.

The daemon holds one; the carrier asks its gate, the dispatcher its readiness
lines. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from datetime import timedelta
from typing import TYPE_CHECKING

from sebridge.hooks.gate import KNOWN_FOR, SILENT_AFTER, ReadinessGate
from sebridge.hooks.readiness import DEFAULT_TIMEOUT
from sebridge.hooks.worker import HookWorker
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.redact import Masker
from sebridge.model import Transition, TransitionKind
from sebridge.model.decision import Decision
from sebridge.model.readiness import VmReadiness
from sebridge.store import EventRecord, Store

if TYPE_CHECKING:
    from sebridge.hooks.process import HookCommand

__all__ = ["AgentHooks", "timeouts"]


def _decision(record: EventRecord) -> Decision:
    return record.decision


def timeouts(hooks: Mapping[str, HookCommand]) -> Callable[[str], float]:
    """A hook's timeout by its name, as this agent's config says (the readiness gate's
    bound on a VM whose agent stopped answering during it)."""
    return lambda name: hooks[name].timeout if name in hooks else DEFAULT_TIMEOUT


class AgentHooks:
    """This VM's hooks (worker), the fleet's readiness (gate), and the lines messages show.

    Args:
        on_run: called after each hook run ended (wakes the carrier, dispatcher).
        on_begun: called after a hook run began (wakes the dispatcher).
        on_ended: called with (stage, outcome) as each hook run ends (metrics).
        mask: the secrets a hook's output must not show (config/masked.py).
        fleet: [fleet] known_for and silent_after: who is known, who is silent.
    """

    def __init__(
        self,
        store: Store,
        hooks: Mapping[str, HookCommand],
        vm_name: Callable[[], str],
        *,
        sinks_for: Callable[[Decision], Sequence[str]],
        prepare_lead: timedelta,
        dry_run: bool,
        clock: Clock = utcnow,
        on_run: Callable[[], None] = lambda: None,
        on_begun: Callable[[], None] = lambda: None,
        on_ended: Callable[[str, str], None] = lambda stage, outcome: None,
        mask: Masker | None = None,
        fleet: tuple[timedelta, timedelta] = (KNOWN_FOR, SILENT_AFTER),
    ) -> None:
        self._store = store
        self.gate = ReadinessGate(
            store,
            vm_name,
            _decision,
            timeout_of=timeouts(hooks),
            dry_run=dry_run,
            clock=clock,
            known_for=fleet[0],
            silent_after=fleet[1],
        )
        self.worker = HookWorker(
            store,
            hooks,
            vm_name,
            plan_of=_decision,
            sinks_for=lambda record: sinks_for(record.decision),
            prepare_lead=prepare_lead,
            dry_run=dry_run,
            clock=clock,
            on_run=on_run,
            on_begun=on_begun,
            on_ended=on_ended,
            mask=mask,
            holds=lambda record: bool(self.gate(record).hold),
        )

    def shown(self, event_id: str) -> tuple[tuple[VmReadiness, ...], tuple[str, ...]]:
        """Each listed VM's readiness and the rule's prepare hooks, for a message."""
        record = self._store.event(event_id)
        if record is None or not record.decision.prepare:
            return (), ()
        return self.gate.readiness(record).vms, record.decision.prepare

    def started_unready(self, started: Transition) -> Transition | None:
        """The alarm for an event that started (at NotBefore, or approved anyway) while a
        listed VM's prepare hooks had failed or not finished: one transition naming those
        VMs and why; None when every VM was ready (or the rule names no prepare hooks)."""
        record = self._store.event(started.event_id)
        if record is None or not record.decision.prepare:
            return None
        unready = self.gate.readiness(record).not_ready()
        if not unready:
            return None
        # The VMs and why, said once: each channel's template says "started while not ready".
        return Transition(TransitionKind.STARTED_UNREADY, started.event, started.at, note=unready)

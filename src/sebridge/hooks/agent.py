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
from sebridge.model.approval import would_hold
from sebridge.model.decision import Decision
from sebridge.model.readiness import HOLDING, VmReadiness, VmState
from sebridge.model.records import EventRecord
from sebridge.store import Store

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
        self._sinks_for = sinks_for
        self._clock = clock
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
            on_hook_ended=self._fold,
            mask=mask,
            holds=lambda record: bool(self.gate(record).hold),
        )

    def shown(self, event_id: str) -> tuple[tuple[VmReadiness, ...], tuple[str, ...]]:
        """Each listed VM's readiness and the rule's prepare hooks, for a message."""
        record = self._store.events.get(event_id)
        if record is None or not record.decision.prepare:
            return (), ()
        return self.gate.readiness(record).vms, record.decision.prepare

    def holding(self, record: EventRecord) -> bool:
        """Whether the event's readiness would hold an approval now (model/approval.py:
        would_hold): what makes an event nobody approved as loud as a held one (its
        reminders say held)."""
        if not record.decision.prepare:
            return False
        vms = self.gate.readiness(record).vms
        return would_hold(vms, record.decision.on_prepare_failure, record.policy)

    def started_unready(self, started: Transition) -> Transition | None:
        """The alarm for an event that started (at NotBefore, or approved anyway) while a
        listed VM's prepare hooks had failed or not finished: one transition naming those
        VMs and why; None when every VM was ready (or the rule names no prepare hooks)."""
        record = self._store.events.get(started.event_id)
        if record is None or not record.decision.prepare:
            return None
        unready = self.gate.readiness(record).not_ready()
        if not unready:
            return None
        # The VMs and why, said once: each channel's template says "started while not ready".
        return Transition(TransitionKind.STARTED_UNREADY, started.event, started.at, note=unready)

    def _fold(self, record: EventRecord, stage: str) -> None:
        """After a hook ended here: the hook steps folded into one readiness message
        (model/kinds.py), recorded when some sink of the event wants it (mail, Teams)."""
        sinks = self._sinks_for(record.decision)
        if not any(self._store.outbox.wants(s, TransitionKind.READY) for s in sinks):
            return
        fresh = self._store.events.get(record.event.event_id)
        if fresh is None:
            return
        news = self.readiness_news if stage == "prepare" else self._recover_news
        folded = news(fresh)
        if folded is not None:
            self._store.transitions.record(folded, sinks, self._clock())

    def _recover_news(self, record: EventRecord) -> Transition | None:
        """A recover hook that failed on a VM (uncordon, back into the load balancer): said
        once per failed run, as the folded channels hear no hook step of their own."""
        failed = [
            f"{r.run.vm}: {r.run.hook} failed ({r.run.why})"
            for r in self._store.hook_runs.of_event(record.event.event_id)
            if r.run.stage == "recover" and r.state == "failed"
        ]
        if not failed:
            return None
        note = f"not recovered: {'; '.join(failed)}"
        return Transition(TransitionKind.READY, record.event, self._clock(), note=note)

    def readiness_news(self, record: EventRecord) -> Transition | None:
        """One message for the hook steps of an event (READY): once every listed VM that can
        prepare is ready, or once one failed for good (not when a retry is due). Not for an
        event with an approval: the carrier goes on and `approved` says it, or holds it and
        `held` says why. Keyed by what it says, so a fleet's agents record it once."""
        if record.approval is not None:
            return None
        ready = self.gate.readiness(record)
        if not ready.vms:
            return None
        # A failed hook, or a silent agent: what would hold an approval (model/readiness.py).
        failed = [v.line() for v in ready.vms if v.state in HOLDING]
        if failed:
            note = f"not ready: {'; '.join(failed)}"
        elif ready.ready:
            done = [v.vm for v in ready.vms if v.state == VmState.READY]
            rest = [v.line() for v in ready.vms if v.state != VmState.READY]
            note = f"ready: {', '.join(done) or 'no VM'} prepared"
            note += f" ({'; '.join(rest)})" if rest else ""
        else:
            return None
        return Transition(TransitionKind.READY, record.event, self._clock(), note=note)

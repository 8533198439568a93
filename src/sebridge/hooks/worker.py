"""The hook worker: the thread of an agent that runs this VM's readiness hooks.

For each event that lists this VM and whose policy decision names hooks:
- prepare hooks, in order, once the event is approved (by a rule or a
  person) or `prepare_lead_seconds` before its NotBefore, whichever comes
  first; the first that fails ends the chain (the carrier holds or goes on,
  as the rule says);
- recover hooks, once the event ended (completed or cancelled) as this
  VM's own document says (a fleet's other agents may see it a poll later),
  if its prepare hooks began here (or it had none).
Each run is begun and ended in the store with its transition (hook_started,
hook_succeeded, hook_failed), at most once per event, hook and VM; a run a
crash cut short runs again at the next start. Each event's chain runs on a
thread of its own (chains.py), so one event's long drain never keeps another's
hooks waiting: a Preempt has 30 s; `sebridge once` waits for the chains a round
began (run_once). Dry run runs nothing. Each run's writes wake the carrier and
the dispatcher (kernel/subscriptions.py). See docs/ARCHITECTURE.md, "Readiness
hooks".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Mapping, Sequence
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING, Protocol

from sebridge.hooks.chains import Chains
from sebridge.hooks.readiness import listed_vms
from sebridge.kernel.clock import Clock, utcnow
from sebridge.kernel.errors import StoreError
from sebridge.kernel.redact import Masker
from sebridge.kernel.worker import Worker
from sebridge.model.approval import ApprovalState
from sebridge.model.records import EventRecord
from sebridge.store import Store

if TYPE_CHECKING:
    from sebridge.hooks.attempt import Attempts
    from sebridge.hooks.process import HookCommand

__all__ = ["HookPlan", "HookWorker"]

log = logging.getLogger("sebridge.hooks")

# Ended events are looked at this long after they left IMDS (their recover hooks).
_RECOVER_WITHIN = timedelta(hours=1)
# With nothing due, the worker still looks this often (a missed wake costs no more).
_IDLE_LOOK = 60.0


class HookPlan(Protocol):
    """What the worker reads of an event's policy decision."""

    @property
    def prepare(self) -> tuple[str, ...]: ...

    @property
    def recover(self) -> tuple[str, ...]: ...


class HookWorker:
    """Runs this VM's hooks on a thread of its own (or a round on the caller's: run_once).

    Args:
        hooks: the configured hooks by name ([hooks.<name>]).
        plan_of: an event's decision (which hooks it names).
        sinks_for: the sinks an event's transitions go to.
        prepare_lead: prepare hooks start by NotBefore minus this, approved or not.
        on_begun: called after a run was recorded as begun (wakes the dispatcher).
        on_run: called after each run's end was recorded (wakes the carrier and dispatcher).
        on_ended: called with (stage, "succeeded" | "failed" | "timeout") as each run ends.
        on_hook_ended: called with the event's record and the stage after each run ended
            here (the readiness message: hooks/agent.py).
        mask: the secrets a hook's output must not show (config/masked.py).
        holds: whether an event's held approval is still held (the readiness gate's
            answer); asked when a prepare chain ends (default: always, nothing lifts it).
    """

    def __init__(
        self,
        store: Store,
        hooks: Mapping[str, HookCommand],
        vm_name: Callable[[], str],
        *,
        plan_of: Callable[[EventRecord], HookPlan],
        sinks_for: Callable[[EventRecord], Sequence[str]],
        prepare_lead: timedelta = timedelta(seconds=300),
        dry_run: bool = False,
        clock: Clock = utcnow,
        on_run: Callable[[], None] = lambda: None,
        on_begun: Callable[[], None] = lambda: None,
        on_ended: Callable[[str, str], None] = lambda stage, outcome: None,
        on_hook_ended: Callable[[EventRecord, str], None] = lambda record, stage: None,
        mask: Masker | None = None,
        holds: Callable[[EventRecord], bool] = lambda record: True,
    ) -> None:
        self._holds = holds
        self._on_run = on_run
        self._store = store
        self._on_hook_ended = on_hook_ended
        self._hooks = dict(hooks)
        self._vm_name = vm_name
        self._plan_of = plan_of
        self._sinks_for = sinks_for
        self._lead = prepare_lead
        self._dry_run = dry_run
        self._clock = clock
        # When a prepare lead comes next; at start, at once: runs a crash cut short go again.
        self._next_due: datetime | None = datetime.min.replace(tzinfo=UTC)
        self._worker = Worker(
            "hooks", self._look, idle=_IDLE_LOOK, expected=(StoreError,), logger=log, clock=clock
        )
        self._chains = Chains(on_done=self._worker.wake)

        def attempts() -> Attempts:
            # Imported with the first run: a daemon without hooks never loads it.
            from sebridge.hooks.attempt import Attempts

            return Attempts(
                store,
                self._hooks,
                self._chains,
                stopping=lambda: self._worker.stopping,
                sleep=self._worker.sleep,
                clock=clock,
                mask=mask or Masker(),
                on_begun=on_begun,
                on_ended=on_ended,
                on_run=on_run,
            )

        self._new_attempts = attempts
        self._attempts: Attempts | None = None  # made with the first run (hooks/attempt.py)

    def start(self) -> None:
        """Run hooks on a thread of our own from now on (the daemon)."""
        self._worker.start()

    def stop(self, timeout: float = 0.0) -> bool:
        """Stop now: a hook in progress is ended (its process group) and runs again at the
        next start, as after a crash. True once the worker's thread ended."""
        deadline = time.monotonic() + max(0.0, timeout)
        self._worker.stop()  # told first: a chain ended below begins no next hook
        self._chains.stop(deadline)
        return self._worker.join(deadline - time.monotonic())

    # Woken by these tables' writes (kernel/subscriptions.py): an approval (prepare now),
    # the document (new events, ended ones: recover), a person's `sebridge hooks retry`.
    WAKES_ON = frozenset(("approvals", "events", "sightings", "hook_retries"))

    def wake(self) -> None:
        """Look now (an approval was recorded, the document changed, an event ended)."""
        self._worker.wake()

    def on_own_thread(self) -> bool:
        """Whether the caller is our thread (its own writes do not wake it)."""
        return self._worker.on_own_thread()

    def run_once(self) -> int:
        """One round on the caller's thread, then wait for the chains it began to end
        (`sebridge once`, tests: each hook has its timeout); returns how many began."""
        began: list[threading.Thread] = []
        ran = self.run_due(began)
        for chain in began:
            chain.join()
        return ran

    def run_due(self, began: list[threading.Thread] | None = None) -> int:
        """Begin every chain of hooks that is due now, each on its thread (added to
        `began`); returns how many began."""
        if self._dry_run or not self._hooks:
            # Nothing ever comes due: left at its start value, the worker would spin.
            self._next_due = None
            return 0
        now = self._clock()
        vm = self._vm_name()
        ran = 0
        next_due: datetime | None = None
        records = [
            (record, self._plan_of(record))
            for record in self._store.events.current(include_gone_since=now - _RECOVER_WITHIN)
            if vm in listed_vms(record.event)
        ]
        # Ended for this VM once its own document lost it, not when the fleet's last agent's
        # did: each agent's tick wakes its own worker then (finding: undrain a poll late).
        left = self._store.events.left_here(
            [record.event.event_id for record, plan in records if record.present and plan.recover]
        )
        for record, plan in records:
            if self._worker.stopping:
                break
            gone = not record.present or record.event.event_id in left
            stage, names = self._due(record, plan, now, gone=gone)
            if stage:
                chain, retry_at = self._begin_chain(record, stage, names, vm, now)
                if chain is not None:
                    ran += 1
                    if began is not None:
                        began.append(chain)
                if retry_at is not None:  # a failed prepare hook runs again then
                    next_due = retry_at if next_due is None else min(next_due, retry_at)
            elif (
                plan.prepare
                and not gone
                and not record.event.started
                and record.event.not_before is not None
            ):
                # Not due: its lead is still to come. (A started event's never comes: its
                # passed start, as the next due time, would make the worker spin.)
                start = record.event.not_before - self._lead
                next_due = start if next_due is None or start < next_due else next_due
        self._next_due = next_due
        return ran

    def _due(
        self, record: EventRecord, plan: HookPlan, now: datetime, *, gone: bool
    ) -> tuple[str, tuple[str, ...]]:
        """Which stage's hooks are due for this event now ("" for none); `gone`: this VM's
        document no longer lists it."""
        event = record.event
        if gone:
            if not plan.recover:  # nothing to run: no need to read its runs (every round)
                return "", ()
            prepared = not plan.prepare or any(
                r.run.stage == "prepare" and r.run.vm == self._vm_name()
                for r in self._store.hook_runs.of_event(event.event_id)
            )
            return ("recover", plan.recover) if prepared else ("", ())
        if not plan.prepare or event.started:
            return "", ()
        approved = record.approval is not None
        lead_passed = event.not_before is not None and now >= event.not_before - self._lead
        return ("prepare", plan.prepare) if approved or lead_passed else ("", ())

    def _begin_chain(
        self, record: EventRecord, stage: str, names: Sequence[str], vm: str, now: datetime
    ) -> tuple[threading.Thread | None, datetime | None]:
        """Run what is left of the chain on a thread of its own, unless this event's chain
        runs already; returns the chain's thread (None: none began), and when a failed
        prepare hook's retry comes (None: none waits)."""
        left, retry_at = self._left(record, stage, names, vm, now)
        if not left:
            return None, retry_at
        args = (record, stage, left, vm)
        return self._chains.begin(record.event.event_id, lambda: self._run_chain(*args)), None

    def _wait_again(self, event_id: str, vm: str) -> None:
        """This VM's prepare chain ended while the event's approval is held (its agent was
        silent, and came back): when nothing holds it any more (the gate's answer, `holds`),
        it waits for readiness again, and the carrier, woken by the run's end, lets it go
        once every VM is ready. Asked at the chain's end, not its start: a chain that began
        beside a hold that stays (another VM's agent still silent) changes nothing."""
        record = self._store.events.get(event_id)
        approval = record.approval if record is not None else None
        if record is None or approval is None or approval.state != ApprovalState.HELD:
            return
        if not self._holds(record) and self._store.approvals.wait_again(
            event_id, f"{vm} prepared: nothing holds the approval any more"
        ):
            log.info("approval of %s is no longer held: %s prepared", event_id, vm)
            self._on_run()  # the carrier, woken by the run's end, may have looked already

    def _left(
        self, record: EventRecord, stage: str, names: Sequence[str], vm: str, now: datetime
    ) -> tuple[list[str], datetime | None]:
        """The stage's hooks still to run, in order, each at most once but for a failed
        prepare hook's retries and a person's `sebridge hooks retry`. A failed prepare hook
        ends the chain (the VM is not ready: the carrier holds, waits for its retry, or goes
        on); recover hooks all run (re-adding to the load balancer must not wait for another
        hook's success). Also: when the failed hook's retry comes, if later."""
        done = {
            r.run.hook: r
            for r in self._store.hook_runs.of_event(record.event.event_id)
            if r.run.vm == vm and r.run.stage == stage
        }
        left: list[str] = []
        for name in names:
            run = done.get(name)
            if run is not None and run.state == "failed" and stage == "prepare":
                if run.asked or (run.retry_at is not None and run.retry_at <= now):
                    left.append(name)  # runs again, and the chain goes on after it
                    continue
                return left, run.retry_at
            if run is None or run.state not in ("succeeded", "failed"):
                left.append(name)
        return left, None

    def _run_chain(self, record: EventRecord, stage: str, names: Sequence[str], vm: str) -> int:
        """`names` in order (from _left); a failed prepare hook ends the chain."""
        ran = 0
        for name in names:
            if self._worker.stopping:
                break
            ran += 1
            if not self._run_one(record, stage, name, vm) and stage == "prepare":
                break
        if stage == "prepare" and ran and not self._worker.stopping:
            self._wait_again(record.event.event_id, vm)
        return ran

    def _run_one(self, record: EventRecord, stage: str, name: str, vm: str) -> bool:
        """Begin, run and end one hook (hooks/attempt.py); True when it succeeded."""
        if self._attempts is None:
            self._attempts = self._new_attempts()
        succeeded = self._attempts.run(record, stage, name, vm, self._sinks_for(record))
        if not self._worker.stopping:
            self._on_hook_ended(record, stage)
        return succeeded

    def _look(self) -> datetime | None:
        """One round on the worker's thread; when the next prepare lead comes."""
        self.run_due()
        return self._next_due

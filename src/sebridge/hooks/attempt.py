"""One attempt of one hook on this VM: begun in the store, run, ended in the store.

The hook worker (hooks/worker.py) decides which hooks are due and in which
order; an attempt is what happens to one of them: its `hook_started`
recorded, what a crash-cut earlier attempt left ended (hooks/leftovers.py),
the process run (hooks/process.py) with its group recorded for the next
restart, a failed prepare hook's retry planned (`retries`, `retry_delay`,
never past NotBefore), and its end recorded with `hook_succeeded` or
`hook_failed`. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import TYPE_CHECKING

from sebridge.hooks.chains import Chains
from sebridge.kernel.clock import Clock
from sebridge.kernel.errors import StoreError
from sebridge.kernel.redact import Masker
from sebridge.model import AGAIN_RESTART, HookRun, ScheduledEvent
from sebridge.model.records import EventRecord
from sebridge.store import Store
from sebridge.store.codec import iso

if TYPE_CHECKING:
    from sebridge.hooks.process import HookCommand

__all__ = ["Attempts"]

log = logging.getLogger("sebridge.hooks")


class Attempts:
    """Runs single hook attempts for the hook worker.

    Args:
        hooks: the configured hooks by name ([hooks.<name>]).
        chains: the running chains (told each attempt's process group, to end it at stop).
        stopping: whether the worker is stopping (an attempt ended by it is left `running`).
        sleep: waits between tries to record an end while the store is away.
        mask: the secrets a hook's output must not show (config/masked.py).
        on_begun, on_ended, on_run: as HookWorker's.
    """

    def __init__(
        self,
        store: Store,
        hooks: Mapping[str, HookCommand],
        chains: Chains,
        *,
        stopping: Callable[[], bool],
        sleep: Callable[[float], object],
        clock: Clock,
        mask: Masker,
        on_begun: Callable[[], None],
        on_ended: Callable[[str, str], None],
        on_run: Callable[[], None],
    ) -> None:
        self._store = store
        self._hooks = hooks
        self._chains = chains
        self._stopping = stopping
        self._sleep = sleep
        self._clock = clock
        self._mask = mask
        self._on_begun = on_begun
        self._on_ended = on_ended
        self._on_run = on_run

    def run(
        self, record: EventRecord, stage: str, name: str, vm: str, sinks: Sequence[str]
    ) -> bool:
        """Begin, run and end one hook; True when it succeeded."""
        event = record.event
        spec = self._hooks.get(name)
        try:
            run = self._store.hook_runs.begin(
                event,
                vm=vm,
                stage=stage,
                hook=name,
                now=self._clock(),
                sinks=sinks,
                retries=spec.retries if spec is not None and stage == "prepare" else 0,
            )
        except StoreError as exc:  # ends the chain, which nothing wakes again at once
            log.warning("hook %s for %s not started: %s", name, event.event_id, exc)
            raise
        if run is None:  # ended before (another round of ours): nothing to do
            return True
        self._on_begun()
        if spec is None:  # config checks refuse this; a fleet's agents may differ
            ended = replace(run, why=f"hook {name!r} is not defined")
        else:
            # Imported with the first run: a daemon without hooks never loads it.
            from sebridge.hooks.process import run_hook

            log.info("%s hook %s for %s (attempt %d)", stage, name, event.event_id, run.attempt)
            if run.again == AGAIN_RESTART:  # never two attempts at once
                self._end_leftovers(event.event_id, run)

            def started(pgid: int) -> None:
                self._chains.started(pgid)
                self._record_group(event.event_id, run, pgid)

            try:
                outcome = run_hook(
                    spec,
                    event,
                    stage=stage,
                    vm_name=vm,
                    mask=self._mask,
                    started=started,
                    strays=lambda: self._end_strays(event.event_id, run),
                )
            finally:
                self._chains.ended()
            if self._stopping():  # ended by stop(): left `running`, run again at start
                return False
            ended = replace(
                run,
                exit_code=outcome.exit_code,
                timed_out=outcome.timed_out,
                seconds=round(outcome.seconds, 3),
                output=outcome.output,
                why="" if outcome.succeeded else outcome.why(),
            )
            if not outcome.succeeded and stage == "prepare":
                ended = replace(ended, retry_at=self._retry_at(spec, run, event))
            level = logging.INFO if outcome.succeeded else logging.WARNING
            log.log(
                level,
                "%s hook %s for %s: %s",
                stage,
                name,
                event.event_id,
                "succeeded" if outcome.succeeded else ended.why,
            )
        ended_as = "succeeded" if not ended.why else "timeout" if ended.timed_out else "failed"
        self._on_ended(stage, ended_as)
        self._finish(record, ended, sinks)
        return not ended.why

    def _end_strays(self, event_id: str, run: HookRun) -> None:
        """End what the attempt left running outside its process group (a child that moved
        to a session of its own): it came back to us, the subreaper (hooks/reaper.py). With
        no other hook running (this one still counts), every such orphan is this
        attempt's, whatever its environment; else those whose environment names it."""
        from sebridge.hooks.leftovers import end_environ_leftovers
        from sebridge.hooks.process import end_group
        from sebridge.hooks.reaper import REAPER

        if self._chains.running() > 1:
            end_environ_leftovers(
                event_id, hook=run.hook, stage=run.stage, vm_name=run.vm, left_by="it"
            )
        else:
            for group in {group for _, group in REAPER.strays()}:
                log.info("%s hook %s: ended process group %d it left", run.stage, run.hook, group)
                end_group(group)
        # Reaped by run_hook right after this call (hooks/process.py), with the group's dead.

    def _end_leftovers(self, event_id: str, run: HookRun) -> None:
        """End what the attempt a crash cut short left running: the process group it
        recorded, then (a second net) processes whose environment names it."""
        from sebridge.hooks.leftovers import end_environ_leftovers, end_recorded_group

        what = f"{run.stage} hook {run.hook}"
        group = self._store.hook_runs.group(event_id, vm=run.vm, stage=run.stage, hook=run.hook)
        if group is not None:
            end_recorded_group(*group, what=what)
        end_environ_leftovers(event_id, hook=run.hook, stage=run.stage, vm_name=run.vm)

    def _record_group(self, event_id: str, run: HookRun, pgid: int) -> None:
        """Record the attempt's process group, for a restart after a crash to end it."""
        from sebridge.hooks.leftovers import group_identity

        identity = group_identity(pgid)
        if not identity:  # no /proc: the environment scan alone finds leftovers
            return
        try:
            self._store.hook_runs.record_group(event_id, run, pgid, identity)
        except StoreError as exc:  # the hook runs on; a crash now leaves the second net
            log.warning("%s hook %s: its process group not recorded: %s", run.stage, run.hook, exc)

    def _retry_at(self, spec: HookCommand, run: HookRun, event: ScheduledEvent) -> str | None:
        """When a failed prepare hook runs again (ISO 8601 UTC; None: never): after its
        retry_delay while retries are left, unless NotBefore would come before the next try
        could end (its timeout) or the event started. See docs/ARCHITECTURE.md, "Readiness
        hooks"."""
        if run.retry >= spec.retries or event.started:
            return None
        at = self._clock() + timedelta(seconds=spec.retry_delay)
        if event.not_before is not None and at + timedelta(seconds=spec.timeout) > event.not_before:
            return None
        return iso(at)

    def _finish(self, record: EventRecord, run: HookRun, sinks: Sequence[str]) -> None:
        """Record the end; a store away now is tried until it takes it (the row stays
        `running` meanwhile, and a crash makes the run happen again: idempotent hooks)."""
        while not self._stopping():
            try:
                self._store.hook_runs.finish(record.event, run, now=self._clock(), sinks=sinks)
                break
            except StoreError as exc:
                log.warning("hook %s's end not recorded yet: %s", run.hook, exc)
                self._sleep(1.0)
        self._on_run()

"""The hook_runs table: which readiness hook ran for which event on which VM, and how.

Part of Store (a mixin: Store provides `db`, `lock_events` and `_add_transition`).
A VM's rows are written by that VM's agent alone; every agent reads them all
(the carrier's gate, the messages' readiness lines). Beginning a run and
announcing it (hook_started) is one transaction, and so is its end: a crash
leaves a row `running`, which the next start of the agent runs again.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import TYPE_CHECKING

from sebridge.model import HookRun, ScheduledEvent, Transition, TransitionKind
from sebridge.store.codec import from_iso, iso
from sebridge.store.database import Database, Row
from sebridge.store.records import HookRunRecord

__all__ = ["HookRunTable"]

RUNNING, SUCCEEDED, FAILED = "running", "succeeded", "failed"
_COLUMNS = (
    "event_id, vm, stage, hook, attempt, state, started_at, finished_at, exit_code, "
    "timed_out, seconds, output, why"
)


class HookRunTable:
    """Hook runs: begun and ended, each with the transition that says so."""

    db: Database

    if TYPE_CHECKING:  # Store's other parts

        def lock_events(self, event_ids: Iterable[str]) -> None: ...

        def _add_transition(
            self, transition: Transition, sinks: Sequence[str], now: datetime
        ) -> int | None: ...

    def begin_hook_run(
        self,
        event: ScheduledEvent,
        *,
        vm: str,
        stage: str,
        hook: str,
        now: datetime,
        sinks: Sequence[str],
    ) -> HookRun | None:
        """Mark a run as begun and queue its hook_started transition. None when this hook
        already ended for this event on this VM (at most once). A row found `running` was
        interrupted by a crash: this is its next attempt."""
        key = (event.event_id, vm, stage, hook)
        with self.db.transaction():
            self.lock_events([event.event_id])
            row = self.db.one(
                "SELECT attempt, state FROM hook_runs "
                "WHERE event_id = ? AND vm = ? AND stage = ? AND hook = ?",
                key,
            )
            if row is not None and row[1] != RUNNING:
                return None
            run = HookRun(hook, stage, vm, attempt=int(row[0]) + 1 if row else 1)
            if row is None:
                self.db.execute(
                    "INSERT INTO hook_runs (event_id, vm, stage, hook, attempt, state, "
                    "started_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*key, run.attempt, RUNNING, iso(now)),
                )
            else:
                self.db.execute(
                    "UPDATE hook_runs SET attempt = ?, started_at = ? "
                    "WHERE event_id = ? AND vm = ? AND stage = ? AND hook = ?",
                    (run.attempt, iso(now), *key),
                )
            started = Transition(TransitionKind.HOOK_STARTED, event, now, hook=run)
            self._add_transition(started, sinks, now)
        return run

    def finish_hook_run(
        self, event: ScheduledEvent, run: HookRun, *, now: datetime, sinks: Sequence[str]
    ) -> None:
        """Record how a run ended (run carries exit code, time, output) and announce it."""
        succeeded = run.exit_code == 0 and not run.timed_out and not run.why
        kind = TransitionKind.HOOK_SUCCEEDED if succeeded else TransitionKind.HOOK_FAILED
        with self.db.transaction():
            self.lock_events([event.event_id])
            self.db.execute(
                "UPDATE hook_runs SET state = ?, finished_at = ?, exit_code = ?, timed_out = ?, "
                "seconds = ?, output = ?, why = ? "
                "WHERE event_id = ? AND vm = ? AND stage = ? AND hook = ? AND attempt = ?",
                (
                    SUCCEEDED if succeeded else FAILED,
                    iso(now),
                    run.exit_code,
                    int(run.timed_out),
                    run.seconds,
                    run.output,
                    run.why,
                    event.event_id,
                    run.vm,
                    run.stage,
                    run.hook,
                    run.attempt,
                ),
            )
            self._add_transition(Transition(kind, event, now, hook=run), sinks, now)

    def hook_runs(self, event_id: str) -> list[HookRunRecord]:
        """Every VM's runs for one event, in the order they began."""
        rows = self.db.all(
            f"SELECT {_COLUMNS} FROM hook_runs WHERE event_id = ? ORDER BY started_at, vm, hook",
            (event_id,),
        )
        return [_record(r) for r in rows]

    def interrupted_hook_runs(self, vm: str) -> list[tuple[str, str, str]]:
        """(event id, stage, hook) of this VM's runs a crash left `running`."""
        rows = self.db.all(
            "SELECT event_id, stage, hook FROM hook_runs WHERE vm = ? AND state = ?",
            (vm, RUNNING),
        )
        return [(r[0], r[1], r[2]) for r in rows]


def _record(row: Row) -> HookRunRecord:
    run = HookRun(
        hook=row[3],
        stage=row[2],
        vm=row[1],
        attempt=int(row[4]),
        exit_code=row[8],
        timed_out=bool(row[9]),
        seconds=row[10],
        output=row[11],
        why=row[12],
    )
    return HookRunRecord(
        event_id=row[0],
        run=run,
        state=row[5],
        started_at=from_iso(row[6]),
        finished_at=from_iso(row[7]) if row[7] else None,
    )

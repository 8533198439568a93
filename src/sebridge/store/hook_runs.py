"""The hook_runs table: which readiness hook ran for which event on which VM, and how.

A VM's rows are written by that VM's agent alone; every agent reads them all
(the carrier's gate, the messages' readiness lines). Beginning a run and
announcing it (hook_started) is one transaction, and so is its end: a crash
leaves a row `running`, which the next start of the agent runs again.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from sebridge.model import (
    AGAIN_RESTART,
    AGAIN_RETRY,
    HookRun,
    ScheduledEvent,
    Transition,
    TransitionKind,
)
from sebridge.model.records import HookRunRecord
from sebridge.store.codec import from_iso, iso
from sebridge.store.database import Database, Row
from sebridge.store.event_locks import lock_events
from sebridge.store.transitions import Transitions

__all__ = ["RUN_COLUMNS", "HookRuns", "hook_run_record"]

RUNNING, SUCCEEDED, FAILED = "running", "succeeded", "failed"
_COLUMNS = (
    "h.event_id, h.vm, h.stage, h.hook, h.attempt, h.state, h.started_at, h.finished_at, "
    "h.exit_code, h.timed_out, h.seconds, h.output, h.why"
)
# A run as hook_run_record() reads it: whether it runs again needs hook_retries joined as `r`.
RUN_COLUMNS = f"{_COLUMNS}, h.tries, h.retry_at, CASE WHEN r.seq > h.retry_asked THEN 1 ELSE 0 END"


class HookRuns:
    """Hook runs: begun and ended, each with the transition that says so."""

    def __init__(self, db: Database, transitions: Transitions) -> None:
        self._db = db
        self._transitions = transitions

    def begin(
        self,
        event: ScheduledEvent,
        *,
        vm: str,
        stage: str,
        hook: str,
        now: datetime,
        sinks: Sequence[str],
        retries: int = 0,
    ) -> HookRun | None:
        """Mark a run as begun and queue its hook_started transition. None when this hook
        already ended for this event on this VM (at most once), unless it failed and runs
        again: its retry is due, or a person asked (`sebridge hooks retry`: its budget of
        `retries` starts afresh). A row found `running` was interrupted by a crash: this is
        its next attempt."""
        key = (event.event_id, vm, stage, hook)
        with self._db.transaction():
            lock_events(self._db, [event.event_id])
            row = self._db.one(
                "SELECT h.attempt, h.state, h.tries, h.retry_at, h.retry_asked, r.seq, r.actor "
                "FROM hook_runs h LEFT JOIN hook_retries r ON r.event_id = h.event_id "
                "WHERE h.event_id = ? AND h.vm = ? AND h.stage = ? AND h.hook = ?",
                key,
            )
            again, tries, asked = "", 0, 0
            if row is not None:
                _, state, tries, retry_at, asked, seq, actor = row
                if state == RUNNING:
                    again = AGAIN_RESTART
                elif state == FAILED and seq is not None and seq > asked:
                    again, tries, asked = f"asked by {actor}", 0, seq
                elif state == FAILED and retry_at is not None and retry_at <= iso(now):
                    again = AGAIN_RETRY
                else:
                    return None
            run = HookRun(
                hook,
                stage,
                vm,
                attempt=int(row[0]) + 1 if row else 1,
                again=again,
                retry=int(tries),
                retries=retries,
            )
            if row is None:
                self._db.execute(
                    "INSERT INTO hook_runs (event_id, vm, stage, hook, attempt, state, "
                    "started_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
                    (*key, run.attempt, RUNNING, iso(now)),
                )
            else:
                self._db.execute(
                    "UPDATE hook_runs SET attempt = ?, state = ?, started_at = ?, tries = ?, "
                    "retry_at = NULL, retry_asked = ? "
                    "WHERE event_id = ? AND vm = ? AND stage = ? AND hook = ?",
                    (run.attempt, RUNNING, iso(now), tries, asked, *key),
                )
            started = Transition(TransitionKind.HOOK_STARTED, event, now, hook=run)
            self._transitions.add(started, sinks, now)
        return run

    def finish(
        self, event: ScheduledEvent, run: HookRun, *, now: datetime, sinks: Sequence[str]
    ) -> None:
        """Record how a run ended (run carries exit code, time, output; a failure that runs
        again, when: `retry_at`) and announce it. A failure counts against the retries."""
        succeeded = run.exit_code == 0 and not run.timed_out and not run.why
        kind = TransitionKind.HOOK_SUCCEEDED if succeeded else TransitionKind.HOOK_FAILED
        with self._db.transaction():
            lock_events(self._db, [event.event_id])
            self._db.execute(
                "UPDATE hook_runs SET state = ?, finished_at = ?, exit_code = ?, timed_out = ?, "
                "seconds = ?, output = ?, why = ?, tries = tries + ?, retry_at = ? "
                "WHERE event_id = ? AND vm = ? AND stage = ? AND hook = ? AND attempt = ?",
                (
                    SUCCEEDED if succeeded else FAILED,
                    iso(now),
                    run.exit_code,
                    int(run.timed_out),
                    run.seconds,
                    run.output,
                    run.why,
                    0 if succeeded else 1,
                    None if succeeded else run.retry_at,
                    event.event_id,
                    run.vm,
                    run.stage,
                    run.hook,
                    run.attempt,
                ),
            )
            self._transitions.add(Transition(kind, event, now, hook=run), sinks, now)

    def record_group(self, event_id: str, run: HookRun, pgid: int, start: str) -> None:
        """The process group this attempt runs in, and its leader's identity (boot and
        start time): what a restart after a crash ends (hooks/leftovers.py)."""
        with self._db.transaction():
            self._db.execute(
                "UPDATE hook_runs SET pgid = ?, pgid_start = ? "
                "WHERE event_id = ? AND vm = ? AND stage = ? AND hook = ? AND attempt = ?",
                (pgid, start, event_id, run.vm, run.stage, run.hook, run.attempt),
            )

    def group(self, event_id: str, *, vm: str, stage: str, hook: str) -> tuple[int, str] | None:
        """The process group (id, leader's identity) the latest attempt that began one
        recorded; None when none did. Beginning an attempt leaves it as it was: an
        attempt a crash cut short is found by the next."""
        row = self._db.one(
            "SELECT pgid, pgid_start FROM hook_runs "
            "WHERE event_id = ? AND vm = ? AND stage = ? AND hook = ?",
            (event_id, vm, stage, hook),
        )
        if row is None or row[0] is None or not row[1]:
            return None
        return int(row[0]), str(row[1])

    def of_event(self, event_id: str) -> list[HookRunRecord]:
        """Every VM's runs for one event, in the order they began; a failed one says whether
        it runs again (its retry, or a person's `sebridge hooks retry` it has not run for)."""
        rows = self._db.all(
            f"SELECT {RUN_COLUMNS} FROM hook_runs h "
            "LEFT JOIN hook_retries r ON r.event_id = h.event_id "
            "WHERE h.event_id = ? ORDER BY h.started_at, h.vm, h.hook",
            (event_id,),
        )
        return [hook_run_record(r) for r in rows]

    def interrupted(self, vm: str) -> list[tuple[str, str, str]]:
        """(event id, stage, hook) of this VM's runs a crash left `running`."""
        rows = self._db.all(
            "SELECT event_id, stage, hook FROM hook_runs WHERE vm = ? AND state = ?",
            (vm, RUNNING),
        )
        return [(r[0], r[1], r[2]) for r in rows]


def hook_run_record(row: Row) -> HookRunRecord:
    """A run read with RUN_COLUMNS."""
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
        # tries counts the failures: a failed run's own is one of them
        retry=max(0, int(row[13]) - 1) if row[5] == FAILED else int(row[13]),
        retry_at=row[14],
    )
    return HookRunRecord(
        event_id=row[0],
        run=run,
        state=row[5],
        started_at=from_iso(row[6]),
        finished_at=from_iso(row[7]) if row[7] else None,
        retry_at=from_iso(row[14]) if row[14] and row[5] == FAILED else None,
        asked=bool(row[15]) and row[5] == FAILED,
    )

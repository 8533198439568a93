"""Periodic rounds read open rows only, through an index (schema version 12).

With history in the store (store_history.py: past events, their transitions, delivered
outbox rows and receipts, closed approvals), every statement an idle round sends (the
carrier's, the hook worker's, the reminders', the Jira search's, the dispatcher's, the
heartbeat's, the health probe's) and those of a tick that records a changed document are
planned as index searches, or as scans of a partial index that holds open rows alone: the
plan, as each dialect prints it; SQLite before and after the planner has statistics (the
daemon never gives it any), PostgreSQL after (autovacuum gives them). That the indexed
queries find the same rows: test_store_open_rows.py. How long a round takes at 20 and at
20,000 past events: bench/idle_round.py.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import timedelta
from typing import Any

import pytest

from helpers import ListSink
from sebridge.cli.assembly import compose_daemon
from sebridge.engine.daemon import Daemon, Polled, TickResult
from sebridge.hooks.process import HookSpec
from sebridge.imds import ImdsClient
from sebridge.model import Document, ScheduledEvent
from sebridge.store import Store
from store_history import NOW, SINKS, past, present

# The indexes that hold open rows only (schema versions 6 and 11): a scan of one reads no
# history. Any other scan of a table that keeps history is what this module forbids.
PARTIAL = {
    "outbox_pending",
    "outbox_pending_event",
    "approvals_open",
    "events_present",
    "events_gone",
    "sightings_present",
}
HISTORY = ("events", "approvals", "sightings", "outbox", "transitions", "receipts", "hook_runs")


def daemon(store: Store) -> Daemon:
    """A daemon over the store, without threads: each round runs on the caller's."""
    return compose_daemon(
        ImdsClient("http://127.0.0.1:9", retries=0),  # never asked: nothing is approved
        store,
        {name: ListSink() for name in SINKS},
        vm_name="vm0",
        hooks={"drain": HookSpec("drain", ("true",))},  # a hook: the worker reads events
        clock=lambda: NOW,
    )


class Recorded:
    """Every statement the store sends while installed (Database._run, which all go through)."""

    def __init__(self, store: Store, monkeypatch: pytest.MonkeyPatch) -> None:
        self.sent: list[tuple[str, tuple[Any, ...]]] = []
        self._monkeypatch = monkeypatch
        self._db = store.db
        run = store.db._run

        def recording(sql: str, params: Sequence[Any] = ()) -> Any:
            self.sent.append((sql, tuple(params)))
            return run(sql, params)

        monkeypatch.setattr(store.db, "_run", recording)

    def stop(self) -> list[tuple[str, tuple[Any, ...]]]:
        self._monkeypatch.undo()
        return [
            (sql, p) for sql, p in self.sent if re.match(r"\s*(SELECT|UPDATE|INSERT|DELETE)", sql)
        ]


def plan(store: Store, sql: str, params: tuple[Any, ...]) -> list[str]:
    """The statement's plan as the dialect prints it, one node (or detail) per line."""
    if postgres(store):
        return [str(r[0]) for r in store.db.all("EXPLAIN " + sql, params)]
    return [str(r[-1]) for r in store.db.all("EXPLAIN QUERY PLAN " + sql, params)]


def postgres(store: Store) -> bool:
    return store.location.startswith("postgresql")


def full_reads(store: Store, lines: list[str]) -> list[str]:
    """The plan's reads of every row of a table that keeps history, or of a whole index that
    is not one of the partial (open rows only) ones."""
    bad: list[str] = []
    if not postgres(store):
        for line in lines:
            scan = re.match(r"\s*SCAN (\w+)(?: USING (?:COVERING )?INDEX (\w+))?", line)
            if scan and scan[1] not in ("documents", "CONSTANT") and scan[2] not in PARTIAL:
                bad.append(line)
        return bad
    for i, line in enumerate(lines):
        seq = re.search(r"Seq Scan on (\w+)", line)
        if seq and seq[1] in HISTORY:
            bad.append(line)
        index = re.search(
            r"(?:Index|Index Only|Bitmap Index) Scan (?:Backward )?(?:using|on) (\w+)", line
        )
        if index and index[1] not in PARTIAL:
            detail = []
            for later in lines[i + 1 :]:
                if "->" in later:
                    break
                detail.append(later)
            if not any("Index Cond" in d for d in detail):
                bad.append(line)
    return bad


def rounds(d: Daemon, document: Document) -> dict[str, Callable[[], object]]:
    """An idle round of each periodic part, then a tick that records a changed document."""
    store = d.store
    flip = ScheduledEvent("F1", "Freeze", "Scheduled", ("vm0",), not_before=NOW + timedelta(1))
    changed = replace(document, incarnation="changed", events=(*document.events, flip))
    return {
        "carrier": d.carrier.run_once,
        "hook worker": d.parts.hook_worker.run_once,
        "reminders": lambda: d.parts.reminders.record_due(NOW),
        "jira search": d.approvals.open_events,
        "dispatcher claim": lambda: store.outbox.claim("jsonl", NOW, NOW + timedelta(minutes=2)),
        "dispatcher next_due": lambda: store.outbox.next_due("jsonl"),
        "heartbeat": lambda: store.agents.heartbeat(NOW),
        "health probe": lambda: store.settings.remember("health_probe", NOW.isoformat()),
        "changed tick": lambda: d.act(Polled(changed, NOW, TickResult())),
        "claim after it": lambda: store.outbox.claim("jsonl", NOW, NOW + timedelta(minutes=2)),
    }


@pytest.mark.parametrize("statistics", [False, True], ids=["no statistics", "analyzed"])
def test_every_statement_of_a_round_reads_through_an_index(
    store: Store, monkeypatch: pytest.MonkeyPatch, statistics: bool
) -> None:
    if postgres(store) and not statistics:
        # Never analyzed, PostgreSQL guesses (a table's rows from its pages, 0.5 % of them
        # present) and hashes whole tables for what are three rows; autovacuum analyzes a
        # table long before it holds this much history.
        pytest.skip("PostgreSQL plans with the statistics autovacuum keeps")
    past(store)
    document = present(store)
    if statistics:
        store.db.execute("ANALYZE")
    d = daemon(store)
    used: set[str] = set()
    for name, run in rounds(d, document).items():
        recorded = Recorded(store, monkeypatch)
        run()
        statements = recorded.stop()
        assert statements, name
        for sql, params in statements:
            lines = plan(store, sql, params)
            assert full_reads(store, lines) == [], (name, sql, "\n".join(lines))
            used |= {index for index in PARTIAL if any(index in line for line in lines)}
    # Each open-rows index served some round (the carrier's checks and claim, events, the
    # hook worker's recently gone, our sightings): none was left for a scan of history.
    assert {"approvals_open", "events_present", "events_gone", "sightings_present"} <= used

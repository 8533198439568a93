"""One idle round of each periodic part, with 20 and with 20,000 past events in the store.

A store is built the way the daemon writes one (Store.documents.apply): `--past` events that came
and went three days ago (Reboots listing vm0; every other one approved, its approval posted
and the event completed, the rest cancelled), each with its transitions and its outbox rows
for two sinks, all delivered; then 3 present `ask` events nobody approved, their first
message delivered. The same-run baseline is the same store with `--baseline` past events.
On PostgreSQL (a database of its own on 127.0.0.1:5432, created and dropped) the tables are
vacuumed and analyzed once filled (VACUUM ANALYZE), as autovacuum would have by then:
`--no-vacuum` analyzes only, as before autovacuum's first pass, when the index entries of rows
that left an open state (all of them: every row was written open, then closed) are still
there to walk past. SQLite gets neither (the daemon never runs them; a row leaves a partial
index as it is updated).

Then, on a Daemon built over each store (no threads: each part runs on this one), one call
of each part a periodic round makes when there is nothing to do:

- carrier round (Carrier.wake: the open-approval checks, before and after the claim);
- hook-worker round (HookWorker.run_due, one hook configured that no event's rule names);
- reminders round (Reminders.record_due);
- the Jira watcher's search of approvable events (Approvals.open_events: no Jira call);
- the dispatcher's claim of a sink's due rows, and its next_due;
- the heartbeat (Store.agents.heartbeat) and the health probe's write;
- a changed document recorded (approved_ids, diff, Store.documents.apply): one present event comes
  or goes, no sink.

Then, in rounds of their own, the /metrics gauges' read: it counts every event the store
holds, so it grows with the history by design (and, timed beside the others, its read of
every event evicted their pages from the caches).

Rounds alternate between the two stores (a noisy moment hits both alike). Printed per
part: median and p95 per call with each store, the ratio of the medians (target ~1x: a
round costs the same whatever the history) and the statements one call runs. The SQLite
files live on /dev/shm (`--disk DIR` otherwise): on a disk every commit is an fsync that
costs the same at any history and hides the rest.

    .venv/bin/python bench/idle_round.py [--past 20000] [--baseline 20] [--rounds 200]
                                         [--no-pg] [--no-vacuum] [--disk DIR]
"""

from __future__ import annotations

import argparse
import contextlib
import getpass
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT)]

import harness  # noqa: E402
import pg  # noqa: E402
from sebridge.cli.assembly import compose_daemon  # noqa: E402
from sebridge.engine.daemon import Daemon  # noqa: E402
from sebridge.hooks.process import HookSpec  # noqa: E402
from sebridge.imds import ImdsClient  # noqa: E402
from sebridge.model import (  # noqa: E402
    Approval,
    Document,
    Receipt,
    ScheduledEvent,
    Transition,
    TransitionKind,
)
from sebridge.model.diff import diff  # noqa: E402
from sebridge.model.message import Message  # noqa: E402
from sebridge.store import Store  # noqa: E402
from sebridge.store.tallies import read_tallies  # noqa: E402

SINKS = ("console", "jsonl")
OPEN = 3  # present events nobody approved: the same in both stores
BATCH = 1000  # past events per Store.documents.apply while filling
TMP = "/dev/shm" if Path("/dev/shm").is_dir() else None
LEASE = timedelta(minutes=2)


class QuietSink:
    """A sink that is never called in an idle round (and would send nothing)."""

    def send(self, message: Message) -> Receipt | None:
        return None

    def close(self) -> None:
        pass


def past_event(i: int, at: datetime) -> ScheduledEvent:
    return ScheduledEvent(
        f"P{i:06d}",
        "Reboot",
        "Scheduled",
        ("vm0",),
        "VirtualMachine",
        not_before=at + timedelta(minutes=15),
        description="Host maintenance",
        source="Platform",
        duration_seconds=900,
    )


def fill(store: Store, past: int, now: datetime, *, vacuum: bool = True) -> None:
    """`past` events that came and went three days ago, then OPEN present ones."""
    at = now - timedelta(days=3)
    incarnation = 0
    for start in range(0, past, BATCH):
        events = tuple(past_event(i, at) for i in range(start, min(past, start + BATCH)))
        approved = {e.event_id for i, e in enumerate(events, start) if i % 2 == 0}
        incarnation += 1
        store.documents.apply(
            Document(incarnation, events),
            [(Transition(TransitionKind.SCHEDULED, e, at), SINKS) for e in events],
            at,
            approvals=[Approval(e, "alice", "slack", at) for e in sorted(approved)],
        )
        later = at + timedelta(minutes=1)
        store.db.execute(
            "UPDATE approvals SET state = 'posted', attempts = 1, done_at = ? "
            "WHERE state = 'pending'",
            (later.isoformat(),),
        )
        gone: list[tuple[Transition, Sequence[str]]] = []
        for e in events:
            if e.event_id in approved:
                approval = Transition(TransitionKind.APPROVED, e, later, actor="alice", via="slack")
                gone.append((approval, SINKS))
                gone.append((Transition(TransitionKind.COMPLETED, e, later), SINKS))
            else:
                gone.append((Transition(TransitionKind.CANCELLED, e, later), SINKS))
        incarnation += 1
        store.documents.apply(Document(incarnation, ()), gone, later)
        delivered(store, later)
    opened = now - timedelta(hours=1)
    events = tuple(
        ScheduledEvent(f"O{i:06d}", "Freeze", "Scheduled", ("vm0",), not_before=now + timedelta(2))
        for i in range(OPEN)
    )
    store.documents.apply(
        Document(incarnation + 1, events),
        [(Transition(TransitionKind.SCHEDULED, e, opened), SINKS) for e in events],
        opened,
    )
    delivered(store, opened)
    if store.location.startswith("postgresql"):
        store.db.execute("VACUUM ANALYZE" if vacuum else "ANALYZE")


def delivered(store: Store, at: datetime) -> None:
    store.db.execute(
        "UPDATE outbox SET state = 'delivered', attempts = 1, begun = 1, delivered_at = ? "
        "WHERE state = 'pending'",
        (at.isoformat(),),
    )


@dataclass
class Rig:
    """A filled store, the daemon over it, and what the `changed` part alternates."""

    past: int
    store: Store
    daemon: Daemon
    documents: tuple[Document, Document]
    previous: Document
    times: dict[str, list[float]] = field(default_factory=dict)
    statements: dict[str, int] = field(default_factory=dict)

    def record_change(self, now: datetime) -> None:
        """What a tick does with a changed document (Daemon._record without the policy)."""
        document = self.documents[1] if self.previous is self.documents[0] else self.documents[0]
        approved = self.store.approvals.approved_ids()
        transitions = diff(self.previous, document, now, approved)
        self.store.documents.apply(document, [(t, ()) for t in transitions], now)
        self.previous = document


def rig(url: str, past: int, now: datetime, *, vacuum: bool = True) -> Rig:
    store = Store(url, "vm0", exclusive=True)
    fill(store, past, now, vacuum=vacuum)
    daemon = compose_daemon(
        ImdsClient("http://127.0.0.1:9", retries=0),  # never asked: nothing to approve
        store,
        {name: QuietSink() for name in SINKS},
        vm_name="vm0",
        hooks={"drain": HookSpec("drain", ("true",))},  # a hook, so the worker reads events
    )
    last = store.documents.last()
    assert last is not None and len(last.events) == OPEN
    flip = ScheduledEvent("F000000", "Freeze", "Scheduled", ("vm0",), "VirtualMachine")
    with_flip = Document(last.incarnation, (*last.events, flip))
    return Rig(past, store, daemon, (last, with_flip), last)


PARTS: tuple[tuple[str, Callable[[Rig, datetime], object]], ...] = (
    ("carrier round", lambda r, now: r.daemon.carrier.run_once()),
    ("hook-worker round", lambda r, now: r.daemon.parts.hook_worker.run_once()),
    ("reminders round", lambda r, now: r.daemon.parts.reminders.record_due(now)),
    ("Jira: open events", lambda r, now: r.daemon.approvals.open_events()),
    ("dispatcher claim", lambda r, now: r.store.outbox.claim("jsonl", now, now + LEASE)),
    ("dispatcher next_due", lambda r, now: r.store.outbox.next_due("jsonl")),
    ("heartbeat", lambda r, now: r.store.agents.heartbeat(now)),
    (
        "health probe write",
        lambda r, now: r.store.settings.remember("health_probe", now.isoformat()),
    ),
    ("changed document recorded", lambda r, now: r.record_change(now)),
)
# Timed in rounds of its own, after the others: it reads every event (the gauge counts what
# the store holds), which evicts the pages the other parts use from the caches.
SCRAPE: tuple[tuple[str, Callable[[Rig, datetime], object]], ...] = (
    ("/metrics gauges read", lambda r, now: read_tallies(r.store.db, SINKS)),
)


def count_statements(r: Rig) -> None:
    """One call of each part, counting the statements it sends (Database._run: every one)."""
    db: Any = r.store.db
    run = db._run
    sent = [0]

    def counted(sql: str, params: Sequence[Any] = ()) -> Any:
        sent[0] += 1
        return run(sql, params)

    db._run = counted
    try:
        for name, part in PARTS + SCRAPE:
            sent[0] = 0
            part(r, datetime.now(UTC))
            r.statements[name] = sent[0]
    finally:
        del db._run


def measure(rigs: Sequence[Rig], parts: Sequence[tuple[str, Any]], rounds: int) -> None:
    warmup = 5
    for number in range(warmup + rounds):
        order = rigs if number % 2 == 0 else list(reversed(rigs))
        for r in order:
            for name, part in parts:
                now = datetime.now(UTC)
                began = time.perf_counter()
                part(r, now)
                took = time.perf_counter() - began
                if number >= warmup:
                    r.times.setdefault(name, []).append(took)


@contextlib.contextmanager
def store_urls(dialect: str, folder: Path) -> Iterator[tuple[str, str]]:
    """Two empty stores of the dialect: the baseline's and the big one's."""
    if dialect == "sqlite":
        yield f"sqlite:///{folder / 'base.db'}", f"sqlite:///{folder / 'big.db'}"
        return
    admin = f"postgresql://{getpass.getuser()}@127.0.0.1:5432/postgres?{pg.PLAIN}"
    with pg.temporary_database(admin) as base, pg.temporary_database(admin) as big:
        yield base, big


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.3f} ms"


def run_dialect(dialect: str, args: argparse.Namespace, report: harness.Report) -> None:
    with (
        tempfile.TemporaryDirectory(dir=args.disk or TMP) as tmp,
        store_urls(dialect, Path(tmp)) as (base_url, big_url),
    ):
        now = datetime.now(UTC)
        began = time.monotonic()
        vacuum = not args.no_vacuum
        rigs = [
            rig(url, n, now, vacuum=vacuum)
            for url, n in ((base_url, args.baseline), (big_url, args.past))
        ]
        print(f"  {dialect}: stores filled in {time.monotonic() - began:.0f} s", flush=True)
        try:
            for r in rigs:
                count_statements(r)
            measure(rigs, PARTS, args.rounds)
            measure(rigs, SCRAPE, args.rounds)
        finally:
            for r in rigs:
                r.store.close()
    base, big = rigs
    report.section(
        f"{dialect}: one call, median / p95 ({args.baseline} | {args.past} past events), "
        "ratio of medians, statements"
    )
    for name, _ in PARTS + SCRAPE:
        idle = name not in dict(SCRAPE)
        small, large = base.times[name], big.times[name]
        ratio = statistics.median(large) / statistics.median(small)
        value = (
            f"{ms(statistics.median(small))} / {ms(harness.percentile(small, 95))}  |  "
            f"{ms(statistics.median(large))} / {ms(harness.percentile(large, 95))}  "
            f"{ratio:5.2f}x  {base.statements[name]:>3} | {big.statements[name]:<3}"
        )
        if idle:
            report.row(name, value, "~1x", ratio <= 1.5)
        else:
            report.row(name, value, "(counts all)")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--past", type=int, default=20000, help="past events, the big store")
    parser.add_argument("--baseline", type=int, default=20, help="past events, the baseline")
    parser.add_argument("--rounds", type=int, default=200, help="timed rounds per store")
    parser.add_argument("--no-pg", action="store_true", help="SQLite only")
    parser.add_argument(
        "--no-vacuum", action="store_true", help="PostgreSQL: ANALYZE only, no VACUUM"
    )
    parser.add_argument("--disk", help="a folder for the SQLite files (default: /dev/shm)")
    args = parser.parse_args()
    dialects = ["sqlite"]
    if not args.no_pg:
        if pg.server_answers():
            dialects.append("postgresql")
        else:
            print(f"no PostgreSQL on {pg.HOST}:{pg.PORT}: SQLite only")
    report = harness.Report()
    print(f"idle rounds: {args.baseline} and {args.past} past events, {args.rounds} rounds each")
    began = time.monotonic()
    with harness.terminated_on_sigterm():
        for dialect in dialects:
            run_dialect(dialect, args, report)
    print()
    report.print()
    print(f"\ntotal run time {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

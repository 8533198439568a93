"""A 10,000-event document: recorded, delivered, /healthz answering, SIGTERM in time.

Part 1, a real `sebridge run` (SQLite; `--pg`: PostgreSQL on 127.0.0.1:5432) with the
console, JSON lines and Teams (the tests' fake Workflows webhook) against a simulator that
lists `--events` events at once, and the same with `--baseline-events` in the same run:
- run 1, left alone: seconds from start until every transition is recorded, and until
  every delivery is done (ms per delivery);
- run 2, on a new store: SIGTERM the moment the document is recorded (the whole backlog
  owed): seconds to exit, beside the limit (dispatch.shutdown_grace_seconds, 5 s, plus the
  second engine/runner.py allows), and, restarted, seconds until the rest is delivered;
- GET /healthz every 0.25 s throughout: p50/p99/max and how many were not 200.
The big document's ms per delivery over the baseline's: 1.0 means a delivery costs the
same whatever the backlog.

Part 2, the claim alone (Outbox.claim, 20 rows at a time) at 100 and at 10,000 pending rows,
ms per row and the ratio, on SQLite (and PostgreSQL with `--pg`).

    .venv/bin/python bench/big_backlog.py [--events 10000] [--baseline-events 100] [--pg]
"""

from __future__ import annotations

import argparse
import contextlib
import http.client
import signal
import sqlite3
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT)]

from tests.fakes.teams import FakeTeams  # noqa: E402

import harness  # noqa: E402
import pg  # noqa: E402
from sebridge.imds.simulator import Simulator  # noqa: E402
from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind  # noqa: E402
from sebridge.store import Store  # noqa: E402

SINKS = ("console", "jsonl", "teams")
# The SQLite file and JSON lines on tmpfs by default: on a disk each delivery's commits
# (begun, then delivered, each an fsync) cost more than everything else, the same at any
# backlog; `--disk DIR` measures them.
TMP = "/dev/shm" if Path("/dev/shm").is_dir() else None
LIMIT = 5.0 + 1.0  # shutdown_grace_seconds (default) + engine/runner.py's second


class Prober:
    """GET /healthz every 0.25 s on a thread; latencies (s) and non-200 answers."""

    def __init__(self, port: int) -> None:
        self._port = port
        self.latencies: list[float] = []  # of answers
        self.failures = 0  # answers other than 200
        self.refused = 0  # no daemon listening (between runs)
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(15)

    def _run(self) -> None:
        while not self._stop.wait(0.25):
            start = time.monotonic()
            conn = http.client.HTTPConnection("127.0.0.1", self._port, timeout=10)
            try:
                conn.request("GET", "/healthz")
                status = conn.getresponse().status
            except ConnectionRefusedError:
                self.refused += 1
                continue
            except OSError:
                status = 0  # no answer in 10 s: counted as 10 s and a failure
            finally:
                conn.close()
            self.latencies.append(time.monotonic() - start)
            self.failures += status != 200


def counter(url: str) -> Callable[[str], int]:
    """A count(SQL) reader of the daemon's store, as a person would read it."""
    if url.startswith("sqlite"):
        path = url.removeprefix("sqlite:///")

        def sqlite_count(sql: str) -> int:
            with contextlib.closing(sqlite3.connect(path, timeout=30)) as conn:
                return int(conn.execute(sql).fetchone()[0])

        return sqlite_count
    return lambda sql: int(pg.query(url, sql)[0][0])  # type: ignore[call-overload]


@contextlib.contextmanager
def store_url(folder: Path, use_pg: bool) -> Iterator[str]:
    if use_pg:
        with pg.temporary_database(_pg_admin()) as url:
            yield url
    else:
        yield f"sqlite:///{folder / 'state.db'}"


def _pg_admin() -> str:
    import getpass

    return f"postgresql://{getpass.getuser()}@127.0.0.1:5432/postgres?{pg.PLAIN}"


def run_daemon(events: int, use_pg: bool, where: str | None) -> dict[str, float]:
    """Part 1 for one document size."""
    children = harness.Children()
    with (
        tempfile.TemporaryDirectory(dir=where) as tmp,
        Simulator(port=0, vm_name="vm0", approval_delay=3600) as sim,
        FakeTeams() as teams,
        store_url(Path(tmp), use_pg) as url,
        store_url(Path(tmp) / "2", use_pg) as url2,
    ):
        (Path(tmp) / "2").mkdir()
        folder = Path(tmp)
        for _ in range(events):
            sim.schedule("Reboot", resources=["vm0"], notice=3600)
        port = harness.free_port()
        sections = harness.daemon_sections(folder, sim, 1.0, console=True)
        sections["store"]["url"] = url
        sections["dispatch"] = {}  # the default grace: the limit printed is the real one
        sections["jsonl"] = {"path": str(folder / "events.jsonl")}
        sections["teams"] = {"webhook_url": teams.workflows_url}
        sections["http"] = {"listen": f"127.0.0.1:{port}"}
        config = harness.write_sections(folder, sections)
        count = counter(url)
        owed = events * len(SINKS)
        recorded_sql = "SELECT COUNT(*) FROM transitions"
        done_sql = "SELECT COUNT(*) FROM outbox WHERE state = 'delivered'"
        try:
            with Prober(port) as prober:
                # Run 1: start to every delivery done, left alone.
                start = time.monotonic()
                daemon = harness.start_daemon(children, config, folder / "run1.log")
                harness.wait_for(
                    lambda: _quiet(count, recorded_sql) >= events,
                    600,
                    "every transition recorded",
                    daemon.alive,
                    step=0.05,
                )
                recorded = time.monotonic() - start
                harness.wait_for(
                    lambda: _quiet(count, done_sql) >= owed,
                    1800,
                    "everything delivered",
                    daemon.alive,
                    step=0.05,
                )
                delivered = time.monotonic() - start
                children.stop(daemon.proc)
                # Run 2: the same document on a new store, SIGTERM the moment it is recorded
                # (the whole backlog still to deliver), then a restart delivers the rest.
                sections["store"]["url"] = url2
                config = harness.write_sections(folder, sections)
                count2 = counter(url2)
                daemon = harness.start_daemon(children, config, folder / "run2.log")
                harness.wait_for(
                    lambda: _quiet(count2, recorded_sql) >= events,
                    600,
                    "every transition recorded (run 2)",
                    daemon.alive,
                    step=0.01,
                )
                stop_start = time.monotonic()
                daemon.proc.send_signal(signal.SIGTERM)
                daemon.proc.wait(60)
                stopped = time.monotonic() - stop_start
                left = owed - _quiet(count2, done_sql)
                restart = time.monotonic()
                daemon = harness.start_daemon(children, config, folder / "run3.log")
                harness.wait_for(
                    lambda: _quiet(count2, done_sql) >= owed,
                    1800,
                    "everything delivered after the restart",
                    daemon.alive,
                    step=0.05,
                )
                after_restart = time.monotonic() - restart
                children.stop(daemon.proc)
        finally:
            children.stop_all()
        return {
            "recorded_s": recorded,
            "delivered_s": delivered,
            "ms_per_delivery": (delivered - recorded) * 1000 / owed,
            "stop_s": stopped,
            "left": left,
            "after_restart_s": after_restart,
            "teams_posts": len(teams.posts),
            "p50": harness.percentile(prober.latencies, 50),
            "p99": harness.percentile(prober.latencies, 99),
            "max": max(prober.latencies),
            "not_200": prober.failures,
            "probes": len(prober.latencies),
            "refused": prober.refused,
        }


def _quiet(count: Callable[[str], int], sql: str) -> int:
    try:
        return count(sql)
    except Exception:  # the daemon creates the store as we look
        return 0


def claim_ms_per_row(url: str, pending: int) -> float:
    """Part 2: fill `pending` rows for one sink, then claim them 20 at a time (5 claims)."""
    store = Store(url, "vm0", exclusive=True)
    try:
        now = datetime.now(UTC)
        events = tuple(
            ScheduledEvent(f"E{i:06d}", "Reboot", "Scheduled", ("vm0",)) for i in range(pending)
        )
        deliveries = [(Transition(TransitionKind.SCHEDULED, e, now), ("jsonl",)) for e in events]
        store.documents.apply(Document(1, events), deliveries, now)
        later = now + timedelta(seconds=1)
        start, rows = time.perf_counter(), 0
        for _ in range(5):
            rows += len(store.outbox.claim("jsonl", later, later + timedelta(minutes=2)))
        return (time.perf_counter() - start) * 1000 / rows
    finally:
        store.close()


def claims(use_pg: bool, big: int, where: str | None) -> None:
    print("Part 2: one claim (20 rows), ms per row")
    dialects = ["sqlite"] + (["postgresql"] if use_pg else [])
    for dialect in dialects:
        figures = []
        for pending in (100, big):
            with (
                tempfile.TemporaryDirectory(dir=where) as tmp,
                store_url(Path(tmp), dialect != "sqlite") as url,
            ):
                figures.append(claim_ms_per_row(url, pending))
        print(
            f"  {dialect:10}  at 100 pending {figures[0]:.3f} ms  at {big} pending "
            f"{figures[1]:.3f} ms  ratio {figures[1] / figures[0]:.2f}x  (target: ~1x)"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=10000)
    parser.add_argument("--baseline-events", type=int, default=100)
    parser.add_argument("--pg", action="store_true", help="PostgreSQL on 127.0.0.1:5432 too")
    parser.add_argument("--disk", help="a folder for the store and files (default: /dev/shm)")
    args = parser.parse_args()
    where = args.disk or TMP
    print(f"store and JSON lines under {where or tempfile.gettempdir()}")
    store = "PostgreSQL" if args.pg else "SQLite"
    print(f"Part 1: sebridge run ({store}; console, JSON lines, Teams), one document")
    results = {}
    for events in (args.baseline_events, args.events):
        r = results[events] = run_daemon(events, args.pg, where)
        print(
            f"  {events:>6} events: recorded {r['recorded_s']:.1f} s after start, all "
            f"{events * len(SINKS)} delivered {r['delivered_s']:.1f} s after start "
            f"({r['ms_per_delivery']:.2f} ms per delivery); Teams cards in both runs: "
            f"{r['teams_posts']:.0f}"
        )
        print(
            f"          SIGTERM once recorded: exit in {r['stop_s']:.2f} s (limit {LIMIT:.0f} s), "
            f"{r['left']:.0f} left; restarted: delivered in {r['after_restart_s']:.1f} s"
        )
        print(
            f"          /healthz p50 {r['p50'] * 1000:.1f} ms  p99 {r['p99'] * 1000:.1f} ms  "
            f"max {r['max'] * 1000:.1f} ms  not 200: {r['not_200']:.0f} of {r['probes']:.0f} "
            f"answers ({r['refused']:.0f} refused while no daemon ran, between runs)"
        )
    big, base = results[args.events], results[args.baseline_events]
    print(
        f"  ms per delivery, {args.events} over {args.baseline_events} events: "
        f"{big['ms_per_delivery'] / base['ms_per_delivery']:.2f}x (target: ~1x)"
    )
    claims(args.pg, args.events, where)


if __name__ == "__main__":
    main()

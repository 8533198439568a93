"""Fleet approval soak: is any approval IMDS received announced as not sent?

Three real `python -m sebridge run` agents (vm0, vm1, vm2) share one PostgreSQL database of
their own (a private cluster, as fleet_scale.py runs, or --dsn); each has its own IMDS
simulator in this process, all three listing the same events (one EventId, Resources
[vm0, vm1, vm2]: an availability set), a JSON lines sink each and the console off.

Two settings make the race a fleet meets in production come by in minutes rather than days:
- every database round trip (agents and CLI) is --db-latency ms longer (2: a server across
  a network, as a fleet's is; on 127.0.0.1 a tick's transaction takes a millisecond or two,
  and two agents' transactions about one event seldom overlap); a relay in this process
  (the round-trip tap of tests/pg.py, holding the server's answers) adds it;
- `poll_interval` is --poll-interval for vm0 and --drift (1.3 %) / twice that longer for
  vm1 / vm2, so their poll phases slide past one another: agents that tick at once (the
  racing case) come by every minute or so, whatever phases the start-up gave them.
Printed: how often two agents' first polls of a policy event fell within 20 / 150 ms (the
first agent's tick, POST and outcome take about 100 ms at +2 ms a round trip).

Every --every seconds (+-30 %, so events fall at every phase of
the polls) a new Reboot appears on the three simulators at once, approved by one of these
paths in turn:

- policy: Source "User", approved by the policy of every agent's tick at once (each tick's
  transaction inserts the approval: the path that deadlocked);
- cli: `sebridge approve EVENT --config <agent k's config>` (a subprocess, k in turn) once
  an agent recorded the event, after a random part of 1.5 polls;
- cli-pair: two such CLI approvals of one event through two agents at the same moment;
- policy+cli: a "User" event a CLI approval asks for as soon as an agent recorded it (it
  comes after the policy's, which the same transaction recorded: the answer to a second
  request).

The platform, as in production: the first accepted StartRequests starts the event
--approval-delay s later on every simulator (the simulator that took it does so itself; the
others are started then), and it leaves IMDS --active s after that, so "the event left IMDS"
happens. An event no simulator got a StartRequests for is removed after --give-up s.

After --minutes, the bench waits until no event is listed, no approval is open and the outbox
is empty (a claim stuck by a lost outcome ends after its 60 s lease), stops the agents, and
reads every agent's JSON lines, the database, the agents' logs and the simulators. Per event:
did a simulator accept its StartRequests (`Simulator.start_requests`)? Counted: approvals
IMDS received, and among them those reported as not sent (a "problem" transition saying "not
sent to IMDS", in the store or a JSON line, or an approval row in state abandoned or failed:
target 0); events with more than one StartRequests across the simulators (IMDS takes a repeat
as one: reported, allowed); deadlocks (pg_stat_database) and log lines saying "deadlock";
ERROR lines; approval latency, approval recorded -> first StartRequests accepted, p50 / p99.

Baseline in the same run: the same soak against other code, --baseline-src (the `src` folder
of a worktree of the code before the fix): its agents and CLI run with PYTHONPATH set to it
(the new code's run with PYTHONPATH = this checkout's src). Each run gets a new database.

    git worktree add /tmp/sebridge-6995605 6995605
    python bench/fleet_approvals.py [--minutes 10] [--every 3] \
        --baseline-src /tmp/sebridge-6995605/src [--keep DIR]
    git worktree remove --force /tmp/sebridge-6995605

About 10.5 min per soak (the drain: seconds, unless a claim is stuck).

Exit status: 1 if the new code reported an approval IMDS received as not sent; 2 if a
measurement could not be taken (an agent died); 130 when interrupted; else 0.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import tempfile
import time
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

from fleet_rig import ROOT, server, upstream
from harness import BenchError, terminated_on_sigterm
from soak_result import Result
from soak_rig import AGENTS, SlowTap, Soak, code_of, interval, pythonpath

sys.path[:0] = [str(ROOT / "tests")]
import pg  # noqa: E402  tests/pg.py: temporary_database


def soak(label: str, src: Path, admin: str, args: argparse.Namespace, rng: random.Random) -> Result:
    with (
        pythonpath(src),
        pg.temporary_database(admin) as url,
        tempfile.TemporaryDirectory(prefix=f"sebridge-soak-{label}-") as tmp,
    ):
        code = code_of(src)
        print(
            f"{label}: {code} ({src}); {args.minutes:g} min from "
            f"{datetime.now().isoformat(timespec='seconds')}",
            flush=True,
        )
        tap = SlowTap(upstream(url), args.db_latency / 1000)
        run = Soak(label, src, url, tap.url(url), Path(tmp), args, rng)
        try:
            run.start()
            run.run()
            result = run.collect()
        finally:
            run.stop()
            tap.close()
        result.round_trips = tap.round_trips
        result.code = code
        if args.keep:
            result.keep(Path(args.keep) / label)
        print(f"{label}: done, drained in {run.drain_seconds:.0f} s {run.drain_note}", flush=True)
        return result


def report(results: list[Result]) -> None:
    header = ("measure", *(r.soak.label for r in results), "target")
    table = [header]
    rows = [r.rows() for r in results]
    for i, (name, _value, target) in enumerate(rows[0]):
        table.append((name, *(rs[i][1] for rs in rows), target))
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    print()
    for n, row in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("-" * (sum(widths) + 2 * (len(widths) - 1)))
    for r in results:
        print(f"{r.soak.label}: {r.code}{'; ' + r.soak.drain_note if r.soak.drain_note else ''}")
    for r in results:
        for line in r.log_lines("deadlock")[:5] + r.level_lines("ERROR")[:5]:
            print(f"{r.soak.label} log: {line[:300]}")
    for r in results:
        limit = 10 if r.soak.label == "new" else 2
        for line in r.details(limit):
            print(line[:400])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0, help="length of each soak")
    p.add_argument("--every", type=float, default=3.0, help="seconds between events (+-30%%)")
    p.add_argument("--baseline-src", type=Path, help="the src folder of the code to compare")
    p.add_argument("--only", choices=("new", "baseline"), help="run one soak alone")
    p.add_argument("--poll-interval", type=float, default=1.0)
    p.add_argument(
        "--db-latency",
        type=float,
        default=2.0,
        help="ms added to every database round trip (a server across a network)",
    )
    p.add_argument(
        "--drift",
        type=float,
        default=0.013,
        help="vm1 polls this much slower than vm0, vm2 twice as much (0.013: 1.3 %%)",
    )
    p.add_argument(
        "--approval-delay", type=float, default=2.0, help="StartRequests -> Started, seconds"
    )
    p.add_argument("--active", type=float, default=10.0, help="Started -> gone, seconds")
    p.add_argument(
        "--give-up",
        type=float,
        default=90.0,
        help="an event nobody's StartRequests reached leaves after this",
    )
    p.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    p.add_argument("--dsn", help="a superuser URL of a server to use instead of a private one")
    p.add_argument("--keep", help="copy each soak's logs, JSON lines and store rows here")
    args = p.parse_args(argv)
    if args.baseline_src is not None:
        args.baseline_src = args.baseline_src.resolve()
        if not (args.baseline_src / "sebridge" / "__init__.py").is_file():
            p.error(f"--baseline-src {args.baseline_src}: no sebridge package there")
    if args.only == "baseline" and args.baseline_src is None:
        p.error("--only baseline needs --baseline-src")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        os.environ.pop(name, None)  # the agents reach the simulators directly
    sides = [("new", ROOT / "src")]
    if args.baseline_src is not None:
        sides.append(("baseline", args.baseline_src))
    if args.only:
        sides = [s for s in sides if s[0] == args.only]
    print(
        f"sebridge fleet_approvals bench: {AGENTS} agents, poll_interval "
        f"{' / '.join(f'{interval(args, i):g}' for i in range(AGENTS))} s, "
        f"an event every {args.every:g} s +-30 %, database round trips +{args.db_latency:g} ms, "
        f"{args.minutes:g} min per soak, seed {args.seed}",
        flush=True,
    )
    began = time.monotonic()
    results: list[Result] = []
    with terminated_on_sigterm(), server(args.dsn, AGENTS) as admin:
        print(
            f"PostgreSQL: {'--dsn' if args.dsn else 'a private cluster'} at "
            f"{urlsplit(admin).netloc}",
            flush=True,
        )
        try:
            for label, src in sides:
                results.append(soak(label, src, admin, args, random.Random(args.seed)))
        except BenchError as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            return 2
    report(results)
    print(f"\ntotal run time {time.monotonic() - began:.0f} s")
    new = next((r for r in results if r.soak.label == "new"), None)
    return 1 if new is not None and new.bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the agents and the cluster are stopped
        print("interrupted", file=sys.stderr)
        sys.exit(130)

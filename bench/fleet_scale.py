"""Fleet mode with Slack at scale: 10 and 50 `sebridge run` agents on one PostgreSQL database.

Each agent is a real process with its own imds.vm_name and its own IMDS simulator (every
simulator serves the same event under the same EventId, as Azure does for the VMs of one
placement group), `poll_interval = 1.0`, the console off, and the Slack sink in Socket Mode
against one fake Slack app (tests/fakes/slack.py) with `[slack] socket_connections = 2`, so
two agents hold a Socket Mode connection. The agents start one by one at random moments, so
their polls fall at independent phases. Every database connection goes through a tap that
counts round trips (tests/pg.py; it adds a few ms to the latencies at 50 agents, see
bench/README.md). For each fleet size (`--agents 10,50`):

1. idle: database round trips per agent per second over --idle-seconds (target <= 0.05);
2. event -> the one Slack message: the event appears on every simulator at one instant (a
   random phase of the polls); latency = the fake Slack's arrival time of the chat.postMessage
   carrying it (metadata event_payload.event_id) - that instant (target p99 <= 1100 ms,
   poll interval + 100 ms);
3. click -> IMDS POST: Approve clicked through the fake's Socket Mode; latency = the arrival
   of the StartRequests POST at whichever simulator got it - the moment the envelope was sent
   (target p99 <= 200 ms), (a) for events every agent lists (the clicked holder can post
   itself) and (b) for events only agents without a Socket Mode connection list (the holder
   stores the approval, another agent, woken through LISTEN/NOTIFY, posts);
4. duplicates: Slack messages per event, thread replies per transition, StartRequests POSTs
   per approval over all simulators (target 1 each, 0 duplicates).

--events events of each case per size, one at a time (click once every listing agent polled
and the database went quiet, at a random phase too; the event is then completed and its
"completed" reply awaited). Also printed: the idle round trips by statement, the fleet's round
trips per event. The first size is the baseline: the ratio column is last/first.

50 agents need 150+ connections (work, LISTEN, duties): the bench runs a private PostgreSQL
cluster of this machine's server binaries (initdb into a temporary directory, as the
`postgres` user when run as root; max_connections 300; removed at the end), or uses --dsn.

    python bench/fleet_scale.py [--agents 10,50] [--events 30] [--idle-seconds 130]
        [--seed N] [--dsn postgresql://user@host:port/db]

About 5 min for 10 agents and 7 min for 50 on a 2-core machine. Exit status 0 whatever the
figures; 1 if a measurement could not be taken (an agent died, a message never came).
"""

from __future__ import annotations

import argparse
import contextlib
import os
import random
import resource
import sys
import tempfile
import time
import uuid
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from textwrap import shorten
from urllib.parse import urlsplit

from fleet_rig import APPROVER, INTERVAL, SOCKET_CONNECTIONS, Fleet, server, upstream
from harness import BenchError, percentile, terminated_on_sigterm

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from tests.fakes.slack import FakeCall  # noqa: E402

import pg  # noqa: E402  tests/pg.py: temporary databases, the round-trip tap
from helpers import EVENTS_PATH, wait_until  # noqa: E402
from test_fleet_slack import OPS, parents  # noqa: E402

TARGET_IDLE = 0.05  # round trips per agent per second
TARGET_MESSAGE_MS = INTERVAL * 1000 + 100
TARGET_CLICK_MS = 200.0
LEAD = 0.05  # an event is scheduled on every simulator to appear this long after


# -- one fleet ------------------------------------------------------------------------------


@dataclass
class Results:
    agents: int
    startup: float = 0.0  # the first Popen -> the last agent polling and 2 sockets open
    connections: int = 0  # sessions on the database, counted before the events
    idle: float = 0.0  # round trips per agent per second
    idle_seconds: float = 0.0
    idle_sql: Counter[str] = field(default_factory=Counter)  # idle round trips by SQL
    to_message: list[float] = field(default_factory=list)
    poll_wait: list[float] = field(default_factory=list)  # appeared -> first GET listing it
    processing: list[float] = field(default_factory=list)  # that GET -> the message at Slack
    click_all: list[float] = field(default_factory=list)  # case (a)
    click_others: list[float] = field(default_factory=list)  # case (b)
    posted_by_clicked: int = 0  # case (a): POSTs sent by the agent that got the click
    messages: list[int] = field(default_factory=list)  # parents per event
    replies: Counter[int] = field(default_factory=Counter)  # {replies: transitions with as many}
    reply_kinds: Counter[str] = field(default_factory=Counter)
    posts: list[int] = field(default_factory=list)  # StartRequests POSTs per approval
    event_trips: float = 0.0  # round trips of the whole fleet per event (its life, start to end)
    bench_cpu: float = 0.0  # CPU seconds of this process per second, during the events
    load: float = 0.0  # 1-minute load average at the end of the events
    phase_gap: float = 0.0  # the largest gap between the agents' poll phases (seconds)


def has_kind(replies: Counter[str], kind: str) -> bool:
    return any(key.startswith(kind + "@") for key in replies)


@dataclass
class Timed:
    event_id: str
    to_message: float  # the event appeared -> its chat.postMessage reached Slack
    poll_wait: float  # the event appeared -> the first GET at a simulator listing it
    click: float  # the envelope sent -> the StartRequests POST reached a simulator
    poster: int  # the agent whose simulator got that POST
    clicked: int  # the agent that got the click (its log says "approved ... from Slack")


def one_event(fleet: Fleet, listed: list[int], rng: random.Random) -> Timed:
    """Schedule an event on the simulators of `listed`, click Approve, complete it."""
    event_id = str(uuid.uuid4()).upper()
    names = [fleet.names[i] for i in listed]

    def alive_and(found: Callable[[], object]) -> object:
        return fleet.check_alive() or found()

    time.sleep(rng.random() * INTERVAL)  # a random phase of the polls
    appears = time.time() + LEAD
    for i in listed:
        at = max(0.0, appears - time.time())
        fleet.sims[i].schedule("Reboot", event_id=event_id, resources=names, at=at)
    call = wait_until(lambda: alive_and(lambda: fleet.parent_call(event_id)), 30, 0.02)
    assert isinstance(call, FakeCall)
    message = wait_until(lambda: parents(fleet.slack, event_id), 10, 0.02)[0]
    # Clicked once every agent listing it has seen it (a person takes longer than a poll).
    wait_until(lambda: alive_and(lambda: fleet.polled_since(listed, appears)), 10, 0.02)
    fleet.quiet()
    time.sleep(rng.random() * INTERVAL)
    payload = fleet.slack.block_actions_payload(
        "approve", value=event_id, user_id=APPROVER, channel=OPS, message_ts=message.ts
    )
    envelope = fleet.slack.send_envelope(payload, wait=10)
    sent = fleet.slack.socket.envelopes[envelope].at
    posts = wait_until(lambda: alive_and(lambda: fleet.posts(event_id)), 30, 0.02)
    assert isinstance(posts, list)
    poster, post = min(posts, key=lambda p: p[1].at)
    clicked = wait_until(lambda: fleet.clicked(event_id), 10, message="the clicked agent's log")[0]
    wait_until(lambda: alive_and(lambda: has_kind(fleet.replies(event_id), "approved")), 30)
    for i in listed:
        fleet.sims[i].complete(event_id)
    wait_until(lambda: alive_and(lambda: has_kind(fleet.replies(event_id), "completed")), 30)
    first_get = min(
        r.at
        for i in listed
        for r in fleet.sims[i].requests
        if r.method == "GET" and r.path == EVENTS_PATH and r.at >= appears
    )
    return Timed(event_id, call.at - appears, first_get - appears, post.at - sent, poster, clicked)


def count_duplicates(fleet: Fleet, events: list[str], results: Results) -> None:
    for event_id in events:
        results.messages.append(len(parents(fleet.slack, event_id)))
        replies = fleet.replies(event_id)
        results.replies.update(replies.values())
        results.reply_kinds.update(key.split("@")[0] for key in replies.elements())
        results.posts.append(len(fleet.posts(event_id)))


def take_events(fleet: Fleet, count: int, rng: random.Random, results: Results) -> None:
    """`count` events of each case, alternating so both meet the same conditions; then
    the duplicates."""
    holders = fleet.holders()
    others = [i for i in range(fleet.size) if i not in holders]
    events: list[str] = []
    cpu, wall = resource.getrusage(resource.RUSAGE_SELF), time.monotonic()
    trips = fleet.tap.round_trips
    for n in range(2 * count):
        case_a = n % 2 == 0
        timed = one_event(fleet, list(range(fleet.size)) if case_a else others, rng)
        events.append(timed.event_id)
        results.to_message.append(timed.to_message)
        results.poll_wait.append(timed.poll_wait)
        results.processing.append(timed.to_message - timed.poll_wait)
        if case_a:
            results.click_all.append(timed.click)
            results.posted_by_clicked += timed.poster == timed.clicked
        else:
            results.click_others.append(timed.click)
    results.event_trips = (fleet.tap.round_trips - trips) / (2 * count)
    used = resource.getrusage(resource.RUSAGE_SELF)
    busy = used.ru_utime + used.ru_stime - cpu.ru_utime - cpu.ru_stime
    results.bench_cpu = busy / (time.monotonic() - wall)
    results.load = os.getloadavg()[0]
    results.phase_gap = fleet.phase_gap()
    time.sleep(3.0)  # late duplicates would show up by now
    count_duplicates(fleet, events, results)


def take_idle(fleet: Fleet, seconds: float, results: Results) -> None:
    """Round trips per agent per second, and by statement, over `seconds` of nothing."""
    tap = fleet.tap
    fleet.quiet(1.0, 10.0)
    fleet.check_alive()
    before, statements, start = tap.round_trips, tap.statements_so_far(), time.monotonic()
    time.sleep(seconds)
    results.idle_seconds = time.monotonic() - start
    results.idle = (tap.round_trips - before) / fleet.size / results.idle_seconds
    results.idle_sql = tap.statements_so_far() - statements
    fleet.check_alive()


def measure(size: int, args: argparse.Namespace, admin: str, rng: random.Random) -> Results:
    """Start a fleet of `size` agents on a new database, take every measure, stop it."""
    results = Results(size)
    print(f"{size} agents: starting ...", flush=True)
    with (
        pg.temporary_database(admin) as database,
        tempfile.TemporaryDirectory(prefix="sebridge-fleet-") as tmp,
        contextlib.ExitStack() as stack,
    ):
        tap = pg.RoundTripTap(upstream(admin))
        stack.callback(tap.close)
        fleet = Fleet(size, Path(tmp), database, tap)
        stack.callback(fleet.stop)
        began = time.monotonic()
        fleet.start_agents(rng)
        results.startup = time.monotonic() - began
        sessions = "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database()"
        results.connections = int(str(pg.query(database, sessions)[0][0]))
        print(
            f"{size} agents: up in {results.startup:.0f} s, {results.connections} sessions, "
            f"Socket Mode held by {[fleet.names[i] for i in fleet.holders()]}; "
            f"{2 * args.events} events ...",
            flush=True,
        )
        take_events(fleet, args.events, rng, results)
        print(f"{size} agents: idle for {args.idle_seconds:g} s ...", flush=True)
        take_idle(fleet, args.idle_seconds, results)
    return results


# -- the report -----------------------------------------------------------------------------


@dataclass
class Figure:
    name: str
    value: float
    spec: str  # format spec of the value
    target: str = ""
    met: bool | None = None  # None: no target


def latency_figures(label: str, values: Sequence[float], target: float | None) -> list[Figure]:
    """p50, p99 (compared with `target`, in ms) and max of `values` (seconds), in ms."""
    rows = []
    for name, p in (("p50", 50.0), ("p99", 99.0), ("max", 100.0)):
        value = 1000 * percentile(values, p)
        if name == "p99" and target is not None:
            rows.append(
                Figure(f"{label} {name} (ms)", value, ".1f", f"<= {target:g}", value <= target)
            )
        else:
            rows.append(Figure(f"{label} {name} (ms)", value, ".1f"))
    return rows


def figures(r: Results) -> list[Figure]:
    """Every figure of one fleet, in the order printed."""
    duplicates = (
        sum(max(0, n - 1) for n in r.messages)
        + sum((n - 1) * k for n, k in r.replies.items() if n > 1)
        + sum(max(0, n - 1) for n in r.posts)
    )
    missing = r.messages.count(0) + r.posts.count(0)
    return [
        Figure(
            "idle round trips / agent / s",
            r.idle,
            ".4f",
            f"<= {TARGET_IDLE}",
            r.idle <= TARGET_IDLE,
        ),
        *latency_figures("event -> message", r.to_message, TARGET_MESSAGE_MS),
        *latency_figures("  of it: wait for a poll", r.poll_wait, None),
        *latency_figures("  of it: poll -> message", r.processing, None),
        *latency_figures("click -> POST (a) all list it", r.click_all, TARGET_CLICK_MS),
        *latency_figures("click -> POST (b) non-holders", r.click_others, TARGET_CLICK_MS),
        Figure("fleet's round trips per event (its life)", r.event_trips, ".0f"),
        Figure("duplicates (messages, replies, POSTs)", duplicates, "d", "0", duplicates == 0),
        Figure("missing (messages, POSTs)", missing, "d", "0", missing == 0),
        Figure("largest gap between poll phases (ms)", 1000 * r.phase_gap, ".0f"),
        Figure("start-up, one by one (s)", r.startup, ".1f"),
        Figure("database sessions", r.connections, "d"),
        Figure("bench process CPU (s per s) in events", r.bench_cpu, ".3f"),
        Figure("load average (1 min) after the events", r.load, ".2f"),
    ]


def verdict(rows: list[Figure], sizes: list[int]) -> str:
    missed = [str(n) for n, f in zip(sizes, rows, strict=True) if f.met is False]
    if all(f.met is None for f in rows):
        return ""
    return f"MISS at {','.join(missed)}" if missed else "PASS"


def report(runs: list[Results]) -> None:
    """One table: a column per fleet size, the ratio last/first, the target."""
    sizes = [r.agents for r in runs]
    tables = [figures(r) for r in runs]
    head = ["figure", *(f"{n} agents" for n in sizes)]
    if len(runs) > 1:
        head.append(f"{sizes[-1]}/{sizes[0]}")
    head += ["target", ""]
    body = []
    for i, first in enumerate(tables[0]):
        row = [t[i] for t in tables]
        cells = [first.name, *(format(f.value, f.spec) for f in row)]
        if len(runs) > 1:
            cells.append(f"{row[-1].value / row[0].value:.2f}x" if row[0].value else "-")
        body.append([*cells, first.target, verdict(row, sizes)])
    widths = [max(len(r[c]) for r in [head, *body]) for c in range(len(head))]
    print()
    for n, cells in enumerate([head, *body]):
        line = [cells[0].ljust(widths[0])]
        line += [c.rjust(w) for c, w in zip(cells[1:-1], widths[1:-1], strict=True)]
        print("  ".join([*line, cells[-1]]).rstrip())
        if n == 0:
            print("-" * (sum(widths) + 2 * len(widths)))
    print()
    for r in runs:
        print(
            f"{r.agents} agents: {len(r.to_message)} events ({len(r.click_all)} of case a, "
            f"{len(r.click_others)} of case b); messages per event {dict(Counter(r.messages))}; "
            f"replies per transition {dict(r.replies)} by kind {dict(r.reply_kinds)}; "
            f"StartRequests POSTs per approval {dict(Counter(r.posts))}; case (a) POSTs sent "
            f"by the clicked agent itself {r.posted_by_clicked}/{len(r.click_all)}; idle window "
            f"{r.idle_seconds:.0f} s"
        )
    for r in runs:
        print(f"{r.agents} agents, idle round trips by statement, per agent per second:")
        kinds: Counter[str] = Counter()  # the duty waits differ only in their lock keys
        for sql, n in r.idle_sql.items():
            kinds[shorten(" ".join(sql.split()), 80)] += n
        for sql, n in kinds.most_common():
            print(f"  {n / r.agents / r.idle_seconds:.4f}  ({n:4d} in all)  {sql}")
    if len(runs) > 1:
        print(
            f"Baseline: the {sizes[0]}-agent fleet of the same run; the column {sizes[-1]}/"
            f"{sizes[0]} is the {sizes[-1]}-agent figure over the baseline's (growth)."
        )
    print(
        "Dict counts read {value: how many}, e.g. messages per event {1: 60}: 60 events had "
        "1 message each. Event -> message is timed\non every event (cases a and b); wait for "
        "a poll: the event appears -> the first GET of a simulator listing it. Click -> POST "
        "(a):\nevery agent lists the event; (b): only agents without a Socket Mode "
        "connection list it."
    )


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--agents",
        type=lambda text: [int(x) for x in text.split(",")],
        default=[10, 50],
        help="fleet sizes, comma-separated; the first is the baseline (default 10,50)",
    )
    parser.add_argument("--events", type=int, default=30, help="events per case per size")
    parser.add_argument("--idle-seconds", type=float, default=130.0)
    parser.add_argument("--seed", type=int, default=None)
    parser.add_argument("--dsn", help="a superuser URL of an existing server (else a private one)")
    args = parser.parse_args(argv)
    if min(args.agents) < SOCKET_CONNECTIONS + 1:
        parser.error(f"each fleet needs {SOCKET_CONNECTIONS + 1} agents or more")
    if args.seed is None:
        args.seed = random.randrange(10**6)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        os.environ.pop(name, None)  # the agents reach the fakes directly
    print(
        f"sebridge fleet_scale bench: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"fleets of {args.agents} agents, poll_interval {INTERVAL:g} s, "
        f"{args.events} events per case, seed {args.seed}",
        flush=True,
    )
    began = time.monotonic()
    runs: list[Results] = []
    with terminated_on_sigterm(), server(args.dsn, max(args.agents)) as admin:
        where = "--dsn" if args.dsn else "a private cluster"
        print(f"PostgreSQL: {where} at {urlsplit(admin).netloc}", flush=True)
        try:
            runs += [measure(size, args, admin, rng) for size in args.agents]
        except (BenchError, AssertionError) as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            return 1
    report(runs)
    print(f"\ntotal run time {time.monotonic() - began:.0f} s")
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the children and the cluster are stopped
        print("interrupted", file=sys.stderr)
        sys.exit(130)

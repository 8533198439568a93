"""Jira figures of `sebridge run`: calls per event lifecycle, status -> IMDS POST, idle
watcher requests, memory.

The fake Jira (tests/fakes/jira.py, Cloud flavour: serverInfo, /search/jql, issues,
comments, transitions, changelog) and the IMDS simulator run in this process on 127.0.0.1;
the daemon runs as a child process, `python -m sebridge run --config FILE`, with its store
in a temporary directory. Instants are wall-clock time read in this process: the fake and
the simulator note when each request arrived.

1. calls: two events, one after the other, through scheduled -> approved (a person moves
   the issue to approve_status) -> started -> completed; the sink's HTTP calls per
   transition (the first event of a process also learns the done transition's id), the
   watcher's searches while an event was open, and the once-per-process calls apart.
2. approve: a person moves an issue to approve_status -> the simulator receives the
   StartRequests POST, over --events events, at [jira] poll_interval --jira-poll.
3. idle: the daemon with no event for --idle seconds: requests to Jira, per hour.
4. rss: VmRSS of a console + Jira daemon after a warm-up (events, approvals), beside a
   console-only daemon given the same events at the same time (the baseline).

    python bench/jira_calls.py            # about 2 min
    python bench/jira_calls.py --quick    # about 40 s

Prints each figure with its target and PASS/MISS. Exit status 0 whatever the figures; 1 only
if a measurement could not be taken; 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import sys
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TypeVar

import harness
from harness import (
    EVENTS_PATH,
    Children,
    Daemon,
    Report,
    Step,
    daemon_sections,
    ms,
    percentile,
    run_parts,
    sample,
    simulator,
    write_sections,
)
from sebridge.imds.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the fake Jira lives in tests/fakes
from tests.fakes.jira import Call, FakeJira  # noqa: E402

T = TypeVar("T")
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy")
CREATE_CALLS = 3  # targets: the first transition's calls, each later one's
LATER_CALLS = 2
LATENCY_SLACK = 0.100  # status -> POST p99 <= jira poll_interval + this
RSS_MB = 50.0


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float,
    what: str,
    alive: Callable[[], None] = lambda: None,
) -> T:
    """harness.wait_for as this bench waits: a look every 2 ms, `alive` at each."""
    return harness.wait_for(predicate, timeout, what, alive, step=0.002, alive_every=0.0)


def write_config(
    directory: Path, sim: Simulator, jira: FakeJira | None, args: argparse.Namespace
) -> Path:
    sections = daemon_sections(directory, sim, args.interval, console=True)
    if jira is not None:
        sections["jira"] = {
            "url": jira.url, "email": jira.email, "api_token": jira.token, "project": "OPS",
            "approve_status": "Approved", "poll_interval": args.jira_poll,
        }  # fmt: skip
    directory.mkdir(parents=True, exist_ok=True)
    return write_sections(directory, sections)


def start_daemon(children: Children, config: Path, sim: Simulator) -> Daemon:
    """The daemon of `config`, its log beside it, once it has polled twice."""
    daemon = harness.start_daemon(children, config, config.parent / "daemon.log")
    gets = lambda: sum(1 for r in sim.requests if r.path == EVENTS_PATH)  # noqa: E731
    wait_for(lambda: gets() >= 2, 30, "the daemon's first polls", daemon.alive)
    return daemon


def is_watcher(call: Call) -> bool:
    return call.path.startswith("search") and "status =" in (call.query.get("jql") or [""])[0]


def quiet(jira: FakeJira, alive: Callable[[], None], for_seconds: float = 0.3) -> None:
    """Until the sink has made no call for `for_seconds` (watcher searches do not count)."""

    def settled() -> bool:
        sink = [c for c in jira.calls if not is_watcher(c)]
        return not sink or time.time() - sink[-1].at >= for_seconds

    wait_for(settled, 30, "the sink to settle", alive)


def issue_key(jira: FakeJira, event_id: str, alive: Callable[[], None]) -> str:
    return str(wait_for(lambda: jira.issues_of(event_id), 30, "the issue", alive)[0]["key"])


def comment_starting(jira: FakeJira, key: str, start: str) -> Callable[[], bool]:
    return lambda: any(c.startswith(start) for c in jira.comments(key))


# -- 1. calls per lifecycle -----------------------------------------------------------------


def lifecycle(jira: FakeJira, sim: Simulator, alive: Callable[[], None]) -> list[tuple[str, int]]:
    """One event, scheduled -> approved (moved in Jira) -> started -> completed; marks."""
    marks: list[tuple[str, int]] = [("", len(jira.calls))]
    event_id = sim.schedule("Reboot")
    issue = wait_for(lambda: jira.issues_of(event_id), 30, "the issue", alive)[0]
    key = issue["key"]
    quiet(jira, alive)
    marks.append(("scheduled", len(jira.calls)))
    jira.move(key, "Approved", by="Alice Example")
    wait_for(comment_starting(jira, key, "Approved by"), 30, "the approved comment", alive)
    quiet(jira, alive)
    marks.append(("approved", len(jira.calls)))
    sim.start_event(event_id)
    wait_for(comment_starting(jira, key, "Started"), 30, "the started comment", alive)
    quiet(jira, alive)
    marks.append(("started", len(jira.calls)))
    sim.complete(event_id)
    wait_for(lambda: issue["status"] == "Done", 30, "the issue Done", alive)
    quiet(jira, alive)
    marks.append(("completed", len(jira.calls)))
    return marks


def measure_calls(report: Report, args: argparse.Namespace, children: Children, work: Path) -> None:
    with FakeJira("cloud") as jira, simulator() as sim:
        daemon = start_daemon(children, write_config(work / "calls", sim, jira, args), sim)
        runs = [lifecycle(jira, sim, daemon.alive) for _ in range(2)]
        calls = list(jira.calls)
        children.stop(daemon.proc)
    once = ("serverInfo", "field")
    report.section("1. HTTP calls to Jira per event lifecycle (Cloud flavour)")
    for title, marks in zip(("first event of the process", "second event"), runs, strict=True):
        report.row(title, "")
        for i in range(1, len(marks)):
            (_, start), (name, end) = marks[i - 1], marks[i]
            sink = [c for c in calls[start:end] if c.path not in once and not is_watcher(c)]
            target = CREATE_CALLS if i == 1 else LATER_CALLS
            detail = ", ".join(f"{c.method} {c.path}" for c in sink)
            report.row(f"  {name}: {detail}", str(len(sink)), f"<= {target}", len(sink) <= target)
    watcher = [c for c in calls if is_watcher(c)]
    report.row("watcher searches while an event was open (one per round)", str(len(watcher)))
    report.row(
        "once per client and process: "
        + ", ".join(f"{c.method} {c.path}" for c in calls if c.path in once),
        str(sum(1 for c in calls if c.path in once)),
        "(sink and watcher clients)",
    )


# -- 2. status -> IMDS POST ----------------------------------------------------------------


def measure_approve(
    report: Report, args: argparse.Namespace, children: Children, work: Path
) -> None:
    latencies: list[float] = []
    with FakeJira("cloud") as jira, simulator() as sim:
        daemon = start_daemon(children, write_config(work / "approve", sim, jira, args), sim)
        alive = daemon.alive
        for i in range(args.events + 1):
            event_id = sim.schedule("Reboot")
            key = issue_key(jira, event_id, alive)
            # Move at a random-ish phase of the watcher's round: what a person does.
            time.sleep((i * 0.37) % args.jira_poll)
            moved = time.time()
            jira.move(key, "Approved")
            post = wait_for(
                lambda e=event_id: next((p for p in sim.posts if e in p.ids), None),
                30,
                "the StartRequests POST",
                alive,
            )
            if i > 0:  # the first warms the watcher's client up (serverInfo, field list)
                latencies.append(post.at - moved)
            sim.complete(event_id)
        children.stop(daemon.proc)
    p50, p99 = percentile(latencies, 50), percentile(latencies, 99)
    target = args.jira_poll + LATENCY_SLACK
    report.section(f"2. Jira status -> IMDS POST, {len(latencies)} events")
    report.row(f"p50 at poll_interval {args.jira_poll:g} s", ms(p50))
    report.row(
        f"p99 at poll_interval {args.jira_poll:g} s", ms(p99), f"<= {ms(target)}", p99 <= target
    )
    report.row(
        "baseline: the watcher's interval alone (mean wait interval/2)", ms(args.jira_poll / 2)
    )


# -- 3. idle watcher ------------------------------------------------------------------------


def measure_idle(report: Report, args: argparse.Namespace, children: Children, work: Path) -> None:
    with FakeJira("cloud") as jira, Simulator(port=0, vm_name="vm0") as sim:
        daemon = start_daemon(children, write_config(work / "idle", sim, jira, args), sim)
        before, began = len(jira.calls), time.monotonic()
        time.sleep(args.idle)
        daemon.alive()
        idle_calls, span = len(jira.calls) - before, time.monotonic() - began
        children.stop(daemon.proc)
    rounds = span / args.jira_poll
    report.section(f"3. watcher with no open event, {span:.0f} s ({rounds:.0f} rounds)")
    per_hour = idle_calls * 3600 / span
    report.row("requests to Jira per hour", f"{per_hour:.0f}", "0", per_hour == 0)
    report.row("baseline: one search per round would be", f"{3600 / args.jira_poll:.0f}/h")


# -- 4. memory ------------------------------------------------------------------------------


def measure_rss(report: Report, args: argparse.Namespace, children: Children, work: Path) -> None:
    with FakeJira("cloud") as jira, simulator() as sim, simulator() as base_sim:
        daemon = start_daemon(children, write_config(work / "rss", sim, jira, args), sim)
        base = start_daemon(
            children, write_config(work / "rss-base", base_sim, None, args), base_sim
        )
        for _ in range(5):  # the same events for both
            event_id = sim.schedule("Reboot")
            base_sim.schedule("Reboot", event_id=event_id)
            key = issue_key(jira, event_id, daemon.alive)
            jira.move(key, "Approved")
            wait_for(lambda e=event_id: e in sim.start_requests, 30, "the POST", daemon.alive)
            sim.complete(event_id)
            base_sim.complete(event_id)
        time.sleep(args.rss_warmup)
        daemon.alive()
        base.alive()
        s, b = sample(daemon.proc.pid), sample(base.proc.pid)
        children.stop(daemon.proc)
        children.stop(base.proc)
    mb, base_mb = s.rss_kib * 1024 / 1e6, b.rss_kib * 1024 / 1e6
    report.section("4. memory after warm-up (5 events approved from Jira)")
    report.row("VmRSS, console + Jira", f"{mb:.1f} MB", f"<= {RSS_MB:g} MB", mb <= RSS_MB)
    report.row("VmRSS, console only (baseline, same events)", f"{base_mb:.1f} MB")
    report.row("ratio Jira / baseline", f"{s.rss_kib / b.rss_kib:.2f}x")


# -- main -----------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Jira figures of `sebridge run` (fake Jira).")
    parser.add_argument("--events", type=int, default=40, help="events timed in part 2 (40)")
    parser.add_argument("--interval", type=float, default=0.2, help="IMDS poll_interval (0.2)")
    parser.add_argument("--jira-poll", type=float, default=1.0, help="[jira] poll_interval (1.0)")
    parser.add_argument("--idle", type=float, default=30.0, help="idle seconds in part 3 (30)")
    parser.add_argument("--rss-warmup", type=float, default=5.0, help="idle s before RSS (5)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 10 events, 10 s idle")
    parser.add_argument(
        "--only", choices=("calls", "approve", "idle", "rss"), action="append", help="only these"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.idle, args.rss_warmup = 10, 10.0, 2.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for name in PROXY_VARS:  # loopback only
        os.environ.pop(name, None)
    os.environ.pop("SEBRIDGE_CONFIG", None)
    parts = args.only or ["calls", "approve", "idle", "rss"]
    report = Report()
    measures = {
        "calls": measure_calls,
        "approve": measure_approve,
        "idle": measure_idle,
        "rss": measure_rss,
    }
    steps: list[Step] = [  # in the order of --only
        (part, part, lambda c, w, m=measures[part]: m(report, args, c, w)) for part in parts
    ]
    header = f"sebridge Jira bench: python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    return run_parts(header, report, steps, parts, "sebridge-jira-")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)

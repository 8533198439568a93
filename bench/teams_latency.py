"""Teams and approval-link figures of `sebridge run`, against the fake Teams and the simulator.

The fake Workflows webhook (tests/fakes/teams.py) and the IMDS simulator run in this process
on 127.0.0.1; each daemon is a child process, `python -m sebridge run --config FILE`, with
[http] public_url set (approval links on) and its store in a temporary directory. Instants
are wall-clock time (time.time()) read in this process or noted by the fake and the
simulator on arrival.

1. card: the simulator's document changes (a new Reboot) -> the card's POST arrives at the
   Workflows webhook, poll_interval 1 s, random phase. Baseline: the same daemon's JSON
   lines sink writing the same event's line (same poll, same dispatcher).
2. approve: an approval link's form POST (sent by this process) -> the daemon's StartRequests
   POST arrives at the simulator, over >= 100 approvals. Baseline: GET /healthz on the same
   server in the same run (the HTTP server's own floor).
3. page: GET of an approval link (the confirmation page). Baseline: GET /healthz.
4. rss: VmRSS of a daemon with console + Teams (+ the approval page) after a warm-up,
   beside a console-only daemon given the same events at the same time.

    python bench/teams_latency.py            # about 2 min
    python bench/teams_latency.py --quick    # about 40 s smoke run

Exit status 0 whatever the figures; 1 only if a measurement could not be taken.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import requests

from harness import (
    PROXY_VARS,
    BenchError,
    Children,
    Daemon,
    JsonlTail,
    ProcSample,
    Report,
    Step,
    daemon_sections,
    free_port,
    mib,
    p50_p99,
    percentile,
    run_parts,
    sample,
    simulator,
    start_daemon,
    start_requests_post,
    wait_first_polls,
    wait_for,
    write_sections,
)
from sebridge.imds.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the fake Teams lives in tests/fakes
from tests.fakes.teams import FakeTeams, Shown  # noqa: E402

PUBLIC = "https://sebridge.example.net"

# Targets.
CARD_S = 0.050  # document change -> Workflows POST, p99 <= poll interval + 50 ms
APPROVE_P99_S = 0.050  # link POST -> IMDS POST, p99
PAGE_P99_S = 0.020  # approval page GET, p99
RSS_MB = 40.0  # VmRSS with console + Teams after warm-up, MB (10**6 bytes)


def write_config(
    directory: Path,
    sim: Simulator,
    interval: float,
    port: int,
    *,
    teams: FakeTeams | None,
    console: bool = False,
    jsonl: Path | None = None,
) -> Path:
    sections = daemon_sections(directory, sim, interval, console=console)
    sections["http"] = {"listen": f"127.0.0.1:{port}", "public_url": PUBLIC}
    if jsonl is not None:
        sections["jsonl"] = {"path": str(jsonl)}
    if teams is not None:
        sections["teams"] = {"webhook_url": teams.workflows_url}
    return write_sections(directory, sections)


def wait_ready(daemon: Daemon, sim: Simulator, http: requests.Session, port: int) -> None:
    wait_first_polls(daemon, sim)

    def healthy() -> bool:
        try:
            return http.get(f"http://127.0.0.1:{port}/healthz", timeout=1).status_code == 200
        except requests.RequestException:
            return False

    wait_for(healthy, 30, "the HTTP server", daemon.alive, step=0.05)


def card_of(teams: FakeTeams, event_id: str, start: int = 0) -> Shown | None:
    for shown in teams.shown[start:]:
        facts = next((b for b in shown.card.get("body", []) if b.get("type") == "FactSet"), None)
        if facts and any(f.get("value") == event_id for f in facts["facts"]):
            return shown
    return None


def link_path(shown: Shown) -> str:
    url = str(shown.card["actions"][0]["url"])
    if not url.startswith(PUBLIC + "/approve/"):
        raise BenchError(f"unexpected approval link {url!r}")
    return url[len(PUBLIC) :]


def session() -> requests.Session:
    http = requests.Session()
    http.trust_env = False
    return http


# -- 1. document change -> card at the Workflows webhook ---------------------------------


@dataclass
class CardTiming:
    changed: float
    posted: float  # the card's POST arrived at the fake
    line: float  # the same event's JSONL line became visible (baseline sink)


def measure_card(
    args: argparse.Namespace, children: Children, work: Path, rng: random.Random
) -> list[CardTiming]:
    directory = work / "card"
    directory.mkdir()
    timings: list[CardTiming] = []
    port = free_port()
    jsonl = directory / "events.jsonl"
    with FakeTeams() as teams, simulator() as sim:
        config = write_config(directory, sim, args.interval, port, teams=teams, jsonl=jsonl)
        daemon = start_daemon(children, config, directory / "daemon.log")
        tail = JsonlTail(jsonl)
        try:
            wait_ready(daemon, sim, session(), port)
            for i in range(args.warmup_events + args.events):
                time.sleep(rng.uniform(0, args.interval))  # a random phase of the polling
                start = len(teams.posts)
                changed = time.time()
                event_id = sim.schedule("Reboot")
                line_at, _ = tail.wait_for(
                    lambda r, e=event_id: (
                        r.get("event_id") == e and r.get("transition") == "scheduled"
                    ),
                    5 * args.interval + 10,
                    daemon.alive,
                )
                post = wait_for(
                    lambda s=start, e=event_id: next(
                        (p for p in teams.posts[s:] if e in str(p.body)), None
                    ),
                    5 * args.interval + 10,
                    f"the card of {event_id}",
                    daemon.alive,
                )
                sim.complete(event_id)
                wait_for(
                    lambda e=event_id: sum(e in str(p.body) for p in teams.posts) >= 2,
                    5 * args.interval + 10,
                    "the cancelled follow-up",
                    daemon.alive,
                )
                if i >= args.warmup_events:
                    timings.append(CardTiming(changed, post.at, line_at))
        finally:
            children.stop(daemon.proc)
    return timings


def report_card(report: Report, args: argparse.Namespace, timings: list[CardTiming]) -> None:
    latency = [t.posted - t.changed for t in timings]
    baseline = [t.line - t.changed for t in timings]
    report.section(
        f"1. document change -> card POST at the Workflows webhook ({len(timings)} events, "
        f"poll {args.interval:g} s)"
    )
    report.percentiles(latency, (50, 99), args.interval + CARD_S)
    report.row("baseline: JSON lines sink, same daemon, p50 / p99", p50_p99(baseline))
    extra = [t.posted - t.line for t in timings]
    report.row(
        "Teams after the JSONL line p50 / p99", p50_p99(extra), "(card rendering + HTTP POST)"
    )


# -- 2 and 3. approval link POST -> IMDS POST; page GET -------------------------------------


@dataclass
class LinkRun:
    approve: list[float]  # form POST sent -> StartRequests at the simulator
    answered: list[float]  # form POST sent -> page received
    page: list[float]  # GET of the confirmation page, round trip
    healthz: list[float]  # GET /healthz, round trip (baseline)
    rss: ProcSample | None


def measure_links(args: argparse.Namespace, children: Children, work: Path) -> LinkRun:
    directory = work / "links"
    directory.mkdir()
    run = LinkRun([], [], [], [], None)
    port = free_port()
    base = f"http://127.0.0.1:{port}"
    http = session()
    with FakeTeams() as teams, simulator() as sim:
        config = write_config(directory, sim, args.click_poll, port, teams=teams)
        daemon = start_daemon(children, config, directory / "daemon.log")
        try:
            wait_ready(daemon, sim, http, port)
            for i in range(args.warmup + args.approvals):
                start = len(teams.shown)
                event_id = sim.schedule("Reboot")
                shown = wait_for(
                    lambda e=event_id, s=start: card_of(teams, e, s),
                    10,
                    f"the card of {event_id}",
                    daemon.alive,
                    step=0.002,
                )
                path = link_path(shown)
                for _ in range(args.gets_per_event):
                    began = time.perf_counter()
                    page = http.get(base + path, timeout=10)
                    page_s = time.perf_counter() - began
                    began = time.perf_counter()
                    health = http.get(base + "/healthz", timeout=10)
                    health_s = time.perf_counter() - began
                    if page.status_code != 200 or health.status_code != 200:
                        raise BenchError(f"GET answered {page.status_code} / {health.status_code}")
                    if i >= args.warmup:
                        run.page.append(page_s)
                        run.healthz.append(health_s)
                before = len(sim.posts)
                sent = time.time()
                done = http.post(base + path, data={"name": "bench"}, timeout=10)
                answered = time.time() - sent
                if done.status_code != 200 or "Approved" not in done.text:
                    raise BenchError(f"the link POST answered {done.status_code}")
                post = start_requests_post(sim, before, event_id, daemon.alive)
                if i >= args.warmup:
                    run.approve.append(post.at - sent)
                    run.answered.append(answered)
                sim.complete(event_id)  # one event in the document at a time
            daemon.alive()
            run.rss = sample(daemon.proc.pid)
        finally:
            http.close()
            children.stop(daemon.proc)
    return run


def report_links(report: Report, run: LinkRun) -> None:
    report.section(
        f"2. approval link form POST -> IMDS StartRequests POST ({len(run.approve)} approvals)"
    )
    report.percentiles(run.approve, (50, 99), APPROVE_P99_S)
    report.row("form POST -> outcome page received p50 / p99", p50_p99(run.answered))
    report.section(f"3. approval page GET ({len(run.page)} requests, kept-alive connection)")
    report.percentiles(run.page, (50, 99), PAGE_P99_S, with_max=False)
    report.row("baseline: GET /healthz, same server, p50 / p99", p50_p99(run.healthz))
    report.row(
        "ratio page / healthz p50",
        f"{percentile(run.page, 50) / percentile(run.healthz, 50):.2f}x",
    )
    if run.rss is not None:
        report.row("daemon VmRSS after these approvals", mib(run.rss.rss_kib))


# -- 4. RSS ---------------------------------------------------------------------------------


def warm_up(sim: Simulator, teams: FakeTeams | None, base: str, alive: Callable[[], None]) -> None:
    """Events through every path: a link approval, a policy approval, a cancel."""
    reboot = sim.schedule("Reboot")
    redeploy = sim.schedule("Redeploy", source="User")  # approved by the policy
    freeze = sim.schedule("Freeze")
    if teams is not None:
        shown = wait_for(lambda: card_of(teams, reboot), 15, "the Reboot card", alive)
        http = session()
        http.get(base + link_path(shown), timeout=10)
        http.post(base + link_path(shown), data={"name": "warm-up"}, timeout=10)
        http.close()
        wait_for(lambda: reboot in sim.start_requests, 10, "the link's StartRequest", alive)
    else:
        time.sleep(1.0)
    wait_for(lambda: redeploy in sim.start_requests, 10, "the policy's StartRequest", alive)
    for event_id in (reboot, redeploy):
        sim.start_event(event_id)
    time.sleep(1.0)
    for event_id in (reboot, redeploy, freeze):
        sim.complete(event_id)
    time.sleep(1.5)


@dataclass
class RssResult:
    teams: ProcSample
    baseline: ProcSample


def measure_rss(args: argparse.Namespace, children: Children, work: Path) -> RssResult:
    directory = work / "rss"
    (directory / "teams").mkdir(parents=True)
    (directory / "console").mkdir()
    port_t, port_c = free_port(), free_port()
    http = session()
    with (
        FakeTeams() as teams,
        simulator() as sim_t,
        simulator() as sim_c,
    ):
        with_teams = write_config(
            directory / "teams", sim_t, 1.0, port_t, teams=teams, console=True
        )
        console_only = write_config(
            directory / "console", sim_c, 1.0, port_c, teams=None, console=True
        )
        d_teams = start_daemon(children, with_teams, directory / "teams" / "daemon.log")
        d_console = start_daemon(children, console_only, directory / "console" / "daemon.log")
        try:
            wait_ready(d_teams, sim_t, http, port_t)
            wait_ready(d_console, sim_c, http, port_c)
            warm_up(sim_t, teams, f"http://127.0.0.1:{port_t}", d_teams.alive)
            warm_up(sim_c, None, f"http://127.0.0.1:{port_c}", d_console.alive)
            time.sleep(args.rss_warmup)
            d_teams.alive()
            d_console.alive()
            return RssResult(sample(d_teams.proc.pid), sample(d_console.proc.pid))
        finally:
            http.close()
            children.stop(d_teams.proc)
            children.stop(d_console.proc)


def report_rss(report: Report, result: RssResult) -> None:
    t, b = result.teams, result.baseline
    report.section("4. memory after warm-up (link approval, policy approval, cancel; then idle)")
    mb = t.rss_kib * 1024 / 1e6
    report.row(
        "VmRSS, console + Teams (+ approval page)",
        f"{mib(t.rss_kib)} ({mb:.1f} MB)",
        f"<= {RSS_MB:g} MB",
        mb <= RSS_MB,
    )
    report.row("  VmHWM (peak)", mib(t.hwm_kib), f"({t.threads} threads)")
    report.row("VmRSS, console only (baseline)", mib(b.rss_kib), f"({b.threads} threads)")
    report.row("ratio Teams / baseline VmRSS", f"{t.rss_kib / b.rss_kib:.2f}x")
    report.row("Teams' cost (difference)", mib(t.rss_kib - b.rss_kib))


# -- main -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Teams and approval-link figures of sebridge.")
    parser.add_argument("--approvals", type=int, default=120, help="link approvals timed (120)")
    parser.add_argument("--warmup", type=int, default=3, help="untimed first approvals (3)")
    parser.add_argument("--gets-per-event", type=int, default=2, help="page GETs per event (2)")
    parser.add_argument("--click-poll", type=float, default=0.2, help="poll of the link daemon")
    parser.add_argument("--events", type=int, default=50, help="events timed in part 1 (50)")
    parser.add_argument("--warmup-events", type=int, default=2, help="untimed first events (2)")
    parser.add_argument("--interval", type=float, default=1.0, help="poll_interval, part 1 (1.0)")
    parser.add_argument("--rss-warmup", type=float, default=10.0, help="idle s before RSS (10)")
    parser.add_argument("--seed", type=int, help="random seed of the event spacing")
    parser.add_argument("--quick", action="store_true", help="smoke run: 100 approvals, 10 events")
    parser.add_argument("--only", choices=("card", "links", "rss"), action="append")
    args = parser.parse_args(argv)
    if args.quick:
        args.approvals, args.events, args.rss_warmup = 100, 10, 3.0
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for name in PROXY_VARS:
        os.environ.pop(name, None)
    parts = args.only or ["card", "links", "rss"]
    rng = random.Random(args.seed)
    report = Report()
    steps: list[Step] = [
        ("card", "card", lambda c, w: report_card(report, args, measure_card(args, c, w, rng))),
        ("links", "links", lambda c, w: report_links(report, measure_links(args, c, w))),
        ("rss", "rss", lambda c, w: report_rss(report, measure_rss(args, c, w))),
    ]
    header = (
        f"sebridge Teams bench: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"seed {args.seed}"
    )
    return run_parts(header, report, steps, parts, "sebridge-bench-")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)

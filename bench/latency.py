"""Latency, idle cost and start-up of `sebridge run`, against the IMDS simulator.

The simulator runs in this process (its request log gives the instant every
poll arrived); the daemon runs as a child process, `python -m sebridge run`,
with its store and its JSON lines file in a temporary directory.

1. latency: the wall time just before the simulator's document changes (a new
   Reboot event) -> the "scheduled" line for that event visible in the JSONL
   file. Events are spaced by a random offset within the poll interval, so
   their phase relative to the polls is uniform. Split into the polling wait
   (change -> the poll that saw it arrives at the simulator) and processing
   (that poll -> the line), the latter again at the line's "ts" (the instant
   the daemon started recording the transition).
2. idle: the daemon with the console sink alone (stdout to /dev/null), no
   events: CPU per second of wall time and memory, after a warm-up, beside a
   trivial sleeping Python process sampled the same way.
3. start-up: just before Popen -> the first /metadata/scheduledevents GET
   received, beside the start-up of `python -c pass` and of imports alone.

    python bench/latency.py [--events 60] [--idle-seconds 30] [--starts 5]
    python bench/latency.py --quick          # ~30 s smoke run

Prints a table with each target and PASS/MISS. Exit status 0 whatever the
figures (it measures, it does not assert); 1 only if a measurement could not
be taken at all (the daemon died, a line never came).
"""

from __future__ import annotations

import argparse
import itertools
import json
import os
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

from harness import (
    BenchError,
    Children,
    JsonlTail,
    ProcSample,
    Report,
    Step,
    check_alive,
    event_gets,
    last_poll,
    ms,
    run_parts,
    sample,
)
from sebridge.imds.simulator import Simulator

CLK_TCK = os.sysconf("SC_CLK_TCK")

# Targets.
LATENCY_SLACK = 0.050  # p99 <= poll interval + 50 ms
IDLE_CPU_MS_PER_S = 0.5
IDLE_RSS_MIB = 35.0
STARTUP_S = 0.6


# -- the daemon of this benchmark ---------------------------------------------------------


def write_config(
    directory: Path,
    endpoint: str,
    interval: float,
    *,
    jsonl: Path | None,
    console: bool,
) -> Path:
    """A daemon config: the simulator's endpoint, a store in `directory`, chosen sinks."""
    store = directory / "state.db"
    lines = [
        "[imds]",
        f"endpoint = {json.dumps(endpoint)}",
        f"poll_interval = {interval!r}",
        "[store]",
        f"url = {json.dumps('sqlite:///' + str(store))}",
        "[console]",
        f"enabled = {'true' if console else 'false'}",
    ]
    if jsonl is not None:
        lines += ["[jsonl]", f"path = {json.dumps(str(jsonl))}"]
    path = directory / "sebridge.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def daemon_command(config: Path) -> list[str]:
    return [sys.executable, "-m", "sebridge", "run", "--config", str(config)]


def wait_for_polls(
    sim: Simulator, count: int, proc: subprocess.Popen[bytes], log: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while len(event_gets(sim)) < count:
        check_alive(proc, log)
        if time.monotonic() > deadline:
            raise BenchError(f"the daemon did not poll {count} times in {timeout:g} s")
        time.sleep(0.01)


# -- CPU from two /proc samples ------------------------------------------------------------


@dataclass
class CpuCost:
    ms_per_s: float  # from schedstat (ns resolution)
    tick_ms_per_s: float  # from /proc/PID/stat (1 / CLK_TCK resolution)
    thread_ms_per_s: list[float]  # per thread, in thread id (start) order
    seconds: float
    end: ProcSample


def cpu_cost(first: ProcSample, last: ProcSample) -> CpuCost:
    seconds = last.wall - first.wall
    return CpuCost(
        ms_per_s=(last.run_ns - first.run_ns) / 1e6 / seconds,
        tick_ms_per_s=(last.ticks - first.ticks) * 1000 / CLK_TCK / seconds,
        thread_ms_per_s=[
            (ns - first.thread_ns.get(tid, 0)) / 1e6 / seconds
            for tid, ns in sorted(last.thread_ns.items())
        ],
        seconds=seconds,
        end=last,
    )


# -- 1. latency --------------------------------------------------------------------


@dataclass
class EventTiming:
    changed: float  # wall time just before schedule()
    poll: float  # arrival of the poll that saw it (latest GET before the line)
    recorded: float  # the line's "ts": the daemon began recording
    visible: float  # the line was seen in the file


def measure_latency(
    args: argparse.Namespace, children: Children, work: Path, rng: random.Random
) -> tuple[list[EventTiming], list[float]]:
    interval = args.interval
    directory = work / "latency"
    directory.mkdir()
    jsonl = directory / "events.jsonl"
    log = directory / "daemon.log"
    with Simulator(port=0) as sim, open(log, "wb") as log_file:
        config = write_config(directory, sim.url, interval, jsonl=jsonl, console=False)
        proc = children.start(daemon_command(config), stdout=subprocess.DEVNULL, stderr=log_file)
        try:
            wait_for_polls(sim, 3, proc, log, timeout=30)
            tail = JsonlTail(jsonl)
            timeout = 5 * interval + 10

            def alive() -> None:
                check_alive(proc, log)

            raw: list[tuple[float, str, float, dict[str, Any]]] = []
            for i in range(args.warmup_events + args.events):
                time.sleep(rng.uniform(0, interval))
                changed = time.time()
                event_id = sim.schedule("Reboot")

                def scheduled(record: dict[str, Any], event_id: str = event_id) -> bool:
                    return record["event_id"] == event_id and record["transition"] == "scheduled"

                visible, record = tail.wait_for(scheduled, timeout, alive)
                sim.complete(event_id)  # keeps the document at one event at most
                if i >= args.warmup_events:
                    raw.append((changed, event_id, visible, record))
            gets = event_gets(sim)
        finally:
            children.stop(proc)
    timings: list[EventTiming] = []
    for changed, _event_id, visible, record in raw:
        poll = last_poll(gets, visible, changed)
        recorded = datetime.fromisoformat(record["ts"]).timestamp()
        timings.append(EventTiming(changed, poll, recorded, visible))
    return timings, gets


def report_latency(
    report: Report, args: argparse.Namespace, measured: tuple[list[EventTiming], list[float]]
) -> None:
    timings, gets = measured
    interval = args.interval
    latency = [t.visible - t.changed for t in timings]
    wait = [max(0.0, t.poll - t.changed) for t in timings]
    processing = [t.visible - t.poll for t in timings]
    fetch = [t.recorded - t.poll for t in timings]
    deliver = [t.visible - t.recorded for t in timings]
    report.section(f"1. document change -> JSONL line ({len(timings)} events, poll {interval:g} s)")
    report.percentiles(latency, (50, 90, 99), interval + LATENCY_SLACK, label="latency ")
    report.poll_split(interval, wait, processing, "processing", LATENCY_SLACK)
    report.row(
        "    poll -> recording starts p50 / max",
        f"{ms(statistics.median(fetch))} / {ms(max(fetch))}",
    )
    report.row(
        "    recording -> line visible p50 / max",
        f"{ms(statistics.median(deliver))} / {ms(max(deliver))}",
    )
    report_poll_period(report, gets, interval)
    late = sum(1 for t in timings if t.poll < t.changed - 0.002)
    if late:
        report.notes.append(
            f"note: {late} event(s) were seen by a poll that arrived before the change "
            "(the change landed between the request's arrival and the document's rendering)"
        )


def report_poll_period(report: Report, gets: Sequence[float], interval: float) -> None:
    gaps = [b - a for a, b in itertools.pairwise(gets)]
    if len(gaps) < 2:
        return
    drift = [abs(g - interval) for g in gaps]
    report.row(
        "poll period mean / max |deviation|",
        f"{statistics.fmean(gaps) * 1000:.1f} ms / {ms(max(drift))}",
        f"({len(gaps)} gaps)",
    )


# -- 2. idle ------------------------------------------------------------------------


@dataclass
class IdleResult:
    daemon: CpuCost
    baseline: CpuCost
    polls: int
    gets: list[float]


SLEEPER = "import time; [time.sleep(1) for _ in range({n})]"


def measure_idle(args: argparse.Namespace, children: Children, work: Path) -> IdleResult:
    directory = work / "idle"
    directory.mkdir()
    log = directory / "daemon.log"
    with Simulator(port=0) as sim, open(log, "wb") as log_file:
        config = write_config(directory, sim.url, args.interval, jsonl=None, console=True)
        proc = children.start(daemon_command(config), stdout=subprocess.DEVNULL, stderr=log_file)
        sleeper_seconds = int(args.warmup_seconds + args.idle_seconds + 10)
        sleeper = children.start(
            [sys.executable, "-c", SLEEPER.format(n=sleeper_seconds)],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        try:
            wait_for_polls(sim, 1, proc, log, timeout=30)
            time.sleep(args.warmup_seconds)
            check_alive(proc, log)
            polls_before = len(event_gets(sim))
            d0, b0 = sample(proc.pid), sample(sleeper.pid)
            time.sleep(args.idle_seconds)
            d1, b1 = sample(proc.pid), sample(sleeper.pid)
            check_alive(proc, log)
            gets = event_gets(sim)
        finally:
            children.stop(proc)
            children.stop(sleeper)
    return IdleResult(cpu_cost(d0, d1), cpu_cost(b0, b1), len(gets) - polls_before, gets)


def report_idle(report: Report, args: argparse.Namespace, idle: IdleResult) -> None:
    d, b = idle.daemon, idle.baseline
    report.section(
        f"2. idle daemon, console sink alone ({d.seconds:.1f} s sampled after "
        f"{args.warmup_seconds:g} s warm-up, {idle.polls} polls)"
    )
    report.row(
        "CPU per second (schedstat)",
        f"{d.ms_per_s:.3f} ms/s",
        f"<= {IDLE_CPU_MS_PER_S} ms/s",
        d.ms_per_s <= IDLE_CPU_MS_PER_S,
    )
    tick_ms = 1000 / CLK_TCK / d.seconds
    report.row(
        "CPU per second (/proc stat utime+stime)",
        f"{d.tick_ms_per_s:.3f} ms/s",
        f"(resolution {tick_ms:.2f} ms/s)",
    )
    report.row(
        "  per thread, in start order",
        " / ".join(f"{v:.3f}" for v in d.thread_ms_per_s) + " ms/s",
    )
    if idle.polls:
        per_poll = d.ms_per_s * d.seconds / idle.polls
        report.row("CPU per poll (schedstat)", f"{per_poll:.3f} ms")
    report.row(
        "VmRSS", f"{d.end.rss_kib / 1024:.1f} MiB", f"<= {IDLE_RSS_MIB:g} MiB",
        d.end.rss_kib / 1024 <= IDLE_RSS_MIB,
    )  # fmt: skip
    report.row(
        "  RssAnon / RssFile",
        f"{d.end.anon_kib / 1024:.1f} / {d.end.file_kib / 1024:.1f} MiB",
        f"({d.end.threads} threads)",
    )
    report.row("VmHWM (peak RSS)", f"{d.end.hwm_kib / 1024:.1f} MiB")
    report_poll_period(report, idle.gets[-idle.polls - 1 :], args.interval)
    report.section("   baseline: python -c 'sleep 1 s in a loop', sampled the same way")
    report.row("CPU per second (schedstat)", f"{b.ms_per_s:.3f} ms/s")
    report.row("CPU per second (/proc stat)", f"{b.tick_ms_per_s:.3f} ms/s")
    report.row("VmRSS / VmHWM", f"{b.end.rss_kib / 1024:.1f} / {b.end.hwm_kib / 1024:.1f} MiB")
    ratio_cpu = d.ms_per_s / b.ms_per_s if b.ms_per_s else float("inf")
    report.row("ratio daemon / baseline CPU", f"{ratio_cpu:.1f}x")
    report.row("ratio daemon / baseline RSS", f"{d.end.rss_kib / b.end.rss_kib:.2f}x")


# -- 3. start-up ---------------------------------------------------------------------


@dataclass
class StartupResult:
    daemon: list[float] = field(default_factory=list)
    baselines: dict[str, list[float]] = field(default_factory=dict)


BASELINES = {
    "python -c pass": "pass",
    "python -c 'import sebridge.cli.main'": "import sebridge.cli.main",
    "python -c 'import <run's modules>'": (
        "import sebridge.cli.main, sebridge.config.loader, sebridge.cli.commands, "
        "apscheduler.schedulers.background"
    ),
}


def run_to_exit(argv: Sequence[str], children: Children) -> float:
    """Seconds from just before Popen until the process has exited."""
    started = time.time()
    proc = children.start(argv, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        proc.wait(60)
    finally:
        children.stop(proc)
    if proc.returncode:
        raise BenchError(f"{' '.join(argv)} exited with {proc.returncode}")
    return time.time() - started


def measure_startup(args: argparse.Namespace, children: Children, work: Path) -> StartupResult:
    result = StartupResult(baselines={name: [] for name in BASELINES})
    with Simulator(port=0) as sim:
        for i in range(args.starts):
            # Interleaved, so a noisy moment hits every figure alike.
            for name, code in BASELINES.items():
                result.baselines[name].append(run_to_exit([sys.executable, "-c", code], children))
            directory = work / f"start{i}"
            directory.mkdir()
            log = directory / "daemon.log"
            config = write_config(
                directory, sim.url, args.interval, jsonl=directory / "events.jsonl", console=False
            )
            before = len(sim.requests)
            with open(log, "wb") as log_file:
                started = time.time()
                proc = children.start(
                    daemon_command(config), stdout=subprocess.DEVNULL, stderr=log_file
                )
                try:
                    deadline = time.monotonic() + 30
                    while not (gets := event_gets(sim, before)):
                        check_alive(proc, log)
                        if time.monotonic() > deadline:
                            raise BenchError("the daemon did not poll within 30 s of starting")
                        time.sleep(0.002)
                finally:
                    children.stop(proc)
            result.daemon.append(gets[0] - started)
    return result


def report_startup(report: Report, startup: StartupResult) -> None:
    runs = startup.daemon
    report.section(f"3. start-up: Popen -> first IMDS GET received ({len(runs)} runs, new store)")
    median = statistics.median(runs)
    report.row("median", ms(median), f"<= {ms(STARTUP_S)}", median <= STARTUP_S)
    report.row("max", ms(max(runs)), f"<= {ms(STARTUP_S)}", max(runs) <= STARTUP_S)
    report.row("all runs", ", ".join(f"{t * 1000:.0f}" for t in runs) + " ms")
    report.section("   baselines: Popen -> exit, median / max")
    for name, times in startup.baselines.items():
        report.row(name, f"{ms(statistics.median(times))} / {ms(max(times))}")
    for name, times in startup.baselines.items():
        report.row(
            f"ratio daemon / {name.removeprefix('python -c ')}",
            f"{median / statistics.median(times):.2f}x",
        )


# -- main -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Latency, idle CPU/RSS and start-up of `sebridge run` against the simulator."
    )
    parser.add_argument("--events", type=int, default=60, help="events timed (60; >= 50)")
    parser.add_argument("--warmup-events", type=int, default=2, help="untimed first events (2)")
    parser.add_argument(
        "--idle-seconds", type=float, default=30.0, help="idle CPU sample length (30; >= 20)"
    )
    parser.add_argument("--warmup-seconds", type=float, default=5.0, help="idle warm-up (5)")
    parser.add_argument("--starts", type=int, default=5, help="start-ups timed (5)")
    parser.add_argument("--interval", type=float, default=1.0, help="poll_interval (1.0)")
    parser.add_argument("--seed", type=int, help="random seed of the event spacing")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 20 events, 8 s idle, 3 start-ups"
    )
    parser.add_argument(
        "--only", choices=("latency", "idle", "startup"), action="append", help="run only these"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.idle_seconds, args.warmup_seconds, args.starts = 20, 8.0, 2.0, 3
    if args.events < 1 or args.starts < 1 or args.idle_seconds <= 0:
        parser.error("--events, --starts and --idle-seconds must be positive")
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    rng = random.Random(args.seed)
    report = Report()
    steps: list[Step] = [
        (
            "latency",
            "latency",
            lambda c, w: report_latency(report, args, measure_latency(args, c, w, rng)),
        ),
        ("idle", "idle", lambda c, w: report_idle(report, args, measure_idle(args, c, w))),
        ("startup", "startup", lambda c, w: report_startup(report, measure_startup(args, c, w))),
    ]
    header = (
        f"sebridge latency bench: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"poll_interval {args.interval:g} s, seed {args.seed}"
    )
    parts = args.only or ["latency", "idle", "startup"]
    return run_parts(header, report, steps, parts, "sebridge-bench-")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the children are already stopped
        print("interrupted", file=sys.stderr)
        sys.exit(130)

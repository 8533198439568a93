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
import contextlib
import itertools
import json
import os
import random
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import IO, Any

from sebridge.simulator import Simulator

EVENTS_PATH = "/metadata/scheduledevents"
TAIL_STEP = 0.001  # seconds between looks at the JSONL file
CLK_TCK = os.sysconf("SC_CLK_TCK")

# Targets.
LATENCY_SLACK = 0.050  # p99 <= poll interval + 50 ms
IDLE_CPU_MS_PER_S = 0.5
IDLE_RSS_MIB = 35.0
STARTUP_S = 0.6


class BenchError(Exception):
    """A measurement could not be taken (not a missed target)."""


# -- processes and files -------------------------------------------------------


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


class Children:
    """Every child process started, stopped on exit whatever happens."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[bytes]] = []

    def start(
        self, argv: Sequence[str], *, stdout: IO[Any] | int, stderr: IO[Any] | int
    ) -> subprocess.Popen[bytes]:
        proc = subprocess.Popen(list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr)
        self._procs.append(proc)
        return proc

    def stop(self, proc: subprocess.Popen[bytes], timeout: float = 10.0) -> None:
        """SIGTERM, then SIGKILL if it is still there after `timeout`."""
        if proc.poll() is None:
            proc.terminate()
            try:
                proc.wait(timeout)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        with contextlib.suppress(ValueError):
            self._procs.remove(proc)

    def stop_all(self) -> None:
        for proc in list(self._procs):
            self.stop(proc)


def log_tail(path: Path, lines: int = 15) -> str:
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return "(no log)"
    return "\n".join(text.splitlines()[-lines:]) or "(empty log)"


def check_alive(proc: subprocess.Popen[bytes], log: Path) -> None:
    if proc.poll() is not None:
        raise BenchError(f"daemon exited with {proc.returncode}; its log ends:\n{log_tail(log)}")


def event_gets(sim: Simulator, since: int = 0) -> list[float]:
    """Arrival times of scheduled-events GETs, from request number `since` on."""
    return [r.at for r in sim.requests[since:] if r.method == "GET" and r.path == EVENTS_PATH]


def wait_for_polls(
    sim: Simulator, count: int, proc: subprocess.Popen[bytes], log: Path, timeout: float
) -> None:
    deadline = time.monotonic() + timeout
    while len(event_gets(sim)) < count:
        check_alive(proc, log)
        if time.monotonic() > deadline:
            raise BenchError(f"the daemon did not poll {count} times in {timeout:g} s")
        time.sleep(0.01)


class JsonlTail:
    """Reads lines appended to a file, noting the wall time each became visible."""

    def __init__(self, path: Path) -> None:
        self._path = path
        self._offset = 0
        self._partial = b""
        self.seen: list[tuple[float, dict[str, Any]]] = []

    def _read(self) -> list[dict[str, Any]]:
        try:
            with open(self._path, "rb") as f:
                f.seek(self._offset)
                data = f.read()
        except FileNotFoundError:
            return []
        self._offset += len(data)
        data = self._partial + data
        *complete, self._partial = data.split(b"\n")
        return [json.loads(line) for line in complete if line.strip()]

    def wait_for(
        self,
        want: Callable[[dict[str, Any]], bool],
        timeout: float,
        alive: Callable[[], None],
    ) -> tuple[float, dict[str, Any]]:
        """(visible-at wall time, record) of the first new line `want` accepts."""
        deadline = time.monotonic() + timeout
        checked = time.monotonic()
        size = -1
        while True:
            try:
                new_size = os.stat(self._path).st_size
            except FileNotFoundError:
                new_size = 0
            if new_size != size:
                now = time.time()
                size = new_size
                found = None
                for record in self._read():
                    self.seen.append((now, record))
                    if found is None and want(record):
                        found = (now, record)
                if found is not None:
                    return found
            mono = time.monotonic()
            if mono > deadline:
                raise BenchError(f"no matching JSONL line within {timeout:g} s")
            if mono - checked > 0.1:
                alive()
                checked = mono
            time.sleep(TAIL_STEP)


# -- /proc sampling ----------------------------------------------------------------


@dataclass
class ProcSample:
    wall: float
    ticks: int  # utime + stime, all threads, in clock ticks
    run_ns: int  # sum of the live threads' schedstat run time, ns
    thread_ns: dict[int, int]  # the same per thread id
    rss_kib: int
    hwm_kib: int
    anon_kib: int
    file_kib: int
    threads: int


def sample(pid: int) -> ProcSample:
    wall = time.monotonic()
    with open(f"/proc/{pid}/stat", encoding="ascii") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    ticks = int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15)
    thread_ns: dict[int, int] = {}
    tasks = os.listdir(f"/proc/{pid}/task")
    for tid in tasks:
        with contextlib.suppress(OSError), open(f"/proc/{pid}/task/{tid}/schedstat") as f:
            thread_ns[int(tid)] = int(f.read().split()[0])
    status: dict[str, int] = {}
    with open(f"/proc/{pid}/status", encoding="ascii") as f:
        for line in f:
            key, _, value = line.partition(":")
            if key in ("VmRSS", "VmHWM", "RssAnon", "RssFile"):
                status[key] = int(value.split()[0])
    return ProcSample(
        wall,
        ticks,
        sum(thread_ns.values()),
        thread_ns,
        status.get("VmRSS", 0),
        status.get("VmHWM", 0),
        status.get("RssAnon", 0),
        status.get("RssFile", 0),
        len(tasks),
    )


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


# -- statistics and printing ------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


@dataclass
class Report:
    rows: list[tuple[str, str, str, str]] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)

    def section(self, title: str) -> None:
        self.rows.append((title, "", "", ""))

    def row(self, name: str, value: str, target: str = "", ok: bool | None = None) -> None:
        verdict = "" if ok is None else ("PASS" if ok else "MISS")
        self.rows.append(("  " + name, value, target, verdict))

    def print(self) -> None:
        head = ("measure", "value", "target", "")
        body = [r for r in self.rows if r[1] or r[2]]  # section titles run over
        widths = [max(len(r[i]) for r in [*body, head]) for i in range(4)]
        line = "  ".join(h.ljust(w) for h, w in zip(head, widths, strict=True)).rstrip()
        print(line)
        print("-" * len(line))
        for r in self.rows:
            if not r[1] and not r[2]:
                print(r[0])
            else:
                print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
        for note in self.notes:
            print(note)
        for error in self.errors:
            print(f"ERROR: {error}")


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


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
        poll = max((at for at in gets if at <= visible), default=changed)
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
    target = interval + LATENCY_SLACK
    for name, p in (("p50", 50), ("p90", 90), ("p99", 99)):
        value = percentile(latency, p)
        if p == 99:
            report.row(f"latency {name}", ms(value), f"<= {ms(target)}", value <= target)
        else:
            report.row(f"latency {name}", ms(value))
    report.row("latency max", ms(max(latency)))
    report.row(
        "  polling wait p50 / max",
        f"{ms(statistics.median(wait))} / {ms(max(wait))}",
        f"(uniform in 0..{ms(interval)})",
    )
    report.row(
        "  processing p50 / p99 / max",
        f"{ms(statistics.median(processing))} / {ms(percentile(processing, 99))}"
        f" / {ms(max(processing))}",
        f"(the {ms(LATENCY_SLACK)} budget)",
    )
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
    "python -c 'import sebridge.cli'": "import sebridge.cli",
    "python -c 'import <run's modules>'": (
        "import sebridge.cli, sebridge.config, sebridge.commands, apscheduler.schedulers.background"
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


@contextlib.contextmanager
def terminated_on_sigterm() -> Iterator[None]:
    """SIGTERM unwinds like Ctrl-C, so the finally blocks stop the children."""

    def handler(signum: int, frame: object) -> None:
        raise KeyboardInterrupt

    previous = signal.signal(signal.SIGTERM, handler)
    try:
        yield
    finally:
        signal.signal(signal.SIGTERM, previous)


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    parts = args.only or ["latency", "idle", "startup"]
    rng = random.Random(args.seed)
    report = Report()
    began = time.monotonic()
    print(
        f"sebridge latency bench: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"poll_interval {args.interval:g} s, seed {args.seed}",
        flush=True,
    )
    children = Children()
    with (
        terminated_on_sigterm(),
        tempfile.TemporaryDirectory(prefix="sebridge-bench-") as tmp,
    ):
        work = Path(tmp)
        try:
            steps: list[tuple[str, Callable[[], None]]] = [
                (
                    "latency",
                    lambda: report_latency(
                        report, args, measure_latency(args, children, work, rng)
                    ),
                ),
                ("idle", lambda: report_idle(report, args, measure_idle(args, children, work))),
                ("startup", lambda: report_startup(report, measure_startup(args, children, work))),
            ]
            for name, step in steps:
                if name not in parts:
                    continue
                print(f"measuring {name} ...", flush=True)
                try:
                    step()
                except BenchError as exc:
                    report.errors.append(f"{name}: {exc}")
        finally:
            children.stop_all()
    print()
    report.print()
    print(f"\ntotal run time {time.monotonic() - began:.0f} s")
    return 1 if report.errors else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the children are already stopped
        print("interrupted", file=sys.stderr)
        sys.exit(130)

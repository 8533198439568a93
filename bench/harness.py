"""What the benchmarks share: child processes, the daemon and its config, simulator wiring,
/proc sampling, percentiles, the printed table, and the run of a benchmark's parts.

latency.py, slack_latency.py, teams_latency.py and jira_calls.py run `python -m sebridge run
--config FILE` as a child process against the IMDS simulator of `sebridge.imds.simulator`, which
runs in the benchmark's own process (its request log gives the arrival time of every
request), and print each figure beside its target; fleet_scale.py and fleet_rig.py take the
error type, the log tail, percentiles and the SIGTERM handling. A change to how the daemon is
started, configured or watched belongs here, once.

Imported as `harness`: the scripts run as `python bench/NAME.py`, so bench/ is on sys.path.
"""

from __future__ import annotations

import contextlib
import json
import os
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Collection, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO, Any, TypeVar

from sebridge.imds.simulator import Simulator
from sebridge.imds.simulator.records import PostRecord

T = TypeVar("T")

EVENTS_PATH = "/metadata/scheduledevents"
TAIL_STEP = 0.001  # seconds between looks at a JSONL file
PROXY_VARS = ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy")


class BenchError(Exception):
    """A measurement could not be taken (not a missed target)."""


# -- child processes ------------------------------------------------------------------------


class Children:
    """Every child process started, stopped on exit whatever happens."""

    def __init__(self) -> None:
        self._procs: list[subprocess.Popen[bytes]] = []

    def start(
        self,
        argv: Sequence[str],
        *,
        stdout: IO[Any] | int,
        stderr: IO[Any] | int,
        env: dict[str, str] | None = None,
    ) -> subprocess.Popen[bytes]:
        """Start `argv` (in `env`, else this process's environment), with one malloc arena
        unless that environment says otherwise: as the systemd unit and the image run
        sebridge (MALLOC_ARENA_MAX=1)."""
        environment = dict(os.environ if env is None else env)
        environment.setdefault("MALLOC_ARENA_MAX", "1")
        proc = subprocess.Popen(
            list(argv), stdin=subprocess.DEVNULL, stdout=stdout, stderr=stderr, env=environment
        )
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


# -- the daemon and its config --------------------------------------------------------------


@dataclass
class Daemon:
    proc: subprocess.Popen[bytes]
    log: Path

    def alive(self) -> None:
        check_alive(self.proc, self.log)


def start_daemon(children: Children, config: Path, log: Path) -> Daemon:
    """`python -m sebridge run --config CONFIG`, stdout to /dev/null, stderr to `log`."""
    with open(log, "wb") as err:
        proc = children.start(
            [sys.executable, "-m", "sebridge", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    return Daemon(proc, log)


def launch(children: Children, launcher: str, mode: str, config: Path, log: Path) -> Daemon:
    """`python -c LAUNCHER MODE CONFIG` (a launcher that patches the daemon into a baseline
    by MODE, then runs it), stdout to /dev/null, stderr to `log`."""
    with open(log, "wb") as err:
        proc = children.start(
            [sys.executable, "-c", launcher, mode, str(config)],
            stdout=subprocess.DEVNULL,
            stderr=err,
        )
    return Daemon(proc, log)


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def toml(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, list | tuple):
        return "[" + ", ".join(toml(v) for v in value) + "]"
    text = str(value).replace("\\", "\\\\").replace('"', '\\"')
    return f'"{text}"'


def daemon_sections(
    directory: Path, sim: Simulator, interval: float, *, console: bool
) -> dict[str, dict[str, object]]:
    """[imds] (the simulator), [store] (SQLite in `directory`), [console], [dispatch]."""
    return {
        "imds": {"endpoint": sim.url, "poll_interval": interval, "vm_name": sim.vm_name},
        "store": {"url": f"sqlite:///{directory / 'state.db'}"},
        "console": {"enabled": console},
        "dispatch": {"shutdown_grace_seconds": 1.0},
    }


def write_sections(directory: Path, sections: dict[str, dict[str, object]]) -> Path:
    """`directory`/sebridge.toml holding `sections`, in their order."""
    lines: list[str] = []
    for name, keys in sections.items():
        lines.append(f"[{name}]")
        lines += [f"{key} = {toml(value)}" for key, value in keys.items()]
    path = directory / "sebridge.toml"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


# -- waiting, and what the simulator saw ----------------------------------------------------


def wait_for(
    predicate: Callable[[], T | None],
    timeout: float,
    what: str,
    alive: Callable[[], None] = lambda: None,
    step: float = 0.001,
    alive_every: float = 0.2,
) -> T:
    """Poll until `predicate` returns something truthy; BenchError after `timeout`.
    `alive` (which raises when the daemon died) is called every `alive_every` seconds."""
    deadline = time.monotonic() + timeout
    checked = time.monotonic()
    while True:
        value = predicate()
        if value:
            return value
        now = time.monotonic()
        if now > deadline:
            raise BenchError(f"timed out after {timeout:g} s waiting for {what}")
        if now - checked > alive_every:
            alive()
            checked = now
        time.sleep(step)


def simulator() -> Simulator:
    """A simulator on a free port, VM "vm0", that never approves an event by itself."""
    return Simulator(port=0, vm_name="vm0", approval_delay=3600)


def event_gets(sim: Simulator, since: int = 0) -> list[float]:
    """Arrival times of scheduled-events GETs, from request number `since` on."""
    return [r.at for r in sim.requests[since:] if r.method == "GET" and r.path == EVENTS_PATH]


def wait_first_polls(daemon: Daemon, sim: Simulator) -> None:
    wait_for(lambda: len(event_gets(sim)) >= 2, 30, "the daemon's first polls", daemon.alive)


def last_poll(gets: Sequence[float], seen: float, default: float) -> float:
    """The arrival of the last poll at or before `seen` (the poll that saw the change)."""
    return max((at for at in gets if at <= seen), default=default)


def start_requests_post(
    sim: Simulator, before: int, event_id: str, alive: Callable[[], None]
) -> PostRecord:
    """The StartRequests POST after the first `before`; it must name `event_id` alone."""
    post = wait_for(
        lambda n=before: sim.posts[n] if len(sim.posts) > n else None,
        10,
        f"the StartRequests POST of {event_id}",
        alive,
    )
    if post.ids != (event_id,):
        raise BenchError(f"IMDS got StartRequests for {post.ids}, not {event_id}")
    return post


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


# -- /proc sampling ---------------------------------------------------------------------------


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


# -- statistics and printing ------------------------------------------------------------------


def percentile(values: Sequence[float], p: float) -> float:
    """Linear interpolation between closest ranks (numpy's default)."""
    ordered = sorted(values)
    if len(ordered) == 1:
        return ordered[0]
    rank = (len(ordered) - 1) * p / 100
    low = int(rank)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (rank - low)


def ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f} ms"


def mib(kib: int) -> str:
    return f"{kib / 1024:.1f} MiB"


def report_sink_rss(
    report: Report,
    title: str,
    sink: str,
    with_sink: ProcSample,
    baseline: ProcSample,
    target_mb: float,
) -> None:
    """A sink's memory: VmRSS of console + `sink` against `target_mb` (MB), its peak, the
    console-only daemon's beside it and the difference."""
    report.section(title)
    mb = with_sink.rss_kib * 1024 / 1e6
    report.row(
        f"VmRSS, console + {sink}",
        f"{mib(with_sink.rss_kib)} ({mb:.1f} MB)",
        f"<= {target_mb:g} MB",
        mb <= target_mb,
    )
    report.row("  VmHWM (peak)", mib(with_sink.hwm_kib), f"({with_sink.threads} threads)")
    report.row(
        "VmRSS, console only (baseline)", mib(baseline.rss_kib), f"({baseline.threads} threads)"
    )
    report.row(f"{sink}'s cost (difference)", mib(with_sink.rss_kib - baseline.rss_kib))


def p50_p99(values: Sequence[float]) -> str:
    return f"{ms(percentile(values, 50))} / {ms(percentile(values, 99))}"


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

    def percentiles(
        self,
        values: Sequence[float],
        points: Sequence[int],
        target: float | None = None,
        *,
        label: str = "",
        with_max: bool = True,
    ) -> None:
        """A row per point ("p50", ...) of `values` (seconds) in ms, p99 against `target`
        (at most); then the max."""
        for p in points:
            value = percentile(values, p)
            if p == 99 and target is not None:
                self.row(f"{label}p{p}", ms(value), f"<= {ms(target)}", value <= target)
            else:
                self.row(f"{label}p{p}", ms(value))
        if with_max:
            self.row(f"{label}max", ms(max(values)))

    def poll_split(
        self,
        interval: float,
        wait: Sequence[float],
        processing: Sequence[float],
        processing_name: str,
        budget: float,
    ) -> None:
        """A change's latency, split: the wait for a poll, then `processing_name`."""
        self.row(
            "  polling wait p50 / max",
            f"{ms(statistics.median(wait))} / {ms(max(wait))}",
            f"(uniform in 0..{ms(interval)})",
        )
        self.row(
            f"  {processing_name} p50 / p99 / max",
            f"{ms(statistics.median(processing))} / {ms(percentile(processing, 99))}"
            f" / {ms(max(processing))}",
            f"(the {ms(budget)} budget)",
        )

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


# -- running a benchmark's parts --------------------------------------------------------------

# (part, title, run): `run` takes the children and the temporary directory.
Step = tuple[str, str, Callable[[Children, Path], None]]


def run_parts(
    header: str, report: Report, steps: Sequence[Step], parts: Collection[str], tmp_prefix: str
) -> int:
    """Prints `header`; runs each step whose part is in `parts`, in order, in a temporary
    directory (a BenchError is noted as an error of the report and the next step runs),
    stopping every child at the end, whatever happens; prints the report and the run time.
    Returns the exit status: 1 if a measurement could not be taken, else 0."""
    began = time.monotonic()
    print(header, flush=True)
    children = Children()
    with terminated_on_sigterm(), tempfile.TemporaryDirectory(prefix=tmp_prefix) as tmp:
        work = Path(tmp)
        try:
            for part, title, step in steps:
                if part not in parts:
                    continue
                print(f"measuring {title} ...", flush=True)
                try:
                    step(children, work)
                except BenchError as exc:
                    report.errors.append(f"{title}: {exc}")
        finally:
            children.stop_all()
    print()
    report.print()
    print(f"\ntotal run time {time.monotonic() - began:.0f} s")
    return 1 if report.errors else 0

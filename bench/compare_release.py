"""This tree against an earlier release, in the same run: CPU, memory and start-up.

Both are run as `python -m sebridge run` children against the IMDS simulator of this
process, each from a copy of its `src/` in a temporary directory (so both get .pyc files
written alike, and a read-only baseline checkout is never written to). Each round runs
every figure for both, one after the other, the order swapped every round, so load from
elsewhere on the machine falls on both alike; each round's figures are printed as they
come, then the medians with new/old.

1. CPU per unchanged poll at poll_interval 0.2 s (console sink alone): the daemon's CPU
   time (all threads' schedstat run time) over the window / the GETs the simulator got,
   in µs, and divided by the documented sample's CPU per call, measured in the same
   round as bench/poll_cost.py measures it (requests.get + resp.json against a simulator
   in a child process, call after call), and by the same sample's CPU per call when it
   is called every 0.2 s as the daemon polls (caches gone cold between calls, as they
   are for the daemon: each costs about twice as much).
2. Idle CPU at poll_interval 1 s, console alone: ms of CPU per second of wall time.
3. Idle VmRSS of that daemon at the end of the window (MiB).
4. VmRSS with five sinks (console, JSON lines, Slack in Socket Mode, Teams, Jira: the
   fakes of tests/fakes) after 20 events were delivered (MiB).
5. Start to first IMDS GET: just before Popen -> the first scheduled-events GET at the
   simulator, with .pyc files (the copy's caches warmed by an earlier start) and without
   (PYTHONDONTWRITEBYTECODE=1, the copy's __pycache__ folders removed before each start;
   the standard library and site-packages keep theirs).

    python bench/compare_release.py --baseline /path/to/checkout [--rounds 5]
    python bench/compare_release.py --baseline /path/to/checkout --quick   # a smoke run

Exit status 0 whatever the figures; 1 when a measurement could not be taken.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass
from pathlib import Path

from harness import (
    BenchError,
    Children,
    JsonlTail,
    check_alive,
    daemon_sections,
    event_gets,
    log_tail,
    sample,
    simulator,
    terminated_on_sigterm,
    wait_for,
    write_sections,
)
from poll_cost import cpu_per_call, start_simulator
from sebridge.imds.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the fakes live in tests/fakes
from tests.fakes.jira import FakeJira  # noqa: E402
from tests.fakes.slack import FakeSlack  # noqa: E402
from tests.fakes.teams import FakeTeams  # noqa: E402

OPS = "C0123456789"
EVENTS = 20

# (key, label, unit, target: new at most this, or None). The targets are the budgets
# docs/benchmarks.md lists (a person could notice past them); five sinks' is below the
# 60 MiB of all seven.
FIGURES = (
    ("poll_us", "CPU per unchanged poll, 0.2 s", "µs", None),
    ("poll_ratio", "  / documented sample's CPU per call", "x", 0.8),
    ("poll_paced", "  / the sample's, called every 0.2 s", "x", 0.8),
    ("idle_cpu", "idle CPU, poll 1 s", "ms/s", 1.0),
    ("idle_rss", "idle VmRSS, console alone", "MiB", 40.0),
    ("five_rss", f"VmRSS, five sinks, after {EVENTS} events", "MiB", 50.0),
    ("start_pyc", "start -> first GET, with .pyc", "s", 0.6),
    ("start_src", "start -> first GET, without .pyc", "s", None),
)


@dataclass
class Side:
    """One release: its name, the copy of its src/ it runs from."""

    name: str
    src: Path

    def env(self, *, bytecode: bool = True) -> dict[str, str]:
        env = dict(os.environ, PYTHONPATH=str(self.src))  # one malloc arena: Children.start
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if not bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def drop_bytecode(self) -> None:
        for cache in self.src.rglob("__pycache__"):
            shutil.rmtree(cache)


@contextmanager
def daemon(
    children: Children, side: Side, config: Path, *, bytecode: bool = True
) -> Iterator[subprocess.Popen[bytes]]:
    log = config.parent / "daemon.log"
    with open(log, "wb") as err:
        proc = children.start(
            [sys.executable, "-m", "sebridge", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=side.env(bytecode=bytecode),
        )
    try:
        yield proc
    finally:
        children.stop(proc)


def console_config(directory: Path, sim: Simulator, interval: float) -> Path:
    directory.mkdir(parents=True)
    return write_sections(directory, daemon_sections(directory, sim, interval, console=True))


def polling(proc: subprocess.Popen[bytes], sim: Simulator, log: Path, polls: int) -> None:
    wait_for(
        lambda: len(event_gets(sim)) >= polls,
        30,
        "the daemon's first polls",
        lambda: check_alive(proc, log),
    )


def cpu_per_poll(children: Children, side: Side, work: Path, seconds: float) -> float:
    """µs of CPU per unchanged poll at 0.2 s."""
    with simulator() as sim:
        sim.schedule("Reboot")  # a document with an event, unchanged from then on
        config = console_config(work / f"{side.name}-poll", sim, 0.2)
        with daemon(children, side, config) as proc:
            polling(proc, sim, config.parent / "daemon.log", 15)  # past the first writes
            time.sleep(2.5)  # past the write marker's settling (FILE_TICK_NS) and warm-up
            first, gets0 = sample(proc.pid), len(event_gets(sim))
            time.sleep(seconds)
            last, gets1 = sample(proc.pid), len(event_gets(sim))
            check_alive(proc, config.parent / "daemon.log")
    if gets1 <= gets0:
        raise BenchError(f"{side.name}: no poll in the window")
    return (last.run_ns - first.run_ns) / 1000 / (gets1 - gets0)


def idle(children: Children, side: Side, work: Path, seconds: float) -> tuple[float, float]:
    """(ms of CPU per s, VmRSS MiB) of the console-only daemon at poll 1 s."""
    with simulator() as sim:
        config = console_config(work / f"{side.name}-idle", sim, 1.0)
        with daemon(children, side, config) as proc:
            polling(proc, sim, config.parent / "daemon.log", 2)
            time.sleep(3.0)
            first = sample(proc.pid)
            time.sleep(seconds)
            last = sample(proc.pid)
            check_alive(proc, config.parent / "daemon.log")
    cpu = (last.run_ns - first.run_ns) / 1e6 / (last.wall - first.wall)
    return cpu, last.rss_kib / 1024


def five_sinks(children: Children, side: Side, work: Path) -> float:
    """VmRSS MiB with five sinks once EVENTS events were delivered and things settled."""
    directory = work / f"{side.name}-five"
    directory.mkdir(parents=True)
    jsonl = directory / "events.jsonl"
    with ExitStack() as stack:
        sim = stack.enter_context(simulator())
        slack = stack.enter_context(FakeSlack(channels={OPS: "ops"}))
        teams = stack.enter_context(FakeTeams())
        jira = stack.enter_context(FakeJira("cloud"))
        sections = daemon_sections(directory, sim, 1.0, console=True)
        sections["jsonl"] = {"path": str(jsonl)}
        sections["slack"] = {
            "bot_token": slack.bot_token,
            "app_token": slack.app_token,
            "channel": OPS,
            "api_url": slack.url,
        }
        sections["teams"] = {"webhook_url": teams.workflows_url}
        sections["jira"] = {
            "url": jira.url, "email": jira.email, "api_token": jira.token, "project": "OPS",
            "approve_status": "Approved",
        }  # fmt: skip
        config = write_sections(directory, sections)
        log = directory / "daemon.log"
        with daemon(children, side, config) as proc:
            polling(proc, sim, log, 2)
            tail = JsonlTail(jsonl)
            for _ in range(EVENTS):
                sim.schedule("Reboot")
            seen: set[str] = set()

            def all_scheduled(record: dict[str, object]) -> bool:
                if record.get("transition") == "scheduled":
                    seen.add(str(record.get("event_id")))
                return len(seen) >= EVENTS

            try:
                tail.wait_for(all_scheduled, 60, lambda: check_alive(proc, log))
            except BenchError as exc:
                tail_text = log_tail(log)
                raise BenchError(
                    f"{side.name}, five sinks: {exc}; its log ends:\n{tail_text}"
                ) from None
            time.sleep(3.0)  # the other sinks deliver too; the daemon settles
            check_alive(proc, log)
            return sample(proc.pid).rss_kib / 1024


def start_to_get(children: Children, side: Side, work: Path, *, bytecode: bool) -> float:
    """Seconds from just before Popen to the first scheduled-events GET (a new store)."""
    with simulator() as sim:
        config = console_config(work / f"{side.name}-start-{bytecode}-{time.time_ns()}", sim, 1.0)
        if not bytecode:
            side.drop_bytecode()
        started = time.time()
        with daemon(children, side, config, bytecode=bytecode) as proc:
            polling(proc, sim, config.parent / "daemon.log", 1)
            return event_gets(sim)[0] - started


def documented_sample(paced_calls: int) -> tuple[float, float]:
    """µs of CPU per call of the documentation's sample: as bench/poll_cost.py measures it
    (call after call), and called every 0.2 s (`paced_calls` calls), as a poller would."""
    import requests

    proc, url = start_simulator()
    try:

        def call() -> object:
            resp = requests.get(
                url + "/metadata/scheduledevents",
                headers={"Metadata": "true"},
                params={"api-version": "2020-07-01"},
            )
            return resp.json()

        hot = cpu_per_call(call, 500)
        spent = 0.0
        for _ in range(paced_calls):
            time.sleep(0.2)
            started = time.process_time()
            call()
            spent += time.process_time() - started
        return hot * 1e6, spent / paced_calls * 1e6
    finally:
        proc.terminate()
        proc.wait(timeout=10)


def one_side(
    children: Children,
    side: Side,
    work: Path,
    args: argparse.Namespace,
    doc_us: tuple[float, float],
):
    figures: dict[str, float] = {}
    figures["poll_us"] = cpu_per_poll(children, side, work, args.poll_seconds)
    figures["poll_ratio"] = figures["poll_us"] / doc_us[0]
    figures["poll_paced"] = figures["poll_us"] / doc_us[1]
    figures["idle_cpu"], figures["idle_rss"] = idle(children, side, work, args.idle_seconds)
    figures["five_rss"] = five_sinks(children, side, work)
    start_to_get(children, side, work, bytecode=True)  # writes the copy's .pyc files
    figures["start_pyc"] = statistics.median(
        start_to_get(children, side, work, bytecode=True) for _ in range(args.starts)
    )
    figures["start_src"] = statistics.median(
        start_to_get(children, side, work, bytecode=False) for _ in range(args.starts)
    )
    return figures


def show(value: float, unit: str) -> str:
    return (
        f"{value:.3f}"
        if unit in ("s", "x")
        else f"{value:.1f}"
        if unit != "ms/s"
        else f"{value:.3f}"
    )


def line(label: str, old: float, new: float, unit: str) -> str:
    return f"  {label:<45} old {show(old, unit):>8}  new {show(new, unit):>8} {unit:<5}"


def print_round(
    number: int,
    order: list[str],
    results: dict[str, dict[str, float]],
    doc: tuple[float, float],
) -> None:
    print(
        f"\nround {number} (order: {' then '.join(order)}; documented sample "
        f"{doc[0]:.0f} µs/call, {doc[1]:.0f} called every 0.2 s)"
    )
    for key, label, unit, _ in FIGURES:
        old, new = results["old"][key], results["new"][key]
        print(f"{line(label, old, new, unit)} new/old {new / old:.2f}")
    sys.stdout.flush()


def print_medians(rounds: list[dict[str, dict[str, float]]]) -> None:
    print(f"\nmedians over {len(rounds)} rounds")
    for key, label, unit, target in FIGURES:
        old = statistics.median(r["old"][key] for r in rounds)
        new = statistics.median(r["new"][key] for r in rounds)
        ratios = statistics.median(r["new"][key] / r["old"][key] for r in rounds)
        goal = (
            ""
            if target is None
            else f"  target new <= {target:g}: {'PASS' if new <= target else 'MISS'}"
        )
        print(f"{line(label, old, new, unit)} new/old {ratios:.2f}{goal}")


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--baseline", type=Path, required=True, help="a checkout of the old release"
    )
    parser.add_argument("--rounds", type=int, default=5)
    parser.add_argument("--poll-seconds", type=float, default=10.0)
    parser.add_argument("--idle-seconds", type=float, default=20.0)
    parser.add_argument("--starts", type=int, default=3, help="starts per figure per round")
    parser.add_argument(
        "--paced-calls", type=int, default=40, help="sample calls every 0.2 s per round"
    )
    parser.add_argument("--quick", action="store_true", help="1 round, short windows")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.poll_seconds, args.idle_seconds, args.starts = 1, 3.0, 5.0, 1
        args.paced_calls = 10
    if not (args.baseline / "src" / "sebridge").is_dir():
        parser.error(f"{args.baseline} holds no src/sebridge")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    children = Children()
    rounds: list[dict[str, dict[str, float]]] = []
    with tempfile.TemporaryDirectory(prefix="sebridge-compare-") as tmp, terminated_on_sigterm():
        work = Path(tmp)
        sides = {}
        for name, src in (("old", args.baseline / "src"), ("new", ROOT / "src")):
            copy = work / name / "src"
            shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
            sides[name] = Side(name, copy)
        print(f"old: {args.baseline}   new: {ROOT}   python: {sys.version.split()[0]}")
        try:
            for number in range(1, args.rounds + 1):
                order = ["old", "new"] if number % 2 else ["new", "old"]
                doc = documented_sample(args.paced_calls)
                results: dict[str, dict[str, float]] = {}
                for name in order:
                    results[name] = one_side(children, sides[name], work / f"r{number}", args, doc)
                rounds.append(results)
                print_round(number, order, results, doc)
        except BenchError as exc:
            print(f"measurement failed: {exc}", file=sys.stderr)
            return 1
        finally:
            children.stop_all()
    print_medians(rounds)
    print("\nnew/old: median of each round's ratio (both measured in the same round).")
    return 0


if __name__ == "__main__":
    sys.exit(main())

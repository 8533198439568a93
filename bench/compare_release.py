"""This tree against an earlier release, in the same run: every budget of DESIGN.md.

Both are run as `python -m sebridge run` children against the IMDS simulator of this
process, each from a copy of its `src/` in a temporary directory (so both get .pyc files
written alike, and a read-only baseline checkout is never written to). Each round runs
every figure for both, one after the other, the order swapped every round, so load from
elsewhere on the machine falls on both alike; each round's figures are printed as they
come, then the medians with new/old and each budget's PASS or MISS.

1. CPU per unchanged poll at poll_interval 0.2 s (console sink alone): the daemon's CPU
   time (all threads' schedstat run time) over the window / the GETs the simulator got,
   in µs, and divided by the documented sample's CPU per call, measured in the same
   round as bench/poll_cost.py measures it (requests.get + resp.json against a simulator
   in a child process, call after call), and by the same sample's CPU per call when it
   is called every 0.2 s as the daemon polls (caches gone cold between calls, as they
   are for the daemon: each costs about twice as much).
2. Idle CPU at poll_interval 1 s, console alone: ms of CPU per second of wall time.
3. Idle VmRSS of that daemon at the end of the window (MiB).
4. VmRSS with all seven sinks (console, JSON lines, Slack in Socket Mode, Teams, Jira,
   webhook, e-mail: bench/all_sinks_rss.py's, against the fakes of tests/fakes) after its
   warm-up of 20 Reboots and a policy-approved Redeploy, then --settle-seconds (MiB).
5. Start to first IMDS GET: just before Popen -> the first scheduled-events GET at the
   simulator, with .pyc files (the copy's caches warmed by an earlier start) and without
   (PYTHONDONTWRITEBYTECODE=1, the copy's __pycache__ folders removed before each start;
   the standard library and site-packages keep theirs).
6-8. With [http] on (bench/release_http.py): /metrics p99 of 200 scrapes one at a time;
   approval link -> StartRequests p99 over --approvals links, each opened and its form
   posted as a browser does; /livez p99 on the probe port while --storms storms of 1,000
   connections crowd the traffic port (a release without a probe port: /healthz on its
   traffic port, said so beneath the line, and no new/old).

    python bench/compare_release.py --baseline /path/to/checkout [--rounds 5]
    python bench/compare_release.py --baseline /path/to/checkout --quick   # a smoke run

A figure that cannot be taken on a side says why on its line; the others are still taken.
Exit status 0 whatever the figures; 1 when a measurement could not be taken.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

from harness import PROXY_VARS, Children, terminated_on_sigterm
from release_http import http_figures
from release_process import (
    EVENTS,
    Side,
    Taken,
    cpu_per_poll,
    documented_sample,
    idle,
    seven_sinks,
    start_to_get,
)

ROOT = Path(__file__).resolve().parent.parent

# (key, label, unit, target: new at most this, or None). The targets are the budgets
# docs/benchmarks.md lists (DESIGN.md's: a person could notice past them).
FIGURES = (
    ("poll_us", "CPU per unchanged poll, 0.2 s", "µs", None),
    ("poll_ratio", "  / documented sample's CPU per call", "x", 0.8),
    ("poll_paced", "  / the sample's, called every 0.2 s", "x", 0.8),
    ("idle_cpu", "idle CPU, poll 1 s", "ms/s", 1.0),
    ("idle_rss", "idle VmRSS, console alone", "MiB", 40.0),
    ("seven_rss", f"VmRSS, seven sinks, after {EVENTS} events", "MiB", 60.0),
    ("start_pyc", "start -> first GET, with .pyc", "s", 0.6),
    ("start_src", "start -> first GET, without .pyc", "s", None),
    ("approve_p99", "approval link -> StartRequests, p99", "ms", 15.0),
    ("metrics_p99", "/metrics p99, idle, one at a time", "ms", 10.0),
    ("probe_p99", "/livez p99, probe port, 1,000 on traffic port", "ms", 100.0),
)

Round = dict[str, Taken]  # "old" and "new"


def one_side(
    children: Children,
    side: Side,
    work: Path,
    args: argparse.Namespace,
    doc_us: tuple[float, float],
) -> Taken:
    taken = Taken()
    got = taken.values

    def poll() -> None:
        got["poll_us"] = cpu_per_poll(children, side, work, args.poll_seconds)
        got["poll_ratio"] = got["poll_us"] / doc_us[0]
        got["poll_paced"] = got["poll_us"] / doc_us[1]

    def idling() -> None:
        got["idle_cpu"], got["idle_rss"] = idle(children, side, work, args.idle_seconds)

    def sinks() -> None:
        got["seven_rss"] = seven_sinks(children, side, work, args.settle_seconds)

    def starts() -> None:
        start_to_get(children, side, work, bytecode=True)  # writes the copy's .pyc files
        got["start_pyc"] = statistics.median(
            start_to_get(children, side, work, bytecode=True) for _ in range(args.starts)
        )
        got["start_src"] = statistics.median(
            start_to_get(children, side, work, bytecode=False) for _ in range(args.starts)
        )

    def http() -> None:
        http_figures(children, side, work, args.approvals, args.storms, taken)

    taken.take(side.name, ("poll_us", "poll_ratio", "poll_paced"), poll)
    taken.take(side.name, ("idle_cpu", "idle_rss"), idling)
    taken.take(side.name, ("seven_rss",), sinks)
    taken.take(side.name, ("start_pyc", "start_src"), starts)
    taken.take(side.name, ("metrics_p99", "approve_p99", "probe_p99"), http)
    return taken


def show(value: float | None, unit: str) -> str:
    if value is None:
        return "--"
    if unit in ("s", "x", "ms/s"):
        return f"{value:.3f}"
    return f"{value:.2f}" if unit == "ms" else f"{value:.1f}"


def line(label: str, old: float | None, new: float | None, unit: str) -> str:
    return f"  {label:<46} old {show(old, unit):>8}  new {show(new, unit):>8} {unit:<5}"


def alike(key: str, one: Round) -> bool:
    """Whether both sides took `key` the same way (so new/old means something)."""
    return all(key in one[name].values and key not in one[name].other_way for name in one)


def beneath(key: str, rounds: Sequence[Round]) -> list[str]:
    """What is said under a figure's line: how a side measured it another way, why it
    could not be taken, notes; each once."""
    said: list[str] = []
    for one in rounds:
        for name in ("old", "new"):
            taken = one[name]
            for text in (
                taken.other_way.get(key),
                f"{name}: not taken: {taken.missing[key]}" if key in taken.missing else None,
                taken.notes.get(key),
            ):
                if text and f"      ({text})" not in said:
                    said.append(f"      ({text})")
    return said


def print_round(number: int, order: list[str], one: Round, doc: tuple[float, float]) -> None:
    print(
        f"\nround {number} (order: {' then '.join(order)}; documented sample "
        f"{doc[0]:.0f} µs/call, {doc[1]:.0f} called every 0.2 s)"
    )
    for key, label, unit, _ in FIGURES:
        old, new = one["old"].values.get(key), one["new"].values.get(key)
        ratio = f" new/old {new / old:.2f}" if alike(key, one) and new and old else ""
        print(f"{line(label, old, new, unit)}{ratio}".rstrip())
        for text in beneath(key, [one]):
            print(text)
    sys.stdout.flush()


def print_medians(rounds: list[Round]) -> None:
    print(f"\nmedians over {len(rounds)} rounds")
    for key, label, unit, target in FIGURES:
        old_values = [r["old"].values[key] for r in rounds if key in r["old"].values]
        new_values = [r["new"].values[key] for r in rounds if key in r["new"].values]
        old = statistics.median(old_values) if old_values else None
        new = statistics.median(new_values) if new_values else None
        ratios = [
            r["new"].values[key] / r["old"].values[key]
            for r in rounds
            if alike(key, r) and r["old"].values[key]
        ]
        ratio = f" new/old {statistics.median(ratios):.2f}" if ratios else " new/old   --"
        goal = ""
        if target is not None:
            verdict = "not taken" if new is None else "PASS" if new <= target else "MISS"
            goal = f"  target new <= {target:g}: {verdict}"
        print(f"{line(label, old, new, unit)}{ratio}{goal}")
        for text in beneath(key, rounds):
            print(text)


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
    parser.add_argument(
        "--settle-seconds", type=float, default=10.0, help="idle s before the seven sinks' RSS"
    )
    parser.add_argument("--approvals", type=int, default=30, help="links approved per round")
    parser.add_argument("--storms", type=int, default=10, help="1,000-connection storms")
    parser.add_argument("--quick", action="store_true", help="1 round, short windows")
    args = parser.parse_args(argv)
    if args.quick:
        args.rounds, args.poll_seconds, args.idle_seconds, args.starts = 1, 3.0, 5.0, 1
        args.paced_calls, args.settle_seconds, args.approvals, args.storms = 10, 3.0, 10, 3
    if not (args.baseline / "src" / "sebridge").is_dir():
        parser.error(f"{args.baseline} holds no src/sebridge")
    return args


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    for name in PROXY_VARS:  # every request here is to 127.0.0.1
        os.environ.pop(name, None)
    children = Children()
    rounds: list[Round] = []
    with tempfile.TemporaryDirectory(prefix="sebridge-compare-") as tmp, terminated_on_sigterm():
        work = Path(tmp)
        sides = {}
        for name, src in (("old", args.baseline / "src"), ("new", ROOT / "src")):
            copy = work / name / "src"
            shutil.copytree(src, copy, ignore=shutil.ignore_patterns("__pycache__"))
            sides[name] = Side(name, copy)
        print(
            f"old: {args.baseline}   new: {ROOT}   python: {sys.version.split()[0]}   "
            f"load average: {os.getloadavg()[0]:.1f}"
        )
        try:
            for number in range(1, args.rounds + 1):
                order = ["old", "new"] if number % 2 else ["new", "old"]
                doc = documented_sample(args.paced_calls)
                one: Round = {}
                for name in order:
                    one[name] = one_side(children, sides[name], work / f"r{number}", args, doc)
                rounds.append(one)
                print_round(number, order, one, doc)
        finally:
            children.stop_all()
    print_medians(rounds)
    print("\nnew/old: median of each round's ratio (both measured in the same round).")
    print(f"load average at the end: {os.getloadavg()[0]:.1f} (1 min)")
    return 1 if any(r[name].missing for r in rounds for name in r) else 0


if __name__ == "__main__":
    sys.exit(main())

"""CPU of a daemon whose only delivery is backing off, against an idle daemon, same run.

Two `python -m sebridge run` children poll one IMDS simulator (this process) every
second, each with a Teams sink on the fake Workflows webhook (tests/fakes/teams.py):
the "backing off" daemon's webhook answers 503 to every POST, the idle one's takes
them. One event is scheduled and then started, so the backing-off daemon holds two
rows of one event: the first retried with back-off, the second waiting behind it
(rows of one event reach a sink in order). Once both daemons are settled, their CPU
time (their threads' run time, /proc's schedstat, in ns) is sampled over the same
window, and the ratio backing off / idle printed. A dispatcher that counted the waiting
row as due would wake every few milliseconds for as long as the back-off lasts.

    python bench/backoff_idle.py [--seconds 30] [--rounds 3]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from harness import (
    Children,
    Report,
    daemon_sections,
    run_parts,
    sample,
    simulator,
    start_daemon,
    wait_first_polls,
    wait_for,
    write_sections,
)

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the fake Teams lives in tests/fakes
from tests.fakes.teams import FakeTeams  # noqa: E402

TARGET_RATIO = 1.10  # backing off costs no more than idle, within the machine's noise
SETTLE = 5.0  # seconds after the event started: both daemons recorded it, the first retries ran


def measure(children: Children, work: Path, seconds: float, rounds: int, report: Report) -> None:
    ratios: list[float] = []
    with FakeTeams() as down, FakeTeams() as up, simulator() as sim:
        daemons = {}
        for name, teams in (("backing off", down), ("idle", up)):
            folder = work / name.replace(" ", "_")
            folder.mkdir()
            sections = daemon_sections(folder, sim, 1.0, console=False)
            sections["teams"] = {"webhook_url": teams.workflows_url}
            config = write_sections(folder, sections)
            daemons[name] = start_daemon(children, config, folder / "daemon.log")
        down.fail_next(503, times=100_000)
        for daemon in daemons.values():
            wait_first_polls(daemon, sim)
        event = sim.schedule("Freeze", notice=3600)
        wait_for(lambda: len(up.posts) >= 1, 20.0, "the idle daemon's first card")
        sim.start_event(event)
        wait_for(lambda: len(up.posts) >= 2, 20.0, "the idle daemon's second card")
        time.sleep(SETTLE)
        failed = len(down.posts)
        for _ in range(rounds):
            posts = len(down.posts)
            first = {name: sample(d.proc.pid) for name, d in daemons.items()}
            time.sleep(seconds)
            last = {name: sample(d.proc.pid) for name, d in daemons.items()}
            posts = len(down.posts) - posts  # the retries the back-off let through: real work
            for d in daemons.values():
                d.alive()
            # Run time from schedstat (ns), not utime + stime: a clock tick is 10 ms, a
            # third of an idle daemon's CPU over 30 s, too coarse for a 10 % target.
            cpu = {
                name: (last[name].run_ns - first[name].run_ns)
                / (last[name].wall - first[name].wall)
                for name in daemons
            }
            per_s = {name: cpu[name] / 1e6 for name in daemons}  # ns per s: ms per s
            report.row(
                "CPU ms/s backing off / idle (its POSTs)",
                f"{per_s['backing off']:.2f} / {per_s['idle']:.2f} ({posts})",
            )
            ratios.append(cpu["backing off"] / max(cpu["idle"], 0.01))
        report.row(
            "webhook POSTs the backing-off daemon made meanwhile",
            f"{len(down.posts) - failed} (before: {failed})",
        )
    median = statistics.median(ratios)
    report.row(
        "ratio backing off / idle (median)",
        f"{median:.2f}",
        f"<= {TARGET_RATIO}",
        median <= TARGET_RATIO,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    parser.add_argument("--seconds", type=float, default=30.0)
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    report = Report()
    report.section("a delivery backing off, two rows of one event")
    steps = [
        (
            "cpu",
            "CPU backing off vs idle",
            lambda c, w: measure(c, w, args.seconds, args.rounds, report),
        )
    ]
    return run_parts("sebridge backoff_idle", report, steps, {"cpu"}, "sebridge-backoff-")


if __name__ == "__main__":
    sys.exit(main())

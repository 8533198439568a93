"""kill -9 `sebridge run` over and over; count lost and duplicated deliveries per sink.

A real daemon against the IMDS simulator (with IMDS faults queued before some restarts), the
JSON-lines sink and the fake Slack (tests/fakes/slack.py), killed at random instants and the
moment a sink wrote (a JSON line landed; Slack stored a message or thread reply), while events
of every kind keep coming. After the last kill it runs until every event is gone and the outbox
is empty; then every transition in the store is looked up at each sink. The harness is
tests/killer.py (tests/test_kill.py is the quick variant that runs in CI).

    python bench/kill_test.py --kills 200          # about 5 minutes
    python bench/kill_test.py --kills 30 --seed 7  # a quick look

Prints kills (by mode), events, transitions, and per sink the lost and duplicated counts.
Target: 0 lost and 0 duplicated for both sinks. Exit status 1 when the target is missed.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the harness and the fake Slack live in tests/
from killer import run_kill_test  # noqa: E402


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--kills", type=int, default=200, help="kill -9s (200)")
    parser.add_argument("--events", type=int, default=60, help="at least this many events (60)")
    parser.add_argument("--interval", type=float, default=0.5, help="seconds between events")
    parser.add_argument("--time-scale", type=float, default=300.0, help="simulator speed-up")
    parser.add_argument("--seed", type=int, default=1, help="random seed (1)")
    parser.add_argument("--keep", type=Path, help="work in this folder and keep it")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="sebridge-kill-") as tmp:
        folder = args.keep or Path(tmp)
        folder.mkdir(parents=True, exist_ok=True)
        report = run_kill_test(
            folder,
            kills=args.kills,
            min_events=args.events,
            interval=args.interval,
            time_scale=args.time_scale,
            seed=args.seed,
            progress=lambda line: print(line, file=sys.stderr, flush=True),
        )
    print(
        f"kill_test --kills {args.kills} --events {args.events} --interval {args.interval:g} "
        f"--time-scale {args.time_scale:g} --seed {args.seed}"
    )
    for line in report.lines():
        print(line)
    missed = report.undelivered or any(c.lost or c.duplicated for c in report.sinks.values())
    print("target (0 lost, 0 duplicated per sink):", "MISS" if missed else "PASS")
    return 1 if missed else 0


if __name__ == "__main__":
    sys.exit(main())

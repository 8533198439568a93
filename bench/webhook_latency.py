"""Webhook figures of `sebridge run`, against a verifying receiver and the simulator.

The receiver (tests/fakes/webhook.py: it verifies every delivery's Standard Webhooks
signature before it answers 204) and the IMDS simulator run in this process on
127.0.0.1; each daemon is a child process, `python -m sebridge run --config FILE`,
its store in a temporary directory. Instants are wall-clock time (time.time()) read in
this process or noted by the receiver and the simulator on arrival.

1. post: the simulator's document changes (a new Reboot) -> the signed POST of its
   `scheduled` transition arrives at the receiver, poll_interval 1 s, random phase;
   the time after the poll that saw it is split out. Baseline: the same daemon's
   JSON lines sink writing the same event's line (same poll, same dispatcher).
2. rss: VmRSS of a daemon with console + webhook after a warm-up (events delivered),
   beside a console-only daemon given the same events at the same time.

    python bench/webhook_latency.py            # about 1 min
    python bench/webhook_latency.py --quick    # about 20 s smoke run

Exit status 0 whatever the figures; 1 only if a measurement could not be taken.
"""

from __future__ import annotations

import argparse
import base64
import os
import random
import secrets
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import (
    PROXY_VARS,
    BenchError,
    Children,
    JsonlTail,
    ProcSample,
    Report,
    Step,
    daemon_sections,
    event_gets,
    last_poll,
    p50_p99,
    report_sink_rss,
    run_parts,
    sample,
    simulator,
    start_daemon,
    wait_first_polls,
    wait_for,
    write_sections,
)
from sebridge.imds.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the receiver lives in tests/fakes
from fakes.webhook import FakeWebhook  # noqa: E402

# Targets.
POST_S = 0.050  # document change -> signed POST, p99 <= poll interval + 50 ms
RSS_MB = 55.0  # the bound with every sink configured; here console + webhook


def new_key() -> str:
    return "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()


def write_config(
    directory: Path,
    sim: Simulator,
    interval: float,
    *,
    hook: FakeWebhook | None,
    key: str,
    console: bool = False,
    jsonl: Path | None = None,
) -> Path:
    sections = daemon_sections(directory, sim, interval, console=console)
    if jsonl is not None:
        sections["jsonl"] = {"path": str(jsonl)}
    if hook is not None:
        sections["webhook"] = {"url": hook.url, "secret": key}
    return write_sections(directory, sections)


def posted(hook: FakeWebhook, event_id: str, start: int) -> float | None:
    """When the receiver took (verified, 204) the `scheduled` POST of `event_id`."""
    for post in hook.posts[start:]:
        if post.status == 204 and event_id.encode() in post.raw and b'"scheduled"' in post.raw:
            return post.at
    return None


# -- 1. document change -> signed POST at the receiver -----------------------------------


@dataclass
class PostTiming:
    changed: float
    polled: float  # the poll that saw the change arrived at the simulator
    posted: float  # the POST arrived at the receiver (verified)
    line: float  # the same event's JSONL line became visible (baseline sink)


def measure_post(
    args: argparse.Namespace, children: Children, work: Path, rng: random.Random
) -> list[PostTiming]:
    directory = work / "post"
    directory.mkdir()
    key = new_key()
    timings: list[PostTiming] = []
    jsonl = directory / "events.jsonl"
    with FakeWebhook(keys=[key]) as hook, simulator() as sim:
        config = write_config(directory, sim, args.interval, hook=hook, key=key, jsonl=jsonl)
        daemon = start_daemon(children, config, directory / "daemon.log")
        tail = JsonlTail(jsonl)
        try:
            wait_first_polls(daemon, sim)
            for i in range(args.warmup_events + args.events):
                time.sleep(rng.uniform(0, args.interval))  # a random phase of the polling
                start, gets = len(hook.posts), len(sim.requests)
                changed = time.time()
                event_id = sim.schedule("Reboot")
                line_at, _ = tail.wait_for(
                    lambda r, e=event_id: (
                        r.get("event_id") == e and r.get("transition") == "scheduled"
                    ),
                    5 * args.interval + 10,
                    daemon.alive,
                )
                at = wait_for(
                    lambda s=start, e=event_id: posted(hook, e, s),
                    5 * args.interval + 10,
                    f"the POST of {event_id}",
                    daemon.alive,
                )
                polled = last_poll(event_gets(sim, gets), at, changed)
                sim.complete(event_id)
                if i >= args.warmup_events:
                    timings.append(PostTiming(changed, polled, at, line_at))
            if any(p.status != 204 for p in hook.posts):
                raise BenchError("the receiver refused a delivery (signature?)")
        finally:
            children.stop(daemon.proc)
    return timings


def report_post(report: Report, args: argparse.Namespace, timings: list[PostTiming]) -> None:
    latency = [t.posted - t.changed for t in timings]
    report.section(
        f"1. document change -> signed POST at the receiver ({len(timings)} events, "
        f"poll {args.interval:g} s)"
    )
    report.percentiles(latency, (50, 99), args.interval + POST_S)
    report.poll_split(
        args.interval,
        [max(0.0, t.polled - t.changed) for t in timings],
        [t.posted - max(t.polled, t.changed) for t in timings],
        "poll -> POST taken",
        POST_S,
    )
    report.row(
        "baseline: JSON lines sink, same daemon, p50 / p99",
        p50_p99([t.line - t.changed for t in timings]),
    )


# -- 2. RSS ---------------------------------------------------------------------------------


@dataclass
class RssResult:
    webhook: ProcSample
    baseline: ProcSample


def warm_up(sim: Simulator, hook: FakeWebhook | None) -> None:
    """A few events through their lifecycle: scheduled, started, completed."""
    ids = [sim.schedule("Reboot") for _ in range(3)]
    time.sleep(1.5)
    for event_id in ids:
        sim.start_event(event_id)
    time.sleep(1.5)
    for event_id in ids:
        sim.complete(event_id)
    time.sleep(1.5)
    if hook is not None and len(hook.bodies) < 6:
        raise BenchError(f"the receiver took {len(hook.bodies)} deliveries, expected >= 6")


def measure_rss(args: argparse.Namespace, children: Children, work: Path) -> RssResult:
    directory = work / "rss"
    (directory / "webhook").mkdir(parents=True)
    (directory / "console").mkdir()
    key = new_key()
    with FakeWebhook(keys=[key]) as hook, simulator() as sim_w, simulator() as sim_c:
        with_hook = write_config(
            directory / "webhook", sim_w, 1.0, hook=hook, key=key, console=True
        )
        console_only = write_config(
            directory / "console", sim_c, 1.0, hook=None, key=key, console=True
        )
        d_hook = start_daemon(children, with_hook, directory / "webhook" / "daemon.log")
        d_console = start_daemon(children, console_only, directory / "console" / "daemon.log")
        try:
            wait_first_polls(d_hook, sim_w)
            wait_first_polls(d_console, sim_c)
            warm_up(sim_w, hook)
            warm_up(sim_c, None)
            time.sleep(args.rss_warmup)
            d_hook.alive()
            d_console.alive()
            return RssResult(sample(d_hook.proc.pid), sample(d_console.proc.pid))
        finally:
            children.stop(d_hook.proc)
            children.stop(d_console.proc)


def report_rss(report: Report, result: RssResult) -> None:
    report_sink_rss(
        report,
        "2. memory after warm-up (events delivered, then idle)",
        "webhook",
        result.webhook,
        result.baseline,
        RSS_MB,
    )


# -- main -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="Webhook figures of sebridge.")
    parser.add_argument("--events", type=int, default=50, help="events timed in part 1 (50)")
    parser.add_argument("--warmup-events", type=int, default=2, help="untimed first events (2)")
    parser.add_argument("--interval", type=float, default=1.0, help="poll_interval, part 1 (1.0)")
    parser.add_argument("--rss-warmup", type=float, default=5.0, help="idle s before RSS (5)")
    parser.add_argument("--seed", type=int, help="random seed of the event spacing")
    parser.add_argument("--quick", action="store_true", help="smoke run: 10 events")
    parser.add_argument("--only", choices=("post", "rss"), action="append")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.rss_warmup = 10, 2.0
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for name in PROXY_VARS:
        os.environ.pop(name, None)
    parts = args.only or ["post", "rss"]
    rng = random.Random(args.seed)
    report = Report()
    steps: list[Step] = [
        ("post", "post", lambda c, w: report_post(report, args, measure_post(args, c, w, rng))),
        ("rss", "rss", lambda c, w: report_rss(report, measure_rss(args, c, w))),
    ]
    header = (
        f"sebridge webhook bench: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"seed {args.seed}"
    )
    return run_parts(header, report, steps, parts, "sebridge-bench-")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)

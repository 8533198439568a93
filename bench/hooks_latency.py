"""What readiness hooks and reminders cost, beside a same-run baseline.

1. A person's approval -> StartRequests at IMDS (the simulator's receipt), p50 / p99,
   with one trivial prepare hook (`true`) and without any: the difference is what the
   gate and one hook run add (target: p99 added <= 30 ms). The daemon runs its real
   threads (carrier, hook worker) in this process, against the IMDS simulator; every
   event is approved by the use case (as a Slack click is).
2. Reminder lateness: the `reminder` transition's time minus the moment its lead came
   (NotBefore - lead), with the daemon polling every `poll_interval`: the reminders on
   their own thread, as `sebridge run` has them (asleep until the next lead), and run by
   the tick, as in `sebridge once` (target p99 <= poll interval + 100 ms; the poll
   interval is the baseline).

    .venv/bin/python bench/hooks_latency.py [--events 40] [--reminders 12]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import threading
import time
from datetime import timedelta
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parent))

from harness import ms, percentile
from sebridge.cli.assembly import compose_daemon
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.redact import Masker
from sebridge.model import TransitionKind
from sebridge.model.approval_request import ApprovalRequest
from sebridge.policy.compile import build_policy
from sebridge.store import Store


def build(sim: Simulator, folder: Path, rules: list[dict[str, Any]]) -> Daemon:
    config = config_from_mapping(
        {"policy": {"rules": rules}, "hooks": {"trivial": {"command": ["true"]}}}
    )
    return compose_daemon(
        ImdsClient(sim.url, timeout=2.0, first_timeout=5.0),
        Store(f"sqlite:///{folder}/state.db", agent="vm0"),
        {},
        policy=build_policy(config.policy),
        vm_name="vm0",
        hooks=config.hooks,
        # As `sebridge run` has it: a hook's output masked of the config's secrets.
        hook_mask=Masker([f"xoxb-{n}-0123456789abcdef0123456789" for n in range(8)]),
    )


def approval_latencies(rules: list[dict[str, Any]], events: int) -> list[float]:
    """Approval request -> StartRequests received, seconds, for `events` events."""
    with (
        Simulator(port=0, vm_name="vm0", approval_delay=3600) as sim,
        tempfile.TemporaryDirectory() as folder,
    ):
        d = build(sim, Path(folder), rules)
        d.carrier.start()
        d.parts.hook_worker.start()
        took = []
        try:
            for _ in range(events):  # recorded as the daemon's recorder does (act)
                event_id = sim.schedule("Reboot", notice=3600)
                d.act(d.poll())
                posts = len(sim.posts)
                began = sim.clock()
                d.approvals.request(ApprovalRequest(event_id, "bench", "cli"), wait=0)
                deadline = time.monotonic() + 10
                while len(sim.posts) == posts and time.monotonic() < deadline:
                    time.sleep(0.0002)
                if len(sim.posts) == posts:
                    raise SystemExit(f"no StartRequests for {event_id} within 10 s")
                took.append(sim.posts[posts].at - began)
                sim.complete(event_id)
                d.act(d.poll())
        finally:
            d.parts.hook_worker.stop(1.0)
            d.carrier.stop(1.0)
            d.imds.close()
            d.store.close()
        return took


def reminder_lateness(count: int, poll: float, *, own_thread: bool) -> list[float]:
    """Seconds between each reminder's lead and its transition, polling every `poll`;
    `own_thread`: the reminders on their own thread (`sebridge run`, each poll acted on as
    the recorder does), else run once by each tick (`sebridge once`, Daemon.tick)."""
    rules = [{"action": "ask", "remind": [897]}]
    with (
        Simulator(port=0, vm_name="vm0", approval_delay=3600) as sim,
        tempfile.TemporaryDirectory() as folder,
    ):
        d = build(sim, Path(folder), rules)
        stop = threading.Event()

        def poll_loop() -> None:
            while not stop.wait(poll):
                if own_thread:
                    d.act(d.poll())
                else:
                    d.tick()

        ids = []
        for i in range(count):  # leads come 3 s + i * 0.37 s from now
            ids.append(sim.schedule("Reboot", notice=900 + i * 0.37))
        d.tick()
        if own_thread:
            d.parts.reminders.start()
        poller = threading.Thread(target=poll_loop, daemon=True)
        poller.start()
        time.sleep(3 + count * 0.37 + 2 * poll + 1)
        stop.set()
        poller.join()
        d.parts.reminders.stop(1.0)
        late = []
        for event_id in ids:
            record = d.store.events.get(event_id)
            assert record is not None and record.event.not_before is not None
            due = record.event.not_before - timedelta(seconds=897)
            said = [
                h.transition.at
                for h in d.store.history.entries(event_id=event_id)
                if h.transition.kind == TransitionKind.REMINDER
            ]
            if len(said) != 1:
                raise SystemExit(f"{event_id}: {len(said)} reminders, not 1")
            late.append((said[0] - due).total_seconds())
        d.imds.close()
        d.store.close()
        return late


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=40)
    parser.add_argument("--reminders", type=int, default=12)
    parser.add_argument("--poll", type=float, default=1.0)
    args = parser.parse_args()
    baseline = approval_latencies([{"action": "ask"}], args.events)
    hooked = approval_latencies([{"action": "ask", "prepare": ["trivial"]}], args.events)
    base99, hook99 = percentile(baseline, 99), percentile(hooked, 99)
    print(f"approval -> StartRequests, {args.events} events each (p50 / p99):")
    print(f"  without hooks (baseline): {ms(percentile(baseline, 50))} / {ms(base99)}")
    print(f"  one trivial prepare hook: {ms(percentile(hooked, 50))} / {ms(hook99)}")
    print(f"  added at p99: {ms(hook99 - base99)} (target <= 30 ms); ratio {hook99 / base99:.2f}x")
    print(f"reminder lateness, {args.reminders} reminders, polling every {args.poll:.1f} s:")
    for own_thread, how in ((True, "own thread (run)"), (False, "run by the tick (once)")):
        late = reminder_lateness(args.reminders, args.poll, own_thread=own_thread)
        late99 = percentile(late, 99)
        print(
            f"  {how}: p50 {ms(percentile(late, 50))}, p99 {ms(late99)}, max {ms(max(late))}; "
            f"p99 / poll interval (baseline) = {late99 / args.poll:.2f}"
        )
    print(f"  target <= poll interval + 100 ms = {ms(args.poll + 0.1)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

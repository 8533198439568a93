"""Database round trips per daemon tick on PostgreSQL, counted on the wire.

An in-process daemon (the IMDS simulator, one in-memory sink) on a database of
its own on 127.0.0.1:5432 (created and dropped here), every connection through
a tap that counts the round trips clients make (Query and Sync messages; see
tests/pg.py), so nothing the daemon sends is missed, its LISTEN connection
included.

- unchanged document: round trips per tick (target 0).
- changed document (a new event each time): the tick that records it (it also
  hears its own commit and looks for approvals, as on SQLite), the next tick,
  delivering the one transition to the sink (claim, begin, ack, the empty
  claim that ends the batch) and the tick after that (it hears the ack).
- baseline, same run: a daemon that asked the database each tick whether an
  approval waits (what noticing approvals by polling would cost): 1 per tick.
- idle `sebridge run` processes, a fleet of --idle-agents on the database
  (1 s polls, JSON lines sink, 21 events in the document) for --idle-seconds:
  round trips per agent per second, all they send (the 30 s heartbeat, the
  dispatcher's look at the outbox every hour, and from an agent waiting for
  a single-holder duty one statement every 120 s). Measure over 130 s or more
  to include those waits.

    python bench/store_round_trips.py [--ticks 200] [--events 20] [--idle-seconds 130]
        [--idle-agents 2]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from sebridge.cli.assembly import compose_daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.model import Receipt
from sebridge.model.message import Message
from sebridge.store import Store

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import pg  # tests/pg.py: the temporary database and the round-trip tap


class NullSink:
    name = "null"

    def send(self, message: Message) -> Receipt | None:
        return None

    def close(self) -> None:
        pass


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ticks", type=int, default=200)
    parser.add_argument("--events", type=int, default=20)
    parser.add_argument("--idle-seconds", type=float, default=130.0)
    parser.add_argument("--idle-agents", type=int, default=2)
    parser.add_argument("--show-sql", action="store_true", help="print what the idle daemon sent")
    args = parser.parse_args()
    if not pg.server_answers():
        sys.exit(f"no PostgreSQL answers on {pg.HOST}:{pg.PORT}")
    with pg.temporary_database() as url, Simulator(vm_name="vm0", approval_delay=3600) as sim:
        tap = pg.RoundTripTap()
        sink = NullSink()
        imds = ImdsClient(sim.url, timeout=2.0)
        daemon = compose_daemon(
            imds, Store(tap.url(url), exclusive=True), {"null": sink}, vm_name="vm0"
        )
        try:
            for _ in range(3):  # first poll, the name from IMDS, our own first commits
                daemon.tick()
                time.sleep(0.05)

            def cost(action: object) -> int:
                before = tap.round_trips
                action()  # type: ignore[operator]
                return tap.round_trips - before

            unchanged = cost(lambda: [daemon.tick() for _ in range(args.ticks)])
            recorded, follow, deliver, after = [], [], [], []
            for _ in range(args.events):
                sim.schedule("Reboot")
                recorded.append(cost(daemon.tick))
                time.sleep(0.05)  # a tick is a poll interval later: our NOTIFY has arrived
                follow.append(cost(daemon.tick))
                deliver.append(cost(lambda: daemon.parts.dispatcher.deliver_due("null")))
                time.sleep(0.05)
                after.append(cost(daemon.tick))
            baseline = cost(
                lambda: [
                    daemon.store.approvals.has_pending(daemon.clock()) for _ in range(args.ticks)
                ]
            )
        finally:
            imds.close()
            daemon.store.close()
        try:
            idle, polls = idle_process(
                pg.reset(url), sim, tap, args.idle_seconds, args.idle_agents, verbose=args.show_sql
            )
        finally:
            tap.close()
    per_tick = unchanged / args.ticks
    print(f"unchanged document: {unchanged} round trips in {args.ticks} ticks = {per_tick:g}/tick")
    print(
        f"  baseline (one approvals query per tick): {baseline / args.ticks:g}/tick, "
        f"ratio {per_tick / (baseline / args.ticks):g}x (target 0)"
    )
    print(f"changed document (new event), median of {args.events}:")
    print(f"  the tick that records it:              {statistics.median(recorded):g}")
    print(f"    by events in the document (1..{args.events}): {recorded}")
    print(f"  the next tick:                         {statistics.median(follow):g}")
    print(f"  delivering its transition to one sink: {statistics.median(deliver):g}")
    print(f"  the tick after the delivery:           {statistics.median(after):g}")
    print(
        f"  ranges: {min(recorded)}-{max(recorded)}, {min(follow)}-{max(follow)}, "
        f"{min(deliver)}-{max(deliver)}, {min(after)}-{max(after)}"
    )
    print(
        f"{args.idle_agents} idle `sebridge run` agents for {args.idle_seconds:g} s "
        f"({polls} polls): "
        f"{idle} round trips = {idle / args.idle_seconds / args.idle_agents:.4f}/s per agent "
        "(issue 9's fleet target: <= 0.05/s per idle agent)"
    )


def idle_process(
    url: str,
    sim: Simulator,
    tap: pg.RoundTripTap,
    seconds: float,
    agents: int,
    *,
    verbose: bool = False,
) -> tuple[int, int]:
    """Round trips of `agents` `sebridge run` processes over `seconds` once they settled,
    and their polls."""
    sim.schedule("Reboot")
    expected = len(sim.document()["Events"])
    with tempfile.TemporaryDirectory() as tmp:
        procs = []
        for i in range(agents):
            config = Path(tmp) / f"vm{i}.toml"
            config.write_text(
                f"[imds]\nendpoint = {json.dumps(sim.url)}\npoll_interval = 1.0\n"
                f'vm_name = "vm{i}"\n'
                f"[store]\nurl = {json.dumps(tap.url(url))}\n[console]\nenabled = false\n"
                f"[jsonl]\npath = {json.dumps(str(Path(tmp) / 'events.jsonl'))}\n",
                encoding="utf-8",
            )
            procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "sebridge", "run", "--config", str(config)],
                    stdin=subprocess.DEVNULL,
                    stdout=subprocess.DEVNULL,
                )
            )
        try:
            # Start-up: the first document, its deliveries (one JSON line per event).
            lines = Path(tmp) / "events.jsonl"
            deadline = time.monotonic() + 120
            while time.monotonic() < deadline:
                text = lines.read_text(encoding="utf-8") if lines.exists() else ""
                if text.count("\n") >= expected:
                    break
                time.sleep(0.2)
            time.sleep(3.0)  # the ticks that hear the last acks
            gets = lambda: sum(1 for r in sim.requests if r.method == "GET")  # noqa: E731
            before, polls, sql = tap.round_trips, gets(), len(tap.sql)
            time.sleep(seconds)
            if verbose:
                print("\n".join(tap.sql[sql:]))
            return tap.round_trips - before, gets() - polls
        finally:
            for proc in procs:
                proc.terminate()
            for proc in procs:
                proc.wait(10)


if __name__ == "__main__":
    main()

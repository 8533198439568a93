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

    python bench/store_round_trips.py [--ticks 200] [--events 20]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path

from sebridge.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.model import Receipt
from sebridge.simulator import Simulator
from sebridge.sink import Message
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
    args = parser.parse_args()
    if not pg.server_answers():
        sys.exit(f"no PostgreSQL answers on {pg.HOST}:{pg.PORT}")
    with pg.temporary_database() as url, Simulator(vm_name="vm0", approval_delay=3600) as sim:
        tap = pg.RoundTripTap()
        sink = NullSink()
        imds = ImdsClient(sim.url, timeout=2.0)
        daemon = Daemon(imds, Store(tap.url(url), exclusive=True), [sink], vm_name="vm0")
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
                deliver.append(cost(lambda: daemon.dispatcher.deliver_due(sink)))
                time.sleep(0.05)
                after.append(cost(daemon.tick))
            baseline = cost(
                lambda: [daemon.store.has_pending_approvals() for _ in range(args.ticks)]
            )
        finally:
            imds.close()
            daemon.store.close()
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


if __name__ == "__main__":
    main()

"""Fleet mode on PostgreSQL: N `sebridge run` agents, one database, measured.

Each agent is a real process with its own imds.vm_name, its own IMDS simulator
(every simulator serves the same events under the same EventIds, as Azure does
for the VMs of one placement group) and its own JSON-lines file; all of them
reach the database through one tap that counts round trips (tests/pg.py).

- messages per transition across the fleet (target 1) and duplicates (target 0);
- StartRequests POSTs per approval across all simulators (target 1), the
  approval given with `sebridge approve` on agent 0;
- duty takeover: kill -9 of the agent holding the prune duty, seconds until
  another agent's log says it took the duty;
- idle round trips per agent per second (target <= 0.05) over --idle-seconds;
- baseline, same run: the same agents each on a SQLite file of its own (no
  fleet): messages per transition.

    python bench/fleet.py [--agents 5] [--events 3] [--idle-seconds 130]
"""

from __future__ import annotations

import argparse
import json
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections import Counter
from pathlib import Path

from sebridge.imds.simulator import Simulator

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "tests"))
import pg  # tests/pg.py: the temporary database and the round-trip tap


class Agent:
    """One `sebridge run` process with its simulator, config, log and JSON lines."""

    def __init__(self, tmp: Path, index: int, sim: Simulator, store_url: str) -> None:
        self.sim, self.name = sim, f"vm{index}"
        self.lines = tmp / f"{self.name}.jsonl"
        self.log = tmp / f"{self.name}.log"
        self.config = tmp / f"{self.name}.toml"
        self.config.write_text(
            f"[imds]\nendpoint = {json.dumps(sim.url)}\npoll_interval = 1.0\n"
            f'vm_name = "{self.name}"\n[store]\nurl = {json.dumps(store_url)}\n'
            f"[console]\nenabled = false\n[jsonl]\npath = {json.dumps(str(self.lines))}\n",
            encoding="utf-8",
        )
        with open(self.log, "ab") as err:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sebridge", "run", "--config", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )

    def records(self) -> list[dict[str, object]]:
        if not self.lines.exists():
            return []
        text = self.lines.read_text(encoding="utf-8")
        return [json.loads(x) for x in text.splitlines(keepends=True) if x.endswith("\n")]

    def took_prune(self) -> bool:
        return self.proc.poll() is None and "took the prune duty" in self.log.read_text()

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()


def wait(predicate: object, timeout: float = 60.0) -> float:
    """Seconds until predicate() holds (raises after timeout)."""
    start = time.monotonic()
    while not predicate():  # type: ignore[operator]
        if time.monotonic() - start > timeout:
            raise SystemExit("timed out")
        time.sleep(0.05)
    return time.monotonic() - start


def counts(agents: list[Agent]) -> Counter[tuple[str, str]]:
    return Counter((str(r["event_id"]), str(r["transition"])) for a in agents for r in a.records())


def one_event(agents: list[Agent], sims: list[Simulator], approve: bool, expect: int = 1) -> str:
    """Schedule one event on every simulator, approve it, end it; `expect`: how many
    "scheduled" messages to wait for before going on (the baseline's N agents each post)."""
    event_id = str(uuid.uuid4()).upper()
    names = [a.name for a in agents]
    for sim in sims:
        sim.schedule("Reboot", event_id=event_id, resources=names)
    wait(lambda: counts(agents)[(event_id, "scheduled")] >= expect)
    if approve:
        done = subprocess.run(
            [
                sys.executable,
                "-m",
                "sebridge",
                "approve",
                event_id,
                "--as",
                "bench",
                "--config",
                str(agents[0].config),
            ],
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise SystemExit(done.stderr)
        wait(lambda: counts(agents)[(event_id, "approved")] >= 1)
    for sim in sims:
        sim.complete(event_id)
    wait(
        lambda: any(k[0] == event_id and k[1] in ("completed", "cancelled") for k in counts(agents))
    )
    return event_id


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--agents", type=int, default=5)
    parser.add_argument("--events", type=int, default=3)
    parser.add_argument("--idle-seconds", type=float, default=130.0)
    args = parser.parse_args()
    if not pg.server_answers():
        sys.exit(f"no PostgreSQL answers on {pg.HOST}:{pg.PORT}")
    sims = [Simulator(vm_name=f"vm{i}", approval_delay=3600) for i in range(args.agents)]
    for sim in sims:
        sim.start()
    try:
        with pg.temporary_database() as url, tempfile.TemporaryDirectory() as tmp:
            tap = pg.RoundTripTap()
            agents = [Agent(Path(tmp), i, s, tap.url(url)) for i, s in enumerate(sims)]
            try:
                wait(lambda: all(s.requests for s in sims))
                events = [one_event(agents, sims, approve=True) for _ in range(args.events)]
                time.sleep(3.0)  # late duplicates would show up by now
                seen = counts(agents)
                per_transition = [n for (e, _), n in seen.items() if e in events]
                posts = [sum(s.start_requests.count(e) for s in sims) for e in events]
                time.sleep(2.0)
                before = tap.round_trips
                time.sleep(args.idle_seconds)
                idle = (tap.round_trips - before) / args.agents / args.idle_seconds
                (holder,) = [a for a in agents if a.took_prune()]
                holder.proc.send_signal(signal.SIGKILL)
                holder.proc.wait(10)
                takeover = wait(lambda: any(a.took_prune() for a in agents if a is not holder))
            finally:
                for agent in agents:
                    agent.stop()
                tap.close()
            baseline_agents = [
                Agent(Path(tmp), 100 + i, s, f"sqlite:///{tmp}/own{i}.db")
                for i, s in enumerate(sims)
            ]
            try:
                base_event = one_event(baseline_agents, sims, approve=False, expect=len(sims))
                time.sleep(3.0)
                base = counts(baseline_agents)[(base_event, "scheduled")]
            finally:
                for agent in baseline_agents:
                    agent.stop()
    finally:
        for sim in sims:
            sim.stop()
    print(f"fleet of {args.agents} agents on one PostgreSQL database, {args.events} events:")
    print(
        f"  messages per transition: {per_transition} (target 1 each); "
        f"duplicates: {sum(n - 1 for n in per_transition)} (target 0)"
    )
    print(f"  StartRequests per approval, all simulators: {posts} (target 1 each)")
    print(f"  prune duty takeover after kill -9 of its holder: {takeover:.2f} s")
    print(
        f"  idle round trips per agent per second over {args.idle_seconds:g} s: "
        f"{idle:.4f} (target <= 0.05)"
    )
    print(
        f"baseline, same run: the same {args.agents} agents each on its own SQLite store: "
        f"{base} messages for one transition; ratio fleet/baseline "
        f"{max(per_transition) / base:.2f}"
    )


if __name__ == "__main__":
    main()

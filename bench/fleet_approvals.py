"""Fleet approval soak: is any approval IMDS received announced as not sent?

Three real `python -m sebridge run` agents (vm0, vm1, vm2) share one PostgreSQL database of
their own (a private cluster, as fleet_scale.py runs, or --dsn); each has its own IMDS
simulator in this process, all three listing the same events (one EventId, Resources
[vm0, vm1, vm2]: an availability set), a JSON lines sink each and the console off.

Two settings make the race a fleet meets in production come by in minutes rather than days:
- every database round trip (agents and CLI) is --db-latency ms longer (2: a server across
  a network, as a fleet's is; on 127.0.0.1 a tick's transaction takes a millisecond or two,
  and two agents' transactions about one event seldom overlap); a relay in this process
  (the round-trip tap of tests/pg.py, holding the server's answers) adds it;
- `poll_interval` is --poll-interval for vm0 and --drift (1.3 %) / twice that longer for
  vm1 / vm2, so their poll phases slide past one another: agents that tick at once (the
  racing case) come by every minute or so, whatever phases the start-up gave them.
Printed: how often two agents' first polls of a policy event fell within 20 / 150 ms (the
first agent's tick, POST and outcome take about 100 ms at +2 ms a round trip).

Every --every seconds (+-30 %, so events fall at every phase of
the polls) a new Reboot appears on the three simulators at once, approved by one of these
paths in turn:

- policy: Source "User", approved by the policy of every agent's tick at once (each tick's
  transaction inserts the approval: the path that deadlocked);
- cli: `sebridge approve EVENT --config <agent k's config>` (a subprocess, k in turn) once
  an agent recorded the event, after a random part of 1.5 polls;
- cli-pair: two such CLI approvals of one event through two agents at the same moment;
- policy+cli: a "User" event a CLI approval asks for as soon as an agent recorded it (it
  comes after the policy's, which the same transaction recorded: the answer to a second
  request).

The platform, as in production: the first accepted StartRequests starts the event
--approval-delay s later on every simulator (the simulator that took it does so itself; the
others are started then), and it leaves IMDS --active s after that, so "the event left IMDS"
happens. An event no simulator got a StartRequests for is removed after --give-up s.

After --minutes, the bench waits until no event is listed, no approval is open and the outbox
is empty (a claim stuck by a lost outcome ends after its 60 s lease), stops the agents, and
reads every agent's JSON lines, the database, the agents' logs and the simulators. Per event:
did a simulator accept its StartRequests (`Simulator.start_requests`)? Counted: approvals
IMDS received, and among them those reported as not sent (a "problem" transition saying "not
sent to IMDS", in the store or a JSON line, or an approval row in state abandoned or failed:
target 0); events with more than one StartRequests across the simulators (IMDS takes a repeat
as one: reported, allowed); deadlocks (pg_stat_database) and log lines saying "deadlock";
ERROR lines; approval latency, approval recorded -> first StartRequests accepted, p50 / p99.

Baseline in the same run: the same soak against other code, --baseline-src (the `src` folder
of a worktree of the code before the fix): its agents and CLI run with PYTHONPATH set to it
(the new code's run with PYTHONPATH = this checkout's src). Each run gets a new database.

    git worktree add /tmp/sebridge-6995605 6995605
    python bench/fleet_approvals.py [--minutes 10] [--every 3] \
        --baseline-src /tmp/sebridge-6995605/src [--keep DIR]
    git worktree remove --force /tmp/sebridge-6995605

About 10.5 min per soak (the drain: seconds, unless a claim is stuck).

Exit status: 1 if the new code reported an approval IMDS received as not sent; 2 if a
measurement could not be taken (an agent died); 130 when interrupted; else 0.
"""

from __future__ import annotations

import argparse
import bisect
import contextlib
import json
import os
import queue
import random
import shutil
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from urllib.parse import urlsplit

import psycopg

from fleet_rig import ROOT, server, upstream
from harness import BenchError, log_tail, ms, percentile, terminated_on_sigterm
from harness import event_gets as get_times

sys.path[:0] = [str(ROOT / "tests")]
import pg  # noqa: E402  tests/pg.py: temporary_database
from helpers import (  # noqa: E402
    DaemonProcess,
    cli_env,
    event_gets,
    read_jsonl,
    run_cli,
    write_config,
)
from sebridge.simulator import Simulator  # noqa: E402

AGENTS = 3
PATHS = ("policy", "cli", "policy", "cli-pair", "policy", "policy+cli")
KINDS = ("policy", "cli", "cli-pair", "policy+cli")
NOT_SENT = "not sent to IMDS"
BAD_STATES = ("abandoned", "failed")


@dataclass
class CliRun:
    agent: int
    rc: int
    out: str
    seconds: float


@dataclass
class Planned:
    event_id: str
    path: str
    scheduled_at: float  # epoch
    cli_agents: tuple[int, ...] = ()
    cli_delay: float = 0.0
    cli: list[CliRun] = field(default_factory=list)


def interval(args: argparse.Namespace, agent: int) -> float:
    """Agent i's poll_interval: --poll-interval longer by i times --drift, so the agents'
    poll phases slide past each other and every phase relation (ticks at once among them)
    comes by during the soak, not only the one the start-up happened to give."""
    return round(args.poll_interval * (1 + args.drift * agent), 4)


class SlowTap(pg.RoundTripTap):
    """The round-trip tap of tests/pg.py that holds what the server sends for `delay` s
    before passing it on: a database across a network, every round trip `delay` longer
    (each chunk keeps its own deadline, so back-to-back answers are not delayed twice)."""

    def __init__(self, server: tuple[str, int], delay: float) -> None:
        self.delay = delay
        super().__init__(server)

    def _relay(self, source: socket.socket, target: socket.socket) -> None:
        held: queue.SimpleQueue[tuple[float, bytes] | None] = queue.SimpleQueue()

        def send() -> None:
            while (item := held.get()) is not None:
                time.sleep(max(0.0, item[0] - time.monotonic()))
                with contextlib.suppress(OSError):
                    target.sendall(item[1])
            with contextlib.suppress(OSError):
                target.shutdown(socket.SHUT_WR)

        threading.Thread(target=send, daemon=True).start()
        with contextlib.suppress(OSError):
            while data := source.recv(65536):
                held.put((time.monotonic() + self.delay, data))
        held.put(None)


@contextlib.contextmanager
def pythonpath(src: Path) -> Iterator[None]:
    """Children started meanwhile (DaemonProcess, run_cli: both take os.environ through
    helpers.cli_env) import sebridge from `src`; this process keeps the code it has."""
    before = os.environ.get("PYTHONPATH")
    os.environ["PYTHONPATH"] = str(src)
    try:
        yield
    finally:
        if before is None:
            os.environ.pop("PYTHONPATH", None)
        else:
            os.environ["PYTHONPATH"] = before


def code_of(src: Path) -> str:
    """Which sebridge the children import, and the commit of the tree `src` is in."""
    found = subprocess.run(
        [sys.executable, "-c", "import sebridge; print(sebridge.__file__)"],
        capture_output=True,
        text=True,
        env=cli_env(),
        check=False,
    ).stdout.strip()
    if not found.startswith(str(src)):
        raise BenchError(f"children import sebridge from {found!r}, not from {src}")
    git = ["git", "-C", str(src)]
    head = subprocess.run(
        [*git, "log", "-1", "--format=%h %s"], capture_output=True, text=True, check=False
    ).stdout.strip()
    dirty = subprocess.run(
        [*git, "status", "--porcelain", "--", "."], capture_output=True, text=True, check=False
    ).stdout.strip()
    return f"{head[:70]}" + (
        f" (+ uncommitted changes in {len(dirty.splitlines())} files)" if dirty else ""
    )


class Db:
    """The bench's own connection to the fleet's database (reads only), shared by threads."""

    def __init__(self, url: str) -> None:
        self._conn = psycopg.connect(url, autocommit=True)
        self._lock = threading.Lock()

    def rows(self, sql: str, params: Sequence[object] = ()) -> list[dict[str, object]]:
        with self._lock:
            cur = self._conn.execute(sql, params)
            names = [d.name for d in cur.description or ()]
            return [dict(zip(names, r, strict=True)) for r in cur.fetchall()]

    def value(self, sql: str, params: Sequence[object] = ()) -> object:
        rows = self.rows(sql, params)
        return next(iter(rows[0].values())) if rows else None

    def close(self) -> None:
        self._conn.close()


class Soak:
    """One soak: 3 simulators, 3 agents, one database, events and approvals for --minutes."""

    def __init__(
        self,
        label: str,
        src: Path,
        url: str,
        agent_url: str,
        work: Path,
        args: argparse.Namespace,
        rng: random.Random,
    ) -> None:
        self.agent_url = agent_url  # the agents' and the CLI's way to it (through the tap)
        self.label, self.src, self.url, self.work, self.args, self.rng = (
            label,
            src,
            url,
            work,
            args,
            rng,
        )
        self.names = [f"vm{i}" for i in range(AGENTS)]
        self.sims = [
            Simulator(port=0, vm_name=n, approval_delay=args.approval_delay).start()
            for n in self.names
        ]
        self.db = Db(url)
        self.agents: list[DaemonProcess] = []
        self.configs: list[Path] = []
        self.planned: list[Planned] = []
        self.pool = ThreadPoolExecutor(max_workers=12, thread_name_prefix="cli")
        self.stopping = threading.Event()
        self.first_post: dict[str, float] = {}
        self.given_up: set[str] = set()
        self.drain_note = ""
        self.drain_seconds = 0.0
        self.futures: list[Future[None]] = []

    # -- the fleet

    def start(self) -> None:
        for i, sim in enumerate(self.sims):
            config = write_config(
                self.work / f"vm{i}.toml",
                endpoint=sim.url,
                store_url=self.agent_url,
                vm_name=self.names[i],
                poll_interval=interval(self.args, i),
                jsonl=self.work / f"vm{i}.jsonl",
            )
            self.configs.append(config)
            self.agents.append(DaemonProcess(config, self.work / f"vm{i}.log"))
        for sim in self.sims:
            if not self.wait(lambda s=sim: event_gets(s) > 0, 60):
                raise BenchError(f"{self.label}: {sim.vm_name}'s agent never polled")
        self.platform = threading.Thread(target=self._platform, name="platform", daemon=True)
        self.platform.start()

    def check_alive(self) -> None:
        for agent in self.agents:
            if not agent.alive():
                raise BenchError(
                    f"{self.label}: {agent.log.stem} exited with "
                    f"{agent.proc.returncode}:\n{log_tail(agent.log)}"
                )

    def wait(self, predicate: object, timeout: float) -> bool:
        """Whether `predicate` held within `timeout` (BenchError when an agent died)."""
        deadline = time.monotonic() + timeout
        while not predicate():  # type: ignore[operator]
            self.check_alive()
            if time.monotonic() > deadline:
                return False
            time.sleep(0.05)
        return True

    def stop(self) -> None:
        """SIGTERM to every agent at once, SIGKILL after 15 s; then the simulators."""
        self.stopping.set()
        self.pool.shutdown(wait=True, cancel_futures=True)
        for agent in self.agents:
            if agent.alive():
                agent.signal(15)
        deadline = time.monotonic() + 15
        for agent in self.agents:
            with contextlib.suppress(subprocess.TimeoutExpired):
                agent.wait(max(0.1, deadline - time.monotonic()))
            agent.kill()
        for sim in self.sims:
            sim.stop()
        self.db.close()

    # -- the platform: an approved event starts everywhere, then leaves IMDS

    def _accepted(self) -> Iterator[tuple[int, str, float]]:
        for i, sim in enumerate(self.sims):
            for post in sim.posts:
                if post.status == 200:
                    for event_id in post.ids:
                        yield i, event_id.upper(), post.at

    def _platform(self) -> None:
        started: set[str] = set()
        while not self.stopping.is_set():
            for _, event_id, at in self._accepted():
                if at < self.first_post.get(event_id, float("inf")):
                    self.first_post[event_id] = at
            now = time.time()
            for event_id, at in list(self.first_post.items()):
                if event_id not in started and now >= at + self.args.approval_delay:
                    started.add(event_id)
                    for sim in self.sims:
                        with contextlib.suppress(KeyError):
                            sim.start_event(event_id)
            for plan in list(self.planned):
                late = now - plan.scheduled_at > self.args.give_up
                ended = plan.event_id in self.first_post or plan.event_id in self.given_up
                if late and not ended:
                    self.given_up.add(plan.event_id)
                    for sim in self.sims:
                        with contextlib.suppress(KeyError):
                            sim.complete(plan.event_id)
            time.sleep(0.05)

    # -- events and approvals

    def run(self) -> None:
        end = time.monotonic() + self.args.minutes * 60
        count = 0
        while time.monotonic() < end:
            self.check_alive()
            self._schedule(PATHS[count % len(PATHS)], count)
            count += 1
            until = time.monotonic() + self.args.every * self.rng.uniform(0.7, 1.3)
            self.wait(lambda t=until: time.monotonic() >= t, self.args.every * 2)
        self._drain()

    def _schedule(self, path: str, count: int) -> None:
        event_id = str(uuid.uuid4()).upper()
        k = count % AGENTS
        plan = Planned(event_id, path, time.time())
        if path in ("cli", "policy+cli"):
            plan.cli_agents = (k,)
        elif path == "cli-pair":
            plan.cli_agents = (k, (k + 1) % AGENTS)
        if path in ("cli", "cli-pair"):
            plan.cli_delay = self.rng.uniform(0, 1.5 * self.args.poll_interval)
        source = "User" if path.startswith("policy") else "Platform"
        for sim in self.sims:
            sim.schedule(
                "Reboot",
                event_id=event_id,
                resources=self.names,
                source=source,
                active=self.args.active,
            )
        self.planned.append(plan)
        if plan.cli_agents:
            self.futures.append(self.pool.submit(self._approve, plan))

    def _approve(self, plan: Planned) -> None:
        """Once an agent recorded the event (a person saw a message), after plan.cli_delay:
        `sebridge approve` through each agent of plan.cli_agents, at the same moment."""
        known = "SELECT count(*) FROM sightings WHERE event_id = %s AND present = 1"
        deadline = time.monotonic() + 30
        while not self.db.value(known, (plan.event_id,)):
            if time.monotonic() > deadline or self.stopping.is_set():
                return
            time.sleep(0.02)
        time.sleep(plan.cli_delay)
        barrier = threading.Barrier(len(plan.cli_agents))

        def one(agent: int) -> None:
            barrier.wait()
            began = time.monotonic()
            try:
                done = run_cli(
                    "approve",
                    plan.event_id,
                    "--as",
                    f"bench-vm{agent}",
                    "--config",
                    str(self.configs[agent]),
                )
                rc, out = done.returncode, (done.stdout + done.stderr).strip()
            except subprocess.TimeoutExpired:
                rc, out = -1, "timed out after 60 s"
            plan.cli.append(CliRun(agent, rc, out, time.monotonic() - began))

        threads = [threading.Thread(target=one, args=(a,)) for a in plan.cli_agents]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()

    def _drain(self) -> None:
        """Until nothing is listed, no approval open and the outbox empty (a stuck claim
        ends after its 60 s lease): at most --give-up + 90 s."""
        self.pool.shutdown(wait=True)
        for future in self.futures:
            future.result()  # a bug of the bench's own must not pass unseen

        def settled() -> bool:
            if any(sim.document()["Events"] for sim in self.sims):
                return False
            open_ = self.db.value(
                "SELECT count(*) FROM approvals WHERE state IN ('pending', 'posting')"
            )
            queued = self.db.value("SELECT count(*) FROM outbox WHERE state = 'pending'")
            return not open_ and not queued

        began = time.monotonic()
        if not self.wait(settled, self.args.give_up + 90):
            self.drain_note = "did not settle within the drain: figures as they stood"
        self.drain_seconds = time.monotonic() - began
        time.sleep(3)  # late duplicates, late lines

    # -- what happened

    def collect(self) -> Result:
        posts: dict[str, list[tuple[int, float]]] = {}
        for i, event_id, at in self._accepted():
            posts.setdefault(event_id, []).append((i, at))
        accepted = sum(len(sim.start_requests) for sim in self.sims)
        gets = [get_times(sim) for sim in self.sims]
        approvals = {str(r["event_id"]): r for r in self.db.rows("SELECT * FROM approvals")}
        transitions = self.db.rows(
            "SELECT id, event_id, kind, at, data FROM transitions ORDER BY id"
        )
        self.stop()  # the agents' statistics reach pg_stat_database when their sessions end
        time.sleep(1.5)
        deadlocks = pg.query(
            self.url, "SELECT deadlocks FROM pg_stat_database WHERE datname = current_database()"
        )[0][0]
        lines = [r for i in range(AGENTS) for r in read_jsonl(self.work / f"vm{i}.jsonl")]
        logs = {a.log.stem: a.log_text().splitlines() for a in self.agents}
        return Result(
            self, posts, accepted, approvals, transitions, int(str(deadlocks)), lines, logs, gets
        )


@dataclass
class Result:
    soak: Soak
    posts: dict[str, list[tuple[int, float]]]  # accepted StartRequests by event: (agent, at)
    accepted: int  # Simulator.start_requests over the three simulators
    approvals: dict[str, dict[str, object]]
    transitions: list[dict[str, object]]
    deadlocks: int
    lines: list[dict[str, object]]
    logs: dict[str, list[str]]
    gets: list[list[float]]  # arrival times of each simulator's events GETs
    code: str = ""
    round_trips: int = 0  # the fleet's and the CLI's, counted by the tap

    def __post_init__(self) -> None:
        ours = {p.event_id for p in self.soak.planned}
        self.received = {e for e in self.posts if e in ours}
        said: set[str] = set()
        self.problems = [t for t in self.transitions if t["kind"] == "problem"]
        for t in self.problems:
            if NOT_SENT in str(json.loads(str(t["data"])).get("note") or ""):
                said.add(str(t["event_id"]))
        for line in self.lines:
            if line.get("transition") == "problem" and NOT_SENT in str(line.get("note") or ""):
                said.add(str(line["event_id"]))
        said |= {e for e, r in self.approvals.items() if r["state"] in BAD_STATES}
        self.not_sent = said
        self.bad = sorted(self.received & said)

    def sighting_gaps(self) -> list[float]:
        """Per policy event: the first poll after it appeared at the second agent to poll -
        the same at the first. The first agent records the event and the policy's approval,
        POSTs and records the outcome within about 150 ms (at +2 ms per round trip): a second
        agent recording its own first sighting meanwhile is the race."""
        gaps = []
        for plan in self.soak.planned:
            if plan.path.startswith("policy"):
                firsts = sorted(
                    ts[i]
                    for ts in self.gets
                    if (i := bisect.bisect_left(ts, plan.scheduled_at)) < len(ts)
                )
                if len(firsts) >= 2:
                    gaps.append(firsts[1] - firsts[0])
        return gaps

    def latencies(self, paths: Sequence[str] = PATHS) -> list[float]:
        found = []
        for plan in self.soak.planned:
            row = self.approvals.get(plan.event_id)
            if plan.path in paths and row and plan.event_id in self.posts:
                recorded = datetime.fromisoformat(str(row["at"])).timestamp()
                found.append(min(at for _, at in self.posts[plan.event_id]) - recorded)
        return found

    def log_lines(self, *words: str) -> list[str]:
        return [
            f"{name}: {line}"
            for name, text in self.logs.items()
            for line in text
            if any(w in line.lower() for w in words)
        ]

    def level_lines(self, level: str) -> list[str]:
        return [
            f"{name}: {line}"
            for name, text in self.logs.items()
            for line in text
            if line.split()[2:3] == [level]
        ]

    def rows(self) -> list[tuple[str, str, str]]:
        planned = self.soak.planned
        states = Counter(str(r["state"]) for r in self.approvals.values())
        twice = [e for e in self.received if len(self.posts[e]) > 1]
        announced = Counter(
            str(r["event_id"]) for r in self.lines if r.get("transition") == "approved"
        )
        cli = [c for p in planned for c in p.cli]
        lat = self.latencies()
        lat_policy = self.latencies(("policy",))
        lat_cli = self.latencies(("cli", "cli-pair", "policy+cli"))
        never = [
            p.event_id
            for p in planned
            if p.event_id in self.approvals and p.event_id not in self.received
        ]
        by_path = Counter(p.path for p in planned)
        gaps = self.sighting_gaps()
        return [
            (
                "events scheduled (policy / cli / cli-pair / policy+cli)",
                f"{len(planned)} ({' / '.join(str(by_path[k]) for k in KINDS)})",
                "",
            ),
            ("approvals recorded (store rows)", str(len(self.approvals)), ""),
            ("approval states", " ".join(f"{k}={v}" for k, v in sorted(states.items())), ""),
            (
                "approvals IMDS received (events with a StartRequests accepted)",
                str(len(self.received)),
                "",
            ),
            (
                "  of which reported not sent (problem 'not sent to IMDS' or row abandoned/failed)",
                str(len(self.bad)),
                "0",
            ),
            ("approvals IMDS never received", str(len(never)), ""),
            ("problem transitions (all)", str(len(self.problems)), ""),
            (
                "events with > 1 StartRequests accepted (max per event)",
                f"{len(twice)} ({max((len(self.posts[e]) for e in twice), default=1)})",
                "allowed",
            ),
            (
                "StartRequests accepted / events received",
                f"{self.accepted} / {len(self.received)}",
                "",
            ),
            (
                "received without an 'approved' JSON line / with > 1",
                f"{sum(1 for e in self.received if not announced[e])}"
                f" / {sum(1 for e in self.received if announced[e] > 1)}",
                "0 / 0",
            ),
            ("database round trips (agents and CLI)", str(self.round_trips), ""),
            ("deadlocks (pg_stat_database)", str(self.deadlocks), "0"),
            ("agent log lines saying 'deadlock'", str(len(self.log_lines("deadlock"))), "0"),
            (
                "agent log ERROR / WARNING lines / tracebacks",
                f"{len(self.level_lines('ERROR'))} / {len(self.level_lines('WARNING'))} / "
                f"{len(self.log_lines('traceback'))}",
                "",
            ),
            (
                "CLI runs: exit codes",
                " ".join(f"{k}:{v}" for k, v in sorted(Counter(c.rc for c in cli).items())) or "-",
                "",
            ),
            (
                "policy events polled first by 2 agents within 20 / 150 ms",
                f"{sum(g < 0.02 for g in gaps)} / {sum(g < 0.15 for g in gaps)} of {len(gaps)}",
                "",
            ),
            (
                "latency approval recorded -> StartRequests, p50 / p99",
                f"{ms(percentile(lat, 50))} / {ms(percentile(lat, 99))}" if lat else "-",
                "",
            ),
            (
                "  policy / cli paths, p50",
                " / ".join(ms(percentile(v, 50)) if v else "-" for v in (lat_policy, lat_cli)),
                "",
            ),
            ("  max", ms(max(lat)) if lat else "-", ""),
        ]

    def details(self, limit: int) -> list[str]:
        """For each event IMDS received that was reported as not sent: its plan, StartRequests,
        approval row, transitions, CLI answers and every log line naming it (2 lines around)."""
        out: list[str] = []
        plans = {p.event_id: p for p in self.soak.planned}
        for event_id in self.bad[:limit]:
            plan = plans[event_id]
            out.append(
                f"--- {self.soak.label}: {event_id} (path {plan.path}, scheduled "
                f"{datetime.fromtimestamp(plan.scheduled_at).isoformat()})"
            )
            for i, at in self.posts[event_id]:
                out.append(
                    f"  StartRequests accepted by vm{i}'s IMDS at "
                    f"{datetime.fromtimestamp(at).isoformat()}"
                )
            out.append(f"  approval row: {self.approvals.get(event_id)}")
            for t in self.transitions:
                if t["event_id"] == event_id:
                    data = json.loads(str(t["data"]))
                    out.append(
                        f"  transition {t['id']} {t['kind']} at {t['at']} actor="
                        f"{data.get('actor')} via={data.get('via')} note={data.get('note')!r}"
                    )
            for c in plan.cli:
                out.append(f"  CLI via vm{c.agent}: exit {c.rc} after {c.seconds:.2f} s: {c.out!r}")
            for name, text in self.logs.items():
                hits = [n for n, line in enumerate(text) if event_id in line]
                shown: set[int] = set()
                for n in hits:
                    for m in range(max(0, n - 2), min(len(text), n + 3)):
                        if m not in shown:
                            shown.add(m)
                            out.append(f"  {name}: {text[m]}")
        if len(self.bad) > limit:
            out.append(f"(and {len(self.bad) - limit} more)")
        return out

    def keep(self, directory: Path) -> None:
        """The agents' files, the store's approvals and transitions, the plan and CLI answers."""
        directory.mkdir(parents=True, exist_ok=True)
        for path in self.soak.work.iterdir():
            if path.is_file():
                shutil.copy2(path, directory / path.name)
        dump = {
            "approvals": list(self.approvals.values()),
            "transitions": self.transitions,
            "planned": [vars(p) | {"cli": [vars(c) for c in p.cli]} for p in self.soak.planned],
            "posts": self.posts,
        }
        (directory / "store_and_plan.json").write_text(json.dumps(dump, default=str, indent=1))


def soak(label: str, src: Path, admin: str, args: argparse.Namespace, rng: random.Random) -> Result:
    with (
        pythonpath(src),
        pg.temporary_database(admin) as url,
        tempfile.TemporaryDirectory(prefix=f"sebridge-soak-{label}-") as tmp,
    ):
        code = code_of(src)
        print(
            f"{label}: {code} ({src}); {args.minutes:g} min from "
            f"{datetime.now().isoformat(timespec='seconds')}",
            flush=True,
        )
        tap = SlowTap(upstream(url), args.db_latency / 1000)
        run = Soak(label, src, url, tap.url(url), Path(tmp), args, rng)
        try:
            run.start()
            run.run()
            result = run.collect()
        finally:
            run.stop()
            tap.close()
        result.round_trips = tap.round_trips
        result.code = code
        if args.keep:
            result.keep(Path(args.keep) / label)
        print(f"{label}: done, drained in {run.drain_seconds:.0f} s {run.drain_note}", flush=True)
        return result


def report(results: list[Result]) -> None:
    header = ("measure", *(r.soak.label for r in results), "target")
    table = [header]
    rows = [r.rows() for r in results]
    for i, (name, _value, target) in enumerate(rows[0]):
        table.append((name, *(rs[i][1] for rs in rows), target))
    widths = [max(len(row[c]) for row in table) for c in range(len(header))]
    print()
    for n, row in enumerate(table):
        print("  ".join(cell.ljust(w) for cell, w in zip(row, widths, strict=True)).rstrip())
        if n == 0:
            print("-" * (sum(widths) + 2 * (len(widths) - 1)))
    for r in results:
        print(f"{r.soak.label}: {r.code}{'; ' + r.soak.drain_note if r.soak.drain_note else ''}")
    for r in results:
        for line in r.log_lines("deadlock")[:5] + r.level_lines("ERROR")[:5]:
            print(f"{r.soak.label} log: {line[:300]}")
    for r in results:
        limit = 10 if r.soak.label == "new" else 2
        for line in r.details(limit):
            print(line[:400])


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=10.0, help="length of each soak")
    p.add_argument("--every", type=float, default=3.0, help="seconds between events (+-30%%)")
    p.add_argument("--baseline-src", type=Path, help="the src folder of the code to compare")
    p.add_argument("--only", choices=("new", "baseline"), help="run one soak alone")
    p.add_argument("--poll-interval", type=float, default=1.0)
    p.add_argument(
        "--db-latency",
        type=float,
        default=2.0,
        help="ms added to every database round trip (a server across a network)",
    )
    p.add_argument(
        "--drift",
        type=float,
        default=0.013,
        help="vm1 polls this much slower than vm0, vm2 twice as much (0.013: 1.3 %%)",
    )
    p.add_argument(
        "--approval-delay", type=float, default=2.0, help="StartRequests -> Started, seconds"
    )
    p.add_argument("--active", type=float, default=10.0, help="Started -> gone, seconds")
    p.add_argument(
        "--give-up",
        type=float,
        default=90.0,
        help="an event nobody's StartRequests reached leaves after this",
    )
    p.add_argument("--seed", type=int, default=random.randrange(1 << 30))
    p.add_argument("--dsn", help="a superuser URL of a server to use instead of a private one")
    p.add_argument("--keep", help="copy each soak's logs, JSON lines and store rows here")
    args = p.parse_args(argv)
    if args.baseline_src is not None:
        args.baseline_src = args.baseline_src.resolve()
        if not (args.baseline_src / "sebridge" / "__init__.py").is_file():
            p.error(f"--baseline-src {args.baseline_src}: no sebridge package there")
    if args.only == "baseline" and args.baseline_src is None:
        p.error("--only baseline needs --baseline-src")
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for name in (
        "HTTPS_PROXY",
        "https_proxy",
        "HTTP_PROXY",
        "http_proxy",
        "ALL_PROXY",
        "all_proxy",
    ):
        os.environ.pop(name, None)  # the agents reach the simulators directly
    sides = [("new", ROOT / "src")]
    if args.baseline_src is not None:
        sides.append(("baseline", args.baseline_src))
    if args.only:
        sides = [s for s in sides if s[0] == args.only]
    print(
        f"sebridge fleet_approvals bench: {AGENTS} agents, poll_interval "
        f"{' / '.join(f'{interval(args, i):g}' for i in range(AGENTS))} s, "
        f"an event every {args.every:g} s +-30 %, database round trips +{args.db_latency:g} ms, "
        f"{args.minutes:g} min per soak, seed {args.seed}",
        flush=True,
    )
    began = time.monotonic()
    results: list[Result] = []
    with terminated_on_sigterm(), server(args.dsn, AGENTS) as admin:
        print(
            f"PostgreSQL: {'--dsn' if args.dsn else 'a private cluster'} at "
            f"{urlsplit(admin).netloc}",
            flush=True,
        )
        try:
            for label, src in sides:
                results.append(soak(label, src, admin, args, random.Random(args.seed)))
        except BenchError as exc:
            print(f"ERROR: {exc}", file=sys.stderr)
            return 2
    report(results)
    print(f"\ntotal run time {time.monotonic() - began:.0f} s")
    new = next((r for r in results if r.soak.label == "new"), None)
    return 1 if new is not None and new.bad else 0


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the agents and the cluster are stopped
        print("interrupted", file=sys.stderr)
        sys.exit(130)

"""The fleet approval soak's machinery (fleet_approvals.py): three agents on one database
through a relay that delays the server's replies, their simulators, the approvals by path,
and what is collected at the end."""

from __future__ import annotations

import argparse
import contextlib
import os
import queue
import random
import socket
import subprocess
import sys
import threading
import time
import uuid
from collections.abc import Iterator, Sequence
from concurrent.futures import Future, ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

import psycopg

from fleet_rig import ROOT, stop_agents
from harness import BenchError, log_tail
from harness import event_gets as get_times
from soak_result import PATHS, Result

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
from sebridge.imds.simulator import Simulator  # noqa: E402

AGENTS = 3


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
        stop_agents(self.agents, 15)
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

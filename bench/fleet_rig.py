"""The rig of fleet_scale.py: a PostgreSQL server with room for the fleet (a private cluster,
or the server of --dsn) and the fleet itself: N IMDS simulators, N `sebridge run` agents with
the Slack sink in Socket Mode, one fake Slack app, one database reached through the
round-trip tap of tests/pg.py; and what the fakes saw.
"""

from __future__ import annotations

import contextlib
import glob
import itertools
import os
import random
import shutil
import subprocess
import sys
import tempfile
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

from harness import BenchError, log_tail
from sebridge.imds.simulator import Simulator
from sebridge.imds.simulator.records import PostRecord

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT), str(ROOT / "tests")]
from tests.fakes.slack import FakeCall, FakeSlack  # noqa: E402

import pg  # noqa: E402  tests/pg.py: temporary databases, the round-trip tap
from helpers import (  # noqa: E402
    EVENTS_PATH,
    DaemonProcess,
    event_gets,
    free_port,
    toml_str,
    wait_until,
    write_config,
)
from test_fleet_slack import OPS, parents  # noqa: E402

INTERVAL = 1.0
SOCKET_CONNECTIONS = 2
APPROVER = "U0AAA"
CONNECTIONS_PER_AGENT = 3  # work, LISTEN, duties
SOCKET_DUTY = "took the slack.socket duty"


# -- PostgreSQL: a private cluster, or the server of --dsn ---------------------------------


def plain(url: str) -> str:
    """url without TLS or GSS encryption: the tap reads the protocol."""
    parts = urlsplit(url)
    query = dict(parse_qsl(parts.query))
    query.update(dict(parse_qsl(pg.PLAIN)))
    return urlunsplit(parts._replace(query=urlencode(query)))


@contextlib.contextmanager
def private_cluster(max_connections: int) -> Iterator[str]:
    """A PostgreSQL cluster of our own (trust auth, 127.0.0.1, a free port); yields a
    superuser URL; stopped and removed on exit, whatever happens."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"))
    if not found:
        raise BenchError("no /usr/lib/postgresql/*/bin/initdb: give --dsn instead")
    bindir = Path(found[-1]).parent
    as_root = os.geteuid() == 0
    prefix = ["runuser", "-u", "postgres", "--"] if as_root else []  # initdb refuses root
    tmp = Path(tempfile.mkdtemp(prefix="sebridge-pg-"))
    try:
        if as_root:
            shutil.chown(tmp, "postgres")
        data, port = tmp / "data", free_port()

        def run(*argv: str) -> None:
            done = subprocess.run(
                [*prefix, *argv], capture_output=True, text=True, check=False, timeout=120
            )
            if done.returncode != 0:
                raise BenchError(f"{argv[0]} failed: {done.stdout}{done.stderr}")

        run(str(bindir / "initdb"), "-D", str(data), "-A", "trust", "-U", "postgres", "-N")
        options = (
            f"-p {port} -k {tmp} -c max_connections={max_connections} -c listen_addresses=127.0.0.1"
        )
        pg_ctl = str(bindir / "pg_ctl")
        run(pg_ctl, "-D", str(data), "-l", str(tmp / "server.log"), "-w", "-o", options, "start")
        try:
            yield f"postgresql://postgres@127.0.0.1:{port}/postgres?{pg.PLAIN}"
        finally:
            run(pg_ctl, "-D", str(data), "-m", "fast", "-w", "stop")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


@contextlib.contextmanager
def server(dsn: str | None, agents: int) -> Iterator[str]:
    """A superuser URL with room for `agents` agents: --dsn (checked) or a private cluster."""
    needed = CONNECTIONS_PER_AGENT * agents + 10
    if dsn is None:
        with private_cluster(max(300, needed + 50)) as url:
            yield url
        return
    url = plain(dsn)
    rows = pg.query(url, "SHOW max_connections")
    if int(str(rows[0][0])) < needed:
        sys.exit(
            f"{urlsplit(url).netloc}: max_connections = {rows[0][0]}, and {agents} agents need "
            f"{needed} ({CONNECTIONS_PER_AGENT} each + 10): raise it, or leave out --dsn to "
            "run a private cluster"
        )
    yield url


def upstream(url: str) -> tuple[str, int]:
    parts = urlsplit(url)
    return parts.hostname or "127.0.0.1", parts.port or 5432


# -- one fleet ------------------------------------------------------------------------------


class Fleet:
    """N simulators, N agents, one fake Slack, one database reached through a tap."""

    def __init__(self, size: int, work: Path, database: str, tap: pg.RoundTripTap) -> None:
        self.size, self.work, self.tap = size, work, tap
        self.names = [f"vm{i}" for i in range(size)]
        self.sims = [Simulator(vm_name=n, approval_delay=3600).start() for n in self.names]
        self.slack = FakeSlack(channels={OPS: "ops"}).start()
        self.agents: list[DaemonProcess] = []
        self.store_url = tap.url(database)

    def start_agents(self, rng: random.Random) -> None:
        """One agent after the other, each after the previous one's first poll and a random
        part of the interval: their polls fall at independent phases, as on VMs that booted
        at different times (started at once, they poll in a bunch)."""
        for i in range(self.size):
            self._start(i)
            time.sleep(rng.random() * INTERVAL)
        wait_until(
            lambda: (
                len(self.holders()) == SOCKET_CONNECTIONS
                and self.slack.socket_connections == SOCKET_CONNECTIONS
            ),
            60,
            message=f"{SOCKET_CONNECTIONS} agents holding a Socket Mode connection",
        )

    def _start(self, i: int) -> None:
        """Start agent i and wait for its first poll."""
        slack = self.slack
        section = (
            f"[slack]\nbot_token = {toml_str(slack.bot_token)}\n"
            f"app_token = {toml_str(slack.app_token)}\nchannel = {toml_str(OPS)}\n"
            f"approvers = [{toml_str(APPROVER)}]\napi_url = {toml_str(slack.url)}\n"
            f"socket_connections = {SOCKET_CONNECTIONS}\n"
        )
        config = write_config(
            self.work / f"vm{i}.toml",
            endpoint=self.sims[i].url,
            store_url=self.store_url,
            vm_name=self.names[i],
            poll_interval=INTERVAL,
            extra=section,
        )
        self.agents.append(DaemonProcess(config, self.work / f"vm{i}.log"))
        sim = self.sims[i]
        wait_until(
            lambda: self.check_alive() or event_gets(sim) > 0, 60, message=f"vm{i}'s first poll"
        )

    def clicked(self, event_id: str) -> list[int]:
        """The agents whose log says they took a click approving the event."""
        line = f"approved {event_id} from Slack"
        return [i for i, a in enumerate(self.agents) if line in a.log_text()]

    def holders(self) -> list[int]:
        """The agents whose log says they took the Socket Mode duty."""
        return [i for i, a in enumerate(self.agents) if SOCKET_DUTY in a.log_text()]

    def check_alive(self) -> bool:
        """False, or BenchError naming the first agent that died, with its log."""
        for agent in self.agents:
            if not agent.alive():
                raise BenchError(
                    f"{agent.log.stem} exited with {agent.proc.returncode}:\n{log_tail(agent.log)}"
                )
        return False

    def stop(self) -> None:
        """SIGTERM to every agent at once, SIGKILL to any left after 10 s; then the fakes."""
        stop_agents(self.agents, 10)
        for sim in self.sims:
            sim.stop()
        self.slack.stop()

    # -- what the fakes saw

    def parent_call(self, event_id: str) -> FakeCall | None:
        """The first chat.postMessage of the event's message (not a thread reply)."""
        for call in self.slack.calls_to("chat.postMessage"):
            payload = (call.params.get("metadata") or {}).get("event_payload") or {}
            if payload.get("event_id") == event_id and not call.params.get("thread_ts"):
                return call
        return None

    def replies(self, event_id: str) -> Counter[str]:
        """The event's thread replies by transition key ("kind@time")."""
        keys: Counter[str] = Counter()
        for message in parents(self.slack, event_id):
            for reply in self.slack.replies(message.channel, message.ts):
                payload = (reply.metadata or {}).get("event_payload") or {}
                keys[str(payload.get("key", "?"))] += 1
        return keys

    def posts(self, event_id: str) -> list[tuple[int, PostRecord]]:
        """(agent, POST) of every StartRequests POST naming the event, at any simulator."""
        wanted = event_id.upper()
        return [
            (i, post)
            for i, sim in enumerate(self.sims)
            for post in sim.posts
            if wanted in (x.upper() for x in post.ids)
        ]

    def polled_since(self, listed: list[int], since: float) -> bool:
        """Whether every simulator of `listed` got a GET of the events after `since`."""
        return all(
            any(r.at > since for r in self.sims[i].requests if r.path == EVENTS_PATH)
            for i in listed
        )

    def phase_gap(self) -> float:
        """The largest gap between the agents' poll phases (seconds, modulo the interval)."""
        phases = sorted(
            max(r.at for r in sim.requests if r.path == EVENTS_PATH) % INTERVAL for sim in self.sims
        )
        gaps = [b - a for a, b in itertools.pairwise(phases)]
        return max([*gaps, phases[0] + INTERVAL - phases[-1]])

    def quiet(self, for_seconds: float = 0.2, timeout: float = 5.0) -> None:
        """Wait until no round trip reached the database for `for_seconds` (or `timeout`)."""
        deadline = time.monotonic() + timeout
        last, since = self.tap.round_trips, time.monotonic()
        while time.monotonic() < deadline:
            time.sleep(0.02)
            if self.tap.round_trips != last:
                last, since = self.tap.round_trips, time.monotonic()
            elif time.monotonic() - since >= for_seconds:
                return


def stop_agents(agents: list[DaemonProcess], grace: float) -> None:
    """SIGTERM to every agent at once, SIGKILL to any left after `grace` seconds."""
    for agent in agents:
        if agent.alive():
            agent.signal(15)
    deadline = time.monotonic() + grace
    for agent in agents:
        with contextlib.suppress(subprocess.TimeoutExpired):
            agent.wait(max(0.1, deadline - time.monotonic()))
        agent.kill()

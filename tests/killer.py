"""Fault injection: `sebridge run` under repeated kill -9, counted against what the sinks got.

The IMDS simulator and the fake Slack run in this process on 127.0.0.1; the daemon is a real
`python -m sebridge run` child with its store, config and JSON-lines file in a work folder,
Slack in HTTP mode (no websocket to drop). A feeder thread schedules events of every kind
(the policy approves some by itself, so StartRequests are POSTed too) while the daemon is
killed over and over, each time in one of three ways:

- random: SIGKILL at a random instant in its first seconds (start-up, polls, deliveries);
- jsonl: SIGKILL the moment the JSON-lines file grows (a line just landed, the ack not yet);
- slack: SIGKILL the moment the fake Slack stores a message or thread reply.

Before some restarts an IMDS fault is queued (500, 429, a malformed body, a proxy's HTML
page, a reset, a slow answer). After the last kill, the daemon runs until every event has
left the document and the outbox is empty, then gets SIGTERM. Every transition the store
holds for a sink is then looked up at that sink:

- JSON lines: the line of (event, transition, time);
- Slack: an event's first transition is its message (metadata event_id), each later one a
  thread reply (metadata key "kind@time").

None found is lost; more than one is duplicated. Used by tests/test_kill.py (quick, in CI)
and bench/kill_test.py (long).
"""

from __future__ import annotations

import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from fakes.slack import FakeSlack
from sebridge.imds.simulator import Simulator
from sebridge.store.codec import transition_from_json

__all__ = ["KillReport", "SinkCount", "run_kill_test"]

CHANNEL = "C0KILLTEST"
MODES = ("random", "jsonl", "slack")
FAULTS = ("500", "429", "malformed", "html", "reset", "slow_first")
# (type, source, duration): Freeze under 9 s and User events are approved by the policy.
KINDS = (
    ("Freeze", "Platform", 5),
    ("Reboot", "User", -1),
    ("Reboot", "Platform", -1),
    ("Redeploy", "Platform", -1),
    ("Terminate", "Platform", -1),
    ("Preempt", "Platform", -1),
)


@dataclass
class SinkCount:
    """One sink's tally: transitions the store holds for it, what arrived, lost, duplicated."""

    transitions: int = 0
    received: int = 0
    lost: int = 0
    duplicated: int = 0


@dataclass
class KillReport:
    """What a run did and found."""

    kills: Counter[str] = field(default_factory=Counter)  # by mode; "jsonl"/"slack" = hit
    faults: int = 0
    events: int = 0
    transitions: int = 0
    undelivered: int = 0  # outbox rows left pending or failed at the end
    sinks: dict[str, SinkCount] = field(default_factory=dict)
    seconds: float = 0.0

    @property
    def total_kills(self) -> int:
        return sum(self.kills.values())

    def lines(self) -> list[str]:
        """The figures, for people."""
        kills = ", ".join(f"{self.kills[m]} {m}" for m in (*MODES, "missed"))
        out = [
            f"kills: {self.total_kills} ({kills}); IMDS faults queued: {self.faults}",
            f"events: {self.events}; transitions in the store: {self.transitions}; "
            f"outbox rows not delivered: {self.undelivered}; {self.seconds:.0f} s",
        ]
        for name, c in self.sinks.items():
            out.append(
                f"{name:<6} transitions {c.transitions:>4}  received {c.received:>4}  "
                f"lost {c.lost:>3}  duplicated {c.duplicated:>3}"
            )
        return out


class _Run:
    def __init__(self, folder: Path, sim: Simulator, slack: FakeSlack, seed: int) -> None:
        self.folder = folder
        self.sim = sim
        self.slack = slack
        self.rng = random.Random(seed)
        self.db = folder / "state.db"
        self.jsonl = folder / "events.jsonl"
        self.log = folder / "daemon.log"
        self.config = folder / "sebridge.toml"
        self.config.write_text(
            "\n".join(
                [
                    "[imds]",
                    f"endpoint = {json.dumps(sim.url)}",
                    "poll_interval = 0.2",
                    'vm_name = "vm0"',
                    "[store]",
                    f"url = {json.dumps(f'sqlite:///{self.db}')}",
                    "[dispatch]",
                    "shutdown_grace_seconds = 2.0",
                    "[console]",
                    "enabled = false",
                    "[jsonl]",
                    f"path = {json.dumps(str(self.jsonl))}",
                    "[http]",
                    'listen = "127.0.0.1:0"',
                    "[slack]",
                    f"bot_token = {json.dumps(slack.bot_token)}",
                    'signing_secret = "kill-test-signing-secret"',
                    f'channel = "{CHANNEL}"',
                    'approvers = ["U0AAA"]',
                    f"api_url = {json.dumps(slack.url)}",
                ]
            )
            + "\n",
            encoding="utf-8",
        )
        self.event_ids: list[str] = []
        self.feeding = threading.Event()

    # ---------------------------------------------------------------- processes

    def start(self) -> subprocess.Popen[bytes]:
        env = {k: v for k, v in os.environ.items() if k != "SEBRIDGE_CONFIG"}
        for proxy in ("HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"):
            env.pop(proxy, None)
        with open(self.log, "ab") as err:
            return subprocess.Popen(
                [sys.executable, "-m", "sebridge", "run", "--config", str(self.config)],
                stdin=subprocess.DEVNULL,
                stdout=subprocess.DEVNULL,
                stderr=err,
                env=env,
            )

    def jsonl_size(self) -> int:
        try:
            return self.jsonl.stat().st_size
        except FileNotFoundError:
            return 0

    def slack_posts(self) -> int:
        web = self.slack.web
        with web.lock:
            return len(web.messages) + sum(len(t) for t in web.threads.values())

    def kill_once(self, mode: str, report: KillReport) -> None:
        """Start the daemon and SIGKILL it the way `mode` says."""
        watch: Callable[[], int] | None = {
            "jsonl": self.jsonl_size,
            "slack": self.slack_posts,
        }.get(mode)
        before = watch() if watch else 0
        proc = self.start()
        if watch is None:
            time.sleep(self.rng.uniform(0.0, 2.5))
            hit = "random"
        else:
            # Within a millisecond or two of the sink's write: before the ack, mostly.
            deadline = time.monotonic() + 5.0
            while watch() == before and time.monotonic() < deadline and proc.poll() is None:
                time.sleep(0.0005)
            hit = mode if watch() != before else "missed"
        if proc.poll() is not None:
            raise RuntimeError(f"the daemon exited by itself ({proc.returncode}); see {self.log}")
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        report.kills[hit] += 1

    # ---------------------------------------------------------------- the scenario

    def feed(self, interval: float, at_least: int, stop: threading.Event) -> None:
        """Schedule one event every `interval` s until `stop` is set and `at_least` exist."""
        while not (stop.is_set() and len(self.event_ids) >= at_least):
            event_type, source, duration = self.rng.choice(KINDS)
            self.event_ids.append(self.sim.schedule(event_type, source=source, duration=duration))
            time.sleep(interval)
        self.feeding.set()

    def maybe_fault(self, report: KillReport) -> None:
        if self.rng.random() < 0.3:
            kind = self.rng.choice(FAULTS)
            seconds = 0.5 if kind == "slow_first" else None
            self.sim.inject(kind, count=self.rng.randint(1, 3), seconds=seconds)
            report.faults += 1

    def settle(self, timeout: float) -> None:
        """Run the daemon until the document is empty and everything is delivered; SIGTERM."""
        proc = self.start()
        deadline = time.monotonic() + timeout
        try:
            while time.monotonic() < deadline:
                if proc.poll() is not None:
                    raise RuntimeError(f"the daemon exited ({proc.returncode}); see {self.log}")
                done = not self.sim.document()["Events"] and self.undelivered() == 0
                if done and self.transitions_settled():
                    break
                time.sleep(0.2)
            else:
                raise RuntimeError(f"not settled in {timeout:g}s; see {self.log}")
        finally:
            proc.send_signal(signal.SIGTERM)
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)

    def transitions_settled(self) -> bool:
        # Gone events produce their last transition on the poll after they go.
        first = self.query("SELECT COUNT(*) FROM transitions")
        time.sleep(0.5)
        return first == self.query("SELECT COUNT(*) FROM transitions") and self.undelivered() == 0

    # ---------------------------------------------------------------- counting

    def query(self, sql: str) -> list[tuple[Any, ...]]:
        if not self.db.exists():
            return []
        conn = sqlite3.connect(f"file:{self.db}?mode=ro", uri=True, timeout=10.0)
        try:
            return conn.execute(sql).fetchall()
        finally:
            conn.close()

    def undelivered(self) -> int:
        rows = self.query("SELECT COUNT(*) FROM outbox WHERE state != 'delivered'")
        return int(rows[0][0]) if rows else 0

    def count(self, report: KillReport) -> None:
        rows = self.query(
            "SELECT t.id, t.data, o.sink FROM transitions t "
            "JOIN outbox o ON o.transition_id = t.id ORDER BY t.id"
        )
        report.transitions = len(self.query("SELECT id FROM transitions"))
        report.undelivered = self.undelivered()
        report.events = len(self.event_ids)
        by_sink: dict[str, list[tuple[int, Any]]] = {}
        for transition_id, data, sink in rows:
            by_sink.setdefault(sink, []).append((transition_id, transition_from_json(data)))
        report.sinks["jsonl"] = self.count_jsonl(by_sink.get("jsonl", []))
        report.sinks["slack"] = self.count_slack(by_sink.get("slack", []))

    def count_jsonl(self, transitions: list[tuple[int, Any]]) -> SinkCount:
        lines: Counter[tuple[str, str, str]] = Counter()
        text = self.jsonl.read_text(encoding="utf-8") if self.jsonl.exists() else ""
        for raw in text.splitlines():
            try:
                line = json.loads(raw)
            except ValueError:  # a line cut short: received, but matches no transition
                lines[("torn", raw, "")] += 1
                continue
            lines[(line["event_id"], line["transition"], line["ts"])] += 1
        wanted = Counter((t.event_id, t.kind, t.at.isoformat()) for _, t in transitions)
        return _tally(wanted, lines)

    def count_slack(self, transitions: list[tuple[int, Any]]) -> SinkCount:
        web = self.slack.web
        with web.lock:
            messages = list(web.messages.values())
            threads = {key: list(replies) for key, replies in web.threads.items()}
        got: Counter[tuple[str, str]] = Counter()
        for message in messages:
            payload = (message.metadata or {}).get("event_payload") or {}
            got[(payload.get("event_id", "?"), "message")] += 1
            for reply in threads.get((message.channel, message.ts), ()):
                key = ((reply.metadata or {}).get("event_payload") or {}).get("key", "?")
                got[(payload.get("event_id", "?"), key)] += 1
        wanted: Counter[tuple[str, str]] = Counter()
        seen: set[str] = set()
        for _, t in transitions:
            first = t.event_id not in seen
            seen.add(t.event_id)
            wanted[(t.event_id, "message" if first else f"{t.kind}@{t.at.isoformat()}")] += 1
        return _tally(wanted, got)


def _tally(wanted: Counter[Any], got: Counter[Any]) -> SinkCount:
    count = SinkCount(transitions=sum(wanted.values()), received=sum(got.values()))
    for key, n in wanted.items():
        count.lost += max(0, n - got.get(key, 0))
    for key, n in got.items():
        count.duplicated += max(0, n - wanted.get(key, 0))
    return count


def run_kill_test(
    folder: Path,
    *,
    kills: int,
    min_events: int = 24,
    interval: float = 0.5,
    time_scale: float = 300.0,
    seed: int = 0,
    progress: Callable[[str], None] | None = None,
) -> KillReport:
    """Kill `sebridge run` `kills` times over a stream of events; count at the sinks."""
    report = KillReport()
    began = time.monotonic()
    with (
        Simulator(port=0, vm_name="vm0", time_scale=time_scale, approval_delay=2) as sim,
        FakeSlack(channels={CHANNEL: "ops"}) as slack,
    ):
        run = _Run(folder, sim, slack, seed)
        stop_feeding = threading.Event()
        feeder = threading.Thread(
            target=run.feed, args=(interval, min_events, stop_feeding), daemon=True
        )
        feeder.start()
        try:
            for number in range(kills):
                run.maybe_fault(report)
                run.kill_once(MODES[number % len(MODES)], report)
                if progress and (number + 1) % 10 == 0:
                    progress(f"{number + 1} kills, {len(run.event_ids)} events so far")
        finally:
            stop_feeding.set()
        feeder.join()
        sim.clear_faults()
        run.settle(timeout=120.0)
        run.count(report)
    report.seconds = time.monotonic() - began
    return report

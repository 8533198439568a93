"""Shared helpers for the end-to-end tests: bounded waits, configs, processes, store reads.

Plain functions and classes only; the fixtures built on them are in tests/conftest.py.
"""

from __future__ import annotations

import contextlib
import io
import json
import os
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any, TypeVar

from sebridge.imds.simulator import Simulator
from sebridge.model import Receipt
from sebridge.model.message import Message

if TYPE_CHECKING:
    from sebridge.engine.daemon import Daemon
    from sebridge.engine.runner import Runner
    from sebridge.model.approval_request import ApprovalRequest, Outcome

T = TypeVar("T")

EVENTS_PATH = "/metadata/scheduledevents"
# What requests, urllib and slack_sdk read from the environment to reach a host through a
# proxy (or not): the fakes are on loopback, so none of it may come from the machine's.
PROXY_VARS = tuple(
    name
    for var in ("HTTPS_PROXY", "HTTP_PROXY", "ALL_PROXY", "NO_PROXY")
    for name in (var, var.lower())
)


def wait_until(
    predicate: Callable[[], T],
    timeout: float = 10.0,
    interval: float = 0.05,
    message: str | Callable[[], str] = "",
) -> T:
    """Poll `predicate` until it returns something truthy (returned), or fail after `timeout`."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() >= deadline:
            text = message() if callable(message) else message
            raise AssertionError(f"timed out after {timeout:g}s waiting for {text or predicate}")
        time.sleep(interval)


class FakeClock:
    """Epoch seconds that move only when told to (the simulator's `clock`)."""

    def __init__(self, now: float | None = None) -> None:
        self.now = time.time() if now is None else now

    def __call__(self) -> float:
        return self.now

    def advance(self, seconds: float) -> None:
        self.now += seconds


def toml_str(value: str) -> str:
    """A TOML basic string (JSON's escaping is valid TOML for what we write)."""
    return json.dumps(value)


def write_config(
    path: Path,
    *,
    endpoint: str,
    db: Path | None = None,
    jsonl: Path | str | None = None,
    console: bool = False,
    poll_interval: float = 0.2,
    dry_run: bool = False,
    vm_name: str = "",
    extra: str = "",
    store_url: str = "",
) -> Path:
    """A config file for tests: everything in tmp_path, fast polls, quick shutdown.

    The store: the SQLite file `db`, or `store_url` (a test's PostgreSQL database).
    """
    lines = [
        "[imds]",
        f"endpoint = {toml_str(endpoint)}",
        f"poll_interval = {poll_interval}",
        f"vm_name = {toml_str(vm_name)}",
        "[store]",
        f"url = {toml_str(store_url or f'sqlite:///{db}')}",
        "[policy]",
        f"dry_run = {'true' if dry_run else 'false'}",
        "[dispatch]",
        "shutdown_grace_seconds = 2.0",
        "[console]",
        f"enabled = {'true' if console else 'false'}",
    ]
    if jsonl is not None:
        lines += ["[jsonl]", f"path = {toml_str(str(jsonl))}"]
    path.write_text("\n".join(lines) + "\n" + extra, encoding="utf-8")
    return path


def read_jsonl(path: Path) -> list[dict[str, Any]]:
    """Complete lines of a JSON-lines file (a line still being written is skipped)."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        return []
    return [json.loads(line) for line in text.splitlines(keepends=True) if line.endswith("\n")]


def lines_of(path: Path, event_id: str, kind: str | None = None) -> list[dict[str, Any]]:
    """The JSONL records of one event (optionally of one transition kind)."""
    return [
        r
        for r in read_jsonl(path)
        if r["event_id"] == event_id and (kind is None or r["transition"] == kind)
    ]


def wait_line(path: Path, event_id: str, kind: str, timeout: float = 15.0) -> dict[str, Any]:
    """Wait for the JSONL record of (event, transition) and return it."""
    found = wait_until(
        lambda: lines_of(path, event_id, kind),
        timeout,
        message=lambda: f"a {kind!r} line for {event_id}; file has {read_jsonl(path)}",
    )
    return found[0]


def query(db: Path, sql: str, params: Sequence[Any] = ()) -> list[tuple[Any, ...]]:
    """Read the store the way a person would: a separate, read-only SQLite connection."""
    conn = sqlite3.connect(f"file:{db}?mode=ro", uri=True, timeout=10.0)
    try:
        return conn.execute(sql, params).fetchall()
    finally:
        conn.close()


def transitions_in_store(db: Path) -> list[tuple[str, str]]:
    """(event_id, kind) of every stored transition, in order."""
    return [(r[0], r[1]) for r in query(db, "SELECT event_id, kind FROM transitions ORDER BY id")]


def undelivered(db: Path) -> int:
    """Outbox rows not delivered (pending or failed)."""
    return int(query(db, "SELECT COUNT(*) FROM outbox WHERE state != 'delivered'")[0][0])


def event_gets(sim: Simulator) -> int:
    """How many Scheduled Events GETs the simulator received."""
    return sum(1 for r in sim.requests if r.method == "GET" and r.path == EVENTS_PATH)


def wait_polls(sim: Simulator, count: int = 3, timeout: float = 10.0) -> None:
    """Wait until the daemon polled `count` more times (lets duplicates or strays show up)."""
    start = event_gets(sim)
    wait_until(lambda: event_gets(sim) >= start + count, timeout, message=f"{count} more polls")


@contextlib.contextmanager
def simulators(names: Sequence[str], **options: Any) -> Iterator[list[Simulator]]:
    """One IMDS simulator per VM name, each on a free port (a fleet's agents); all stopped
    at the end. options: the Simulator's."""
    with contextlib.ExitStack() as stack:
        yield [stack.enter_context(Simulator(port=0, vm_name=n, **options)) for n in names]


def free_port() -> int:
    """A local port nothing listens on (connections to it are refused)."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def cli_env(**overrides: str) -> dict[str, str]:
    """The environment for a sebridge subprocess: ours, without a stray $SEBRIDGE_CONFIG."""
    env = {k: v for k, v in os.environ.items() if k != "SEBRIDGE_CONFIG"}
    env.update(overrides)
    return env


def run_cli(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60.0
) -> subprocess.CompletedProcess[str]:
    """`sebridge ARGS` as a real process; returns its exit code and output."""
    return subprocess.run(
        [sys.executable, "-m", "sebridge", *args],
        capture_output=True,
        text=True,
        timeout=timeout,
        env=env if env is not None else cli_env(),
        check=False,
    )


class DaemonProcess:
    """`sebridge run --config CFG` as a real process; stderr goes to a log file, stdout
    (the console sink) to `stdout` when given; `env` is added to its environment."""

    def __init__(
        self,
        config: Path,
        log: Path,
        *,
        env: dict[str, str] | None = None,
        stdout: Path | None = None,
    ) -> None:
        self.config = config
        self.log = log
        with open(log, "ab") as err, open(stdout or os.devnull, "ab") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "-m", "sebridge", "run", "--config", str(config)],
                stdin=subprocess.DEVNULL,
                stdout=out,
                stderr=err,
                env=cli_env(**(env or {})),
            )

    @property
    def pid(self) -> int:
        return self.proc.pid

    def alive(self) -> bool:
        return self.proc.poll() is None

    def signal(self, signum: int) -> None:
        self.proc.send_signal(signum)

    def wait(self, timeout: float) -> int:
        return self.proc.wait(timeout)

    def kill(self) -> None:
        """SIGKILL (idempotent) and reap."""
        if self.proc.poll() is None:
            self.proc.kill()
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.proc.wait(10)

    def log_text(self) -> str:
        try:
            return self.log.read_text(encoding="utf-8", errors="replace")
        except FileNotFoundError:
            return ""


def process_alive(pid: int) -> bool:
    """Whether process `pid` runs (a zombie answers kill 0, yet it has ended)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    stat = Path(f"/proc/{pid}/stat")
    return stat.exists() and stat.read_text().split(")")[-1].split()[0] != "Z"


def threads_left(before: set[threading.Thread], grace: float = 3.0) -> list[str]:
    """Names of threads started since `before` still alive after `grace` seconds."""
    deadline = time.monotonic() + grace
    while True:
        left = [t.name for t in threading.enumerate() if t not in before and t.is_alive()]
        if not left or time.monotonic() > deadline:
            return left
        time.sleep(0.02)


class RunnerThread:
    """`Runner.run` on a thread of this process, as `sebridge run` runs it on its main one;
    stop() ends it the way SIGTERM does."""

    def __init__(self, runner: Runner) -> None:
        self._stop = threading.Event()
        self._thread = threading.Thread(target=runner.run, args=(self._stop,), name="daemon-run")

    def start(self) -> None:
        self._thread.start()

    def stop(self, timeout: float = 15.0) -> None:
        """Ask run() to return; fail the test if it has not within `timeout` seconds."""
        self._stop.set()
        if self._thread.ident is not None:  # started
            self._thread.join(timeout)
            assert not self._thread.is_alive(), "runner.run() did not return"


def cli_main(*argv: str) -> tuple[int, str, str]:
    """`sebridge ARGV` in this process -> (exit code, stdout, stderr)."""
    from sebridge.cli.main import main

    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        try:
            code = main(list(argv))
        except SystemExit as exc:  # argparse
            code = exc.code if isinstance(exc.code, int) else 2
    return code, out.getvalue(), err.getvalue()


def carried(daemon: Daemon, request: ApprovalRequest, **options: Any) -> Outcome:
    """A channel's request (Approvals.request, on a thread of its own, as a channel's), its
    approval carried out by the daemon's carrier one round at a time on this thread, as the
    carrier's own thread would once woken: a test that ticks stays in step."""
    outcome: list[Outcome] = []
    asker = threading.Thread(
        target=lambda: outcome.append(daemon.approvals.request(request, **options))
    )
    asker.start()
    while asker.is_alive():
        daemon.carrier.run_once()
        asker.join(0.01)
    return outcome[0]


class ListSink:
    """A sink that keeps every Message it is given, in order."""

    name = "list"

    def __init__(self) -> None:
        self.sent: list[Message] = []

    def send(self, message: Message) -> Receipt | None:
        self.sent.append(message)
        return None

    def close(self) -> None:
        pass

    def by_event(self, event_id: str) -> list[Message]:
        return [m for m in self.sent if m.transition.event_id == event_id]

    def kinds(self, event_id: str) -> list[str]:
        return [m.transition.kind for m in self.by_event(event_id)]

    def pairs(self) -> list[tuple[str, str]]:
        """(kind, event id) of every message, in order."""
        return [(m.transition.kind, m.transition.event_id) for m in self.sent]

    def of(self, event_id: str, kind: str) -> list[Message]:
        return [m for m in self.by_event(event_id) if m.transition.kind == kind]

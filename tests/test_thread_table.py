"""docs/ARCHITECTURE.md's thread table is the threads a running daemon really has.

A daemon with every part is built as `sebridge run` builds it (cli/runtime.py) and run in
this process: a PostgreSQL store, every sink against its fake (Slack in Socket Mode, Teams,
Jira, Kubernetes, the console, JSON lines), a hook, an HTTP address. Once it is up and has delivered an
event everywhere, its threads are read (threading.enumerate) and the table ("## Threads")
is checked both ways: every thread the daemon has is a row, and every row not marked "on
demand" is running. The table is kept true by the daemon, not by hand.
"""

from __future__ import annotations

import io
import re
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.request import urlopen

import pytest

from fakes.jira import FakeJira
from fakes.kubernetes import FakeKubernetes
from fakes.slack import FakeSlack
from fakes.smtp import FakeSmtp
from fakes.teams import FakeTeams
from helpers import wait_until
from sebridge.cli.runtime import build_runner
from sebridge.config import loader as config_module
from sebridge.engine.runner import Runner
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.web.server import HttpServer

ARCHITECTURE = Path(__file__).resolve().parents[1] / "docs" / "ARCHITECTURE.md"
SINKS = ("console", "jsonl", "slack", "teams", "jira", "email", "kubernetes")
OPS = "C0123456789"
BOUND = 30.0  # generous: a loaded machine starts a daemon and delivers in a few seconds
# Where the test's fakes serve from: a thread running their code is theirs, not the daemon's
# (the daemon serves with waitress, and its Socket Mode client is slack_sdk's own).
FAKE_SERVERS = ("socketserver.py", "/websockets/")


@dataclass(frozen=True)
class Row:
    """One row of the table: the thread names it gives, and whether they may be absent."""

    names: tuple[str, ...]
    on_demand: bool

    def matches(self, thread: str) -> bool:
        return any(_pattern(name).fullmatch(thread) for name in self.names)


def _pattern(name: str) -> re.Pattern[str]:
    """A name of the table as a pattern: `<name>` a sink's name, `<n>` a number."""
    text = re.escape(name).replace("<name>", "[a-z][a-z0-9_]*").replace("<n>", "[0-9]+")
    return re.compile(text)


def table() -> list[Row]:
    """The rows of docs/ARCHITECTURE.md's "## Threads" table."""
    text = ARCHITECTURE.read_text(encoding="utf-8")
    section = text.split("\n## Threads\n", 1)[1].split("\n## ", 1)[0]
    rows = []
    for line in section.splitlines():
        if not line.startswith("| `"):
            continue
        first = line.split("|")[1]
        rows.append(Row(tuple(re.findall(r"`([^`]+)`", first)), "on demand" in first))
    return rows


def _serves_a_fake(thread: threading.Thread) -> bool | None:
    """True when the thread runs a fake server's code, False when it runs anything else,
    None while it runs only threading's own frames (starting or ending: look again)."""
    frame = sys._current_frames().get(thread.ident or 0)
    own = False
    while frame is not None:
        path = frame.f_code.co_filename
        if any(server in path for server in FAKE_SERVERS):
            return True
        own = own or path != threading.__file__
        frame = frame.f_back
    return False if own else None


def daemon_threads(before: set[threading.Thread], main: threading.Thread) -> list[str] | None:
    """The names of the daemon's threads now (`main`, which runs Runner.run(), as the
    process's main thread); None while one of them cannot be told from a fake's yet."""
    names = []
    for thread in threading.enumerate():
        if thread in before or not thread.is_alive():
            continue
        fake = _serves_a_fake(thread)
        if fake is None and thread.is_alive():
            return None
        if not fake:
            names.append("MainThread" if thread is main else thread.name)
    return sorted(names)


# -- the daemon ---------------------------------------------------------------------------------


@pytest.fixture(autouse=True)
def hermetic(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    for name in ("HTTPS_PROXY", "https_proxy", "HTTP_PROXY", "http_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.delenv("SEBRIDGE_CONFIG", raising=False)
    monkeypatch.setattr(config_module, "DEFAULT_PATH", str(tmp_path / "absent.toml"))


Fakes = tuple[FakeSlack, FakeTeams, FakeJira, FakeKubernetes, FakeSmtp]


@pytest.fixture
def fakes() -> Iterator[Fakes]:
    with (
        FakeSlack(channels={OPS: "ops"}, users={"U0AAA": "alice"}) as slack,
        FakeTeams() as teams,
        FakeJira("cloud") as jira,
        FakeKubernetes() as kubernetes,
        FakeSmtp() as smtp,
    ):
        kubernetes.add_node("node-0", "azure:///subscriptions/s/providers/x/virtualMachines/vm0")
        yield slack, teams, jira, kubernetes, smtp


def every_part(sim: Simulator, fakes: Fakes, pg_url: str, tmp_path: Path) -> dict[str, Any]:
    """The config of a daemon with every part, as TOML would give it."""
    slack, teams, jira, kubernetes, smtp = fakes
    hook = tmp_path / "drain.py"
    hook.write_text("print('drained')\n")
    return {
        "imds": {"endpoint": sim.url, "poll_interval": 0.2, "vm_name": "vm0"},
        "store": {"url": pg_url},
        "http": {"listen": "127.0.0.1:0", "probe_listen": "127.0.0.1:0"},
        "dispatch": {"shutdown_grace_seconds": 1.0},
        "console": {"enabled": True},
        "jsonl": {"path": str(tmp_path / "events.jsonl")},
        "slack": {
            "bot_token": slack.bot_token,
            "app_token": slack.app_token,  # Socket Mode
            "channel": OPS,
            "approvers": ["U0AAA"],
            "api_url": slack.url,
        },
        "teams": {"webhook_url": teams.workflows_url},
        "jira": {
            "url": jira.url,
            "email": jira.email,
            "api_token": jira.token,
            "project": "OPS",
            "poll_interval": 0.2,
        },
        "email": {
            "host": "127.0.0.1",
            "port": smtp.port,
            "ca_file": str(smtp.cert.cert),
            "from": "sebridge@example.com",
            "to": ["ops@example.com"],
        },
        "kubernetes": {
            "enabled": True,
            "api_server": kubernetes.server,
            "token_file": str(kubernetes.token_file),
            "ca_file": str(kubernetes.ca_file),
        },
        "hooks": {"drain": {"command": [sys.executable, str(hook)]}},
        "policy": {"rules": [{"event_types": ["Freeze"], "action": "ask", "prepare": ["drain"]}]},
    }


def http_port(runner: Runner) -> int:
    """The traffic port (the probe listener is added first, cli/runtime.py)."""
    _probes, traffic = (s for s in runner.services if isinstance(s, HttpServer))
    return traffic.port


@pytest.mark.slow  # a whole daemon with every sink, on PostgreSQL
def test_the_thread_table_is_the_threads_of_a_daemon_with_every_part(
    sim: Simulator,
    fakes: Fakes,
    pg_url: str,
    tmp_path: Path,
) -> None:
    rows = table()
    assert rows, "no thread table in docs/ARCHITECTURE.md"
    before = set(threading.enumerate())  # pytest's and the fakes' own
    config = config_from_mapping(every_part(sim, fakes, pg_url, tmp_path), environ={})
    runner = build_runner(config, stdout=io.StringIO())
    stop = threading.Event()
    main = threading.Thread(target=runner.run, args=(stop,), name="daemon-run")
    main.start()
    try:
        slack = fakes[0]
        assert slack.wait_connected(timeout=BOUND), "no Socket Mode connection"
        event_id = sim.schedule("Freeze")
        store = runner.daemon.store

        def delivered() -> list[str]:
            record = store.events.get(event_id)
            deliveries = record.deliveries if record else ()
            return sorted(d.sink for d in deliveries if d.state == "delivered")

        wait_until(lambda: delivered() == sorted(SINKS), BOUND, message=lambda: str(delivered()))
        for path in ("/healthz", "/metrics"):  # the store probes behind them run too
            with urlopen(f"http://127.0.0.1:{http_port(runner)}{path}", timeout=10) as answer:
                assert answer.status == 200

        def missing() -> list[str]:
            running = daemon_threads(before, main) or []
            return [
                name
                for row in rows
                if not row.on_demand
                for name in row.names
                if not any(_pattern(name).fullmatch(thread) for thread in running)
            ]

        # Every row a daemon like this one must have is running (its last parts start a
        # moment after the first delivery: Socket Mode's monitor, say)...
        wait_until(lambda: not missing(), BOUND, message=lambda: f"rows not running: {missing()}")
        running = wait_until(lambda: daemon_threads(before, main), BOUND)
        # ... every sink has its worker, under its integration's name...
        assert {f"sink-{sink}" for sink in SINKS} <= set(running), running
        # ... and every thread it has is a row of the table.
        strays = [name for name in running if not any(row.matches(name) for row in rows)]
        assert not strays, f"threads missing from docs/ARCHITECTURE.md's table: {strays}"
    finally:
        stop.set()
        main.join(BOUND)
    assert not main.is_alive(), "Runner.run() did not return"

"""Fixtures several test modules share, and the `pg` marker given by fixture.

Every fixture more than one module uses is defined here, once; where modules differ only
in a parameter, they call a factory (`make_store`, `make_sim`) rather than redefine the
fixture. A module that needs a fixture of the same name but another meaning defines its
own, which takes precedence over the one here for that module only, saying why (e.g.
test_daemon_tick's `sim` on a fake clock, test_jira_process's `jira` whose search lags). A module uses the environment fixtures
(`no_proxy`, `no_config`, `hermetic`, `no_threads_left`) for all its tests with
`pytestmark = pytest.mark.usefixtures(...)`.

PostgreSQL is the machine's server on 127.0.0.1:5432 (tests/pg.py; `.ci/run` starts it):
a test that asks for it skips, saying so, when nothing answers there, and each module that
uses it gets a database of its own, created for its first such test and dropped after its
last one.

Markers (registered in pyproject.toml; `pytest -m "not slow and not pg and not browser"`
runs the fast part alone): `pg` is given here to every test that uses the database, by
fixture; `browser` and `slow` are set by the modules themselves (`pytestmark`) or by the
test. A test over 3 s not marked `slow` fails the run of scripts/check (slow_check.py).
"""

from __future__ import annotations

import logging
import socket
import sys
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

import pg
from helpers import PROXY_VARS, DaemonProcess, event_gets, simulators, threads_left, wait_until
from import_space import loaded_twice
from sebridge.config import loader as config
from sebridge.imds.simulator import Simulator
from sebridge.store import Store

if TYPE_CHECKING:  # the fakes are imported by the fixtures that start them
    from fakes.jira import FakeJira
    from fakes.slack import FakeSlack
    from fakes.teams import FakeTeams

pytest_plugins = ["slow_check"]

# A daemon's start, up to its first IMDS GET: a new Python process importing the whole
# package, on a machine that may be busy.
START_TIMEOUT = 20.0


@pytest.hookimpl(trylast=True)  # after Hypothesis's own: its initialization is over
def pytest_sessionstart(session: pytest.Session) -> None:
    """Before any test: Hypothesis's table of Unicode categories, which it builds at its
    first text draw and keeps in .hypothesis/ (3.3 s of CPU on a slow core). Built here
    once, by the controller before its workers start, so that no worker's first
    text-drawing test pays for it and crosses the unmarked-slow limit (slow_check.py) on
    a fresh clone."""
    if hasattr(session.config, "workerinput"):
        return  # a worker reads the controller's table
    from hypothesis import find, settings
    from hypothesis import strategies as st

    find(st.text(min_size=1), lambda _: True, settings=settings(database=None))


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark `pg` every test that uses pg_database, directly or through another fixture
    (pg_url, a module's own `url`, `boards`, `agents`...).

    By fixture rather than by a `pytestmark` in each module: a new test is marked the moment
    it asks for the database, in whatever module, with nothing to remember, and the tests of
    a PostgreSQL module that don't use it are not marked. (store_url's PostgreSQL half asks
    for it at run time, which collection can't see: that param carries the mark itself.)"""
    for item in items:
        if "pg_database" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.pg)


@pytest.fixture(scope="session", autouse=True)
def one_import_space() -> Iterator[None]:
    """Fails the session (each xdist worker's) at its end if a module of tests/ was
    imported by two names, e.g. `helpers` and `tests.helpers` (tests/import_space.py)."""
    yield
    twice = loaded_twice(sys.modules)
    assert not twice, (
        "modules of tests/ imported by two names (import them as `helpers`, `fakes.x`: "
        f"tests/import_space.py): {'; '.join(twice)}"
    )


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    """The URL of a database of this module's own (sebridge_test_<random>), dropped after
    the module's last test; skips when no PostgreSQL answers on 127.0.0.1:5432."""
    with pg.temporary_database() as url:
        yield url


@pytest.fixture
def pg_url(pg_database: str) -> str:
    """The module's database, empty for this test (pg.reset: other sessions ended, schema
    dropped)."""
    return pg.reset(pg_database)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> str:
    """A store URL on each dialect: the test runs on a SQLite file in tmp_path, and again on
    pg_url (marked `pg`; skipped without a server)."""
    if request.param == "sqlite":
        return f"sqlite:///{tmp_path}/state.db"
    return str(request.getfixturevalue("pg_url"))


@pytest.fixture
def make_store(tmp_path: Path) -> Iterator[Callable[..., Store]]:
    """Opens stores, each closed at the test's end: make_store(url, agent, **Store's options);
    url by default a SQLite file in tmp_path (a test that needs both dialects passes
    store_url)."""
    opened: list[Store] = []

    def make(url: str = "", agent: str = "local", **options: Any) -> Store:
        made = Store(url or f"sqlite:///{tmp_path}/state.db", agent, **options)
        opened.append(made)
        return made

    yield make
    for made in reversed(opened):
        made.close()


@pytest.fixture
def store(make_store: Callable[..., Store], store_url: str) -> Store:
    """A daemon's store on each dialect (store_url): agent vm0, holding its name (exclusive),
    so its own claims of outbox rows and approvals are live ones."""
    return make_store(store_url, "vm0", exclusive=True)


@pytest.fixture
def make_sim() -> Iterator[Callable[..., Simulator]]:
    """Starts IMDS simulators on free ports (make_sim(**Simulator's options)), each stopped
    at the test's end."""
    started: list[Simulator] = []

    def make(**options: Any) -> Simulator:
        made = Simulator(port=0, **options).start()
        started.append(made)
        return made

    yield make
    for made in started:
        made.stop()


@pytest.fixture
def sim(make_sim: Callable[..., Simulator]) -> Simulator:
    """The IMDS simulator on a free port, for vm0. approval_delay: an approved event stays
    Scheduled for the whole test, until the test starts it (sim.start_event)."""
    return make_sim(vm_name="vm0", approval_delay=3600)


@pytest.fixture
def sims(request: pytest.FixtureRequest) -> Iterator[list[Simulator]]:
    """A fleet's simulators: one per agent (the module's AGENTS; VMs vm0, vm1...), each on
    a free port, an approved event staying Scheduled until the test starts it (as `sim`)."""
    names = [f"vm{i}" for i in range(request.module.AGENTS)]
    with simulators(names, approval_delay=3600) as started:
        yield started


@pytest.fixture
def no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy variables from the environment: requests, slack_sdk and urllib honour them,
    and every fake here is on loopback. (A test of proxy handling sets its own.)"""
    for name in PROXY_VARS:
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def no_config(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Never the machine's /etc/sebridge/sebridge.toml, nor an inherited $SEBRIDGE_CONFIG."""
    monkeypatch.setattr(config, "DEFAULT_PATH", str(tmp_path / "absent" / "sebridge.toml"))
    monkeypatch.delenv("SEBRIDGE_CONFIG", raising=False)


@pytest.fixture
def cli_in_process(no_config: None) -> Iterator[None]:
    """For `sebridge.cli.main` in this process: no_config, and the root logger as it was
    (every command reconfigures logging onto sys.stderr)."""
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)


@pytest.fixture
def hermetic(no_proxy: None, cli_in_process: None) -> None:
    """Commands and sinks in this process against the fakes: no proxy, no config of the
    machine's, the root logger restored."""


@pytest.fixture
def no_threads_left() -> Iterator[None]:
    """Fails the test when a thread it started is still alive 3 s after its fixtures
    stopped (a Socket Mode client, a sink's worker...)."""
    before = set(threading.enumerate())
    yield
    assert threads_left(before) == [], "threads left behind"


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    """The fake Slack (Web API and Socket Mode) on a free port, with its default workspace."""
    from fakes.slack import FakeSlack

    with FakeSlack() as fake:
        yield fake


@pytest.fixture
def teams() -> Iterator[FakeTeams]:
    """The fake Teams webhook on a free port."""
    from fakes.teams import FakeTeams

    with FakeTeams() as fake:
        yield fake


@pytest.fixture(params=["cloud", "datacenter"])
def jira(request: pytest.FixtureRequest) -> Iterator[FakeJira]:
    """The fake Jira on a free port, once as Cloud and once as Data Center."""
    from fakes.jira import FakeJira

    with FakeJira(request.param) as fake:
        yield fake


@pytest.fixture
def start_daemon(tmp_path: Path) -> Iterator[Callable[..., DaemonProcess]]:
    """start(config) starts `sebridge run --config CONFIG` (its log in tmp_path);
    start(config, sim) returns once the daemon's first IMDS GET reached `sim`. Every daemon
    started is SIGKILLed at teardown and its log printed (pytest shows it when the test
    failed)."""
    daemons: list[DaemonProcess] = []

    def start(
        config: Path,
        sim: Simulator | None = None,
        *,
        env: dict[str, str] | None = None,
        stdout: Path | None = None,
    ) -> DaemonProcess:
        before = event_gets(sim) if sim is not None else 0
        log = tmp_path / f"daemon-{len(daemons)}.log"
        daemon = DaemonProcess(config, log, env=env, stdout=stdout)
        daemons.append(daemon)
        if sim is not None:
            wait_until(
                lambda: event_gets(sim) > before or not daemon.alive(),
                START_TIMEOUT,
                message="the daemon's first IMDS GET",
            )
            assert daemon.alive(), daemon.log_text()
        return daemon

    yield start
    for daemon in daemons:
        daemon.kill()
    for daemon in daemons:
        print(f"--- {daemon.log.name} (exit {daemon.proc.returncode}) ---\n{daemon.log_text()}")


@pytest.fixture
def refused_port() -> Iterator[int]:
    """A local port that refuses connections for the whole test: bound and never listening,
    so no other test (another xdist worker's server) can take it between the choice and
    the connection, as it could a port picked by free_port() and let go."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        yield int(s.getsockname()[1])

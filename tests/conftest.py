"""Fixtures several test modules share, and the `pg` marker given by fixture.

A module that needs a fixture of the same name but another meaning defines its own, which
takes precedence over the one here for that module only (e.g. test_daemon_tick's `sim` on
a fake clock).

PostgreSQL is the machine's server on 127.0.0.1:5432 (tests/pg.py; `.ci/run` starts it):
a test that asks for it skips, saying so, when nothing answers there, and each module that
uses it gets a database of its own, created for its first such test and dropped after its
last one.

Markers (registered in pyproject.toml; `pytest -m "not slow and not pg and not browser"`
runs the fast part alone): `pg` is given here to every test that uses the database, by
fixture; `browser` and `slow` are set by the modules themselves (`pytestmark`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

import pg
from sebridge.config import loader as config
from sebridge.imds.simulator import Simulator


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
def sim() -> Iterator[Simulator]:
    """The IMDS simulator on a free port, for vm0. approval_delay: an approved event stays
    Scheduled for the whole test, until the test starts it (sim.start_event)."""
    with Simulator(port=0, vm_name="vm0", approval_delay=3600) as simulator:
        yield simulator


@pytest.fixture
def cli_in_process(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """For `sebridge.cli.main` in this process: no real /etc/sebridge/sebridge.toml, no
    inherited $SEBRIDGE_CONFIG, and the root logger as it was (every command reconfigures
    logging onto sys.stderr)."""
    monkeypatch.setattr(config, "DEFAULT_PATH", str(tmp_path / "absent" / "sebridge.toml"))
    monkeypatch.delenv("SEBRIDGE_CONFIG", raising=False)
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    yield
    root.handlers[:] = handlers
    root.setLevel(level)

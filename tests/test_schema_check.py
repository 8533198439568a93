"""A store whose tables do not match its schema_version is refused at open, naming what it
lacks: `check` reports it, `run` exits 1 saying so (no traceback)."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import psycopg
import pytest

from helpers import run_cli, write_config
from sebridge.kernel.errors import StoreError
from sebridge.store import Store
from sebridge.store.schema_check import expected_columns, expected_indexes


def alter(url: str, sql: str) -> None:
    """Change the store behind sebridge's back, as a person with psql or sqlite3 would."""
    if url.startswith("sqlite"):
        conn = sqlite3.connect(url.removeprefix("sqlite:///"))
        with conn:
            conn.execute("PRAGMA foreign_keys=OFF")
            conn.execute(sql)
        conn.close()
    else:
        with psycopg.connect(url, autocommit=True) as pg:
            pg.execute(sql.replace("DROP TABLE outbox", "DROP TABLE outbox CASCADE"))  # type: ignore[arg-type]


def test_the_expected_tables_come_from_the_schema() -> None:
    tables = expected_columns()
    assert {"events", "transitions", "outbox", "approvals", "sightings", "documents"} <= set(tables)
    assert "claimed_by" in tables["approvals"]


def test_the_expected_indexes_come_from_the_schema() -> None:
    indexes = expected_indexes()
    assert {"outbox_pending", "events_lower_id", "transitions_said"} <= set(indexes)
    assert {"approvals_open", "events_present", "events_gone", "sightings_present"} <= set(indexes)
    assert indexes["outbox_pending"] == "outbox"


@pytest.mark.parametrize(
    ("change", "named"),
    [
        ("DROP TABLE outbox", "table outbox"),
        ("ALTER TABLE approvals DROP COLUMN claimed_by", "column approvals.claimed_by"),
        ("DROP INDEX outbox_pending", "index outbox_pending"),
        ("DROP INDEX events_lower_id", "index events_lower_id"),
        ("DROP INDEX transitions_said", "index transitions_said"),
        ("DROP INDEX approvals_open", "index approvals_open"),
        ("DROP INDEX events_present", "index events_present"),
    ],
)
def test_a_store_missing_a_table_column_or_index_is_refused_naming_it(
    store_url: str, change: str, named: str
) -> None:
    Store(store_url).close()
    alter(store_url, change)
    with pytest.raises(StoreError) as caught:
        Store(store_url)
    said = str(caught.value)
    assert f"lacks {named}, which its schema_version says it has" in said
    assert "restore it from a backup" in said


def test_an_intact_store_opens(store_url: str) -> None:
    Store(store_url).close()
    Store(store_url).close()  # opened again: nothing to migrate, everything there


@pytest.mark.parametrize("command", ["check", "run"])
def test_check_reports_a_missing_table_and_run_refuses_it(tmp_path: Path, command: str) -> None:
    db = tmp_path / "state.db"
    cfg = write_config(
        tmp_path / "sebridge.toml", endpoint="http://127.0.0.1:1", db=db, vm_name="vm0"
    )
    Store(f"sqlite:///{db}").close()
    alter(f"sqlite:///{db}", "DROP TABLE outbox")
    done = run_cli(command, "--config", str(cfg), timeout=60)
    said = done.stdout + done.stderr
    assert done.returncode == 1, said
    assert "lacks table outbox" in said
    assert "Traceback" not in said
    if command == "check":
        assert "problem: store: the store at" in done.stdout


def test_a_reader_refuses_a_store_with_no_tables_and_creates_none(store_url: str) -> None:
    # The one older schema this sebridge moves (none yet after the 0.1.0 baseline): a
    # reader refuses it and writes nothing; a writer moves it. (Older than the baseline:
    # test_schema_baseline.py.)
    with pytest.raises(StoreError, match="has no tables yet, older than this sebridge's"):
        Store(store_url, migrate=False)
    writer = Store(store_url)
    assert writer.db.migrated_from == 0  # the reader created nothing: the writer did
    writer.close()
    Store(store_url, migrate=False).close()  # current: read as it is


def test_check_reports_a_missing_index(tmp_path: Path) -> None:
    db = tmp_path / "state.db"
    cfg = write_config(
        tmp_path / "sebridge.toml", endpoint="http://127.0.0.1:1", db=db, vm_name="vm0"
    )
    Store(f"sqlite:///{db}").close()
    alter(f"sqlite:///{db}", "DROP INDEX outbox_pending")
    done = run_cli("check", "--config", str(cfg), timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    # Nothing answers at the endpoint: IMDS's problem is said too, on a line of its own.
    (problem,) = [line for line in done.stdout.splitlines() if line.startswith("problem: store")]
    assert problem.startswith("problem: store: the store at")
    assert "lacks index outbox_pending, which its schema_version says it has" in problem

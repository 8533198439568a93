"""What `check` passed and `run` then failed on (issue 10, item 4): a corrupt store,
a schema_version that is not a number, and a JSON-lines path that names a folder."""

from __future__ import annotations

import os
import sqlite3
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers import query, run_cli, write_config
from sebridge.cli.runtime import build_daemon
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import load_config as load
from sebridge.model import Document, ScheduledEvent
from sebridge.store import Store


def corrupt_store(db: Path) -> None:
    """A store with 200 events, then 4 KiB of garbage over pages in its middle."""
    store = Store(f"sqlite:///{db}")
    events = tuple(
        ScheduledEvent(f"E{i}", "Reboot", "Scheduled", ("vm0",), description="x" * 400)
        for i in range(200)
    )
    store.documents.apply(Document(1, events), [], datetime.now(UTC))
    store.close()
    size = db.stat().st_size
    with open(db, "r+b") as fh:
        fh.seek(size // 2)
        fh.write(b"\xff" * 4096)


@pytest.fixture
def cfg(tmp_path: Path) -> Path:
    # IMDS is never reached (the VM's name is given): every command here stops at the store.
    return write_config(
        tmp_path / "sebridge.toml",
        endpoint="http://127.0.0.1:1",
        db=tmp_path / "state.db",
        vm_name="vm0",
    )


@pytest.mark.parametrize("command", ["check", "run"])
def test_a_corrupt_store_is_a_clear_error(cfg: Path, tmp_path: Path, command: str) -> None:
    corrupt_store(tmp_path / "state.db")
    done = run_cli(command, "--config", str(cfg), timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "is corrupt (SQLite's quick_check:" in said
    assert "restore it from a backup" in said
    assert "Traceback" not in said


@pytest.mark.parametrize("command", ["check", "run", "events"])
def test_a_schema_version_that_is_not_a_number_is_a_store_error(
    cfg: Path, tmp_path: Path, command: str
) -> None:
    Store(f"sqlite:///{tmp_path / 'state.db'}").close()
    conn = sqlite3.connect(tmp_path / "state.db")
    with conn:
        conn.execute("UPDATE meta SET value = 'one' WHERE key = 'schema_version'")
    conn.close()
    done = run_cli(command, "--config", str(cfg), timeout=60)
    assert done.returncode == 1, done.stdout + done.stderr
    said = done.stdout + done.stderr
    assert "has schema_version 'one' in its meta table, not a number" in said
    assert "Traceback" not in said


def test_jsonl_path_naming_a_folder_is_refused_by_check(tmp_path: Path) -> None:
    folder = tmp_path / "out"
    folder.mkdir()
    cfg = write_config(
        tmp_path / "sebridge.toml",
        endpoint="http://127.0.0.1:1",
        db=tmp_path / "s.db",
        jsonl=folder,
    )
    done = run_cli("check", "--config", str(cfg))
    assert done.returncode == 2
    assert f"jsonl.path: {folder} is a folder" in done.stderr


@pytest.mark.slow
def test_jsonl_path_under_a_file_is_refused_and_a_missing_folder_is_a_warning(
    tmp_path: Path,
) -> None:
    (tmp_path / "plain").write_text("")
    under_file = write_config(
        tmp_path / "a.toml",
        endpoint="http://127.0.0.1:1",
        db=tmp_path / "s.db",
        jsonl=tmp_path / "plain" / "events.jsonl",
    )
    done = run_cli("check", "--config", str(under_file))
    assert done.returncode == 2
    assert f"jsonl.path: {tmp_path / 'plain'} is a file, not a folder" in done.stderr
    missing = write_config(
        tmp_path / "b.toml",
        endpoint="http://127.0.0.1:1",
        db=tmp_path / "s.db",
        jsonl=tmp_path / "later" / "events.jsonl",
    )
    done = run_cli("check", "--config", str(missing))
    assert f"warning: jsonl.path: the folder {tmp_path / 'later'} does not exist" in done.stdout


def test_a_jsonl_path_that_became_a_folder_fails_for_good(tmp_path: Path) -> None:
    """The path was a file when the daemon started; a folder now: no endless retries."""
    out = tmp_path / "events.jsonl"
    with Simulator(port=0) as sim:
        cfg = write_config(
            tmp_path / "sebridge.toml", endpoint=sim.url, db=tmp_path / "s.db", jsonl=out
        )
        daemon = build_daemon(load(cfg))
        try:
            sim.schedule("Reboot")
            assert daemon.tick().transitions
            os.mkdir(out)
            daemon.parts.dispatcher.deliver_due("jsonl")
        finally:
            daemon.imds.close()
            daemon.store.close()
    ((state, attempts, error),) = query(
        tmp_path / "s.db", "SELECT state, attempts, last_error FROM outbox WHERE sink = 'jsonl'"
    )
    assert (state, attempts) == ("failed", 1)
    assert "Is a directory" in error

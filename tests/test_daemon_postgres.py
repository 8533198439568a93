"""`sebridge` processes on one PostgreSQL database: the CLI works beside the daemon; an approval
recorded by another process reaches IMDS through the daemon, woken by NOTIFY; a kill -9'd
daemon is restarted and goes on (fleet mode, several agents: tests/test_fleet.py).

Real processes, the IMDS simulator, JSON lines in tmp_path, and a database of this module's
own on the machine's server (tests/pg.py).
"""

from __future__ import annotations

import signal
from collections.abc import Callable
from pathlib import Path

import pytest

import pg
from helpers import (
    DaemonProcess,
    free_port,
    lines_of,
    run_cli,
    wait_line,
    write_config,
)
from sebridge.imds.simulator import Simulator

# Every test starts `sebridge run` or the CLI as processes, on a database of its own.
pytestmark = pytest.mark.slow


@pytest.fixture
def config(tmp_path: Path, sim: Simulator, pg_url: str) -> Path:
    return write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        store_url=pg_url,
        jsonl=tmp_path / "events.jsonl",
    )


def test_the_cli_works_beside_the_daemon_and_an_approval_it_could_not_post_is_carried_out(
    config: Path,
    sim: Simulator,
    tmp_path: Path,
    pg_url: str,
    start_daemon: Callable[..., DaemonProcess],
) -> None:
    start_daemon(config, sim)
    event_id = sim.schedule("Reboot")
    wait_line(tmp_path / "events.jsonl", event_id, "scheduled")
    for args in (["events"], ["history"], ["check"]):
        done = run_cli(*args, "--config", str(config))
        assert done.returncode == 0, (args, done.stderr)
        assert event_id in done.stdout or args == ["check"]
    # `sebridge approve` on a machine whose IMDS does not list the event (it does not even
    # answer): it records the approval, never POSTs it, and leaves it to the daemon, which
    # nothing else tells; it says what the daemon did once the daemon has done it.
    elsewhere = write_config(
        tmp_path / "elsewhere.toml",
        endpoint=f"http://127.0.0.1:{free_port()}",
        store_url=pg_url,
        vm_name="vm-elsewhere",
    )
    approved = run_cli("approve", event_id, "--as", "alice", "--config", str(elsewhere))
    assert approved.returncode == 0, approved.stderr
    assert f"approved {event_id} as alice: StartRequests sent to Azure" in approved.stdout
    # The daemon heard the commit (NOTIFY) at once: no idle timeout to wait out.
    assert sim.start_requests == [event_id]
    line = wait_line(tmp_path / "events.jsonl", event_id, "approved")
    assert line["actor"] == "alice"
    assert pg.query(pg_url, "SELECT actor, state FROM approvals") == [("alice", "posted")]


def test_a_killed_daemon_is_restarted_and_goes_on(
    config: Path,
    sim: Simulator,
    tmp_path: Path,
    pg_url: str,
    start_daemon: Callable[..., DaemonProcess],
) -> None:
    first = start_daemon(config, sim)
    first.signal(signal.SIGKILL)
    first.wait(10)
    second = start_daemon(config, sim)
    event_id = sim.schedule("Freeze", duration=5)
    wait_line(tmp_path / "events.jsonl", event_id, "scheduled")
    assert second.alive()


def test_a_database_that_does_not_answer_at_start_is_exit_1_without_the_password(
    tmp_path: Path, sim: Simulator
) -> None:
    config = write_config(
        tmp_path / "down.toml",
        endpoint=sim.url,
        store_url=f"postgresql://sebridge:S3CRET-5150@127.0.0.1:{free_port()}/sebridge",
    )
    for command in ("run", "once", "events"):
        done = run_cli(command, "--config", str(config), timeout=30)
        assert done.returncode == 1, (command, done.stderr)
        assert "cannot connect to the store at postgresql://sebridge:***@127.0.0.1" in done.stderr
        assert "S3CRET" not in done.stdout + done.stderr


def test_once_on_postgresql_records_and_delivers(
    config: Path, sim: Simulator, tmp_path: Path, pg_url: str
) -> None:
    event_id = sim.schedule("Reboot")
    done = run_cli("once", "--json", "--config", str(config))
    assert done.returncode == 0, done.stderr
    assert lines_of(tmp_path / "events.jsonl", event_id, "scheduled")
    assert pg.query(pg_url, "SELECT event_id, kind FROM transitions") == [(event_id, "scheduled")]
    again = run_cli("once", "--json", "--config", str(config))  # the same document: nothing new
    assert again.returncode == 0, again.stderr
    assert len(lines_of(tmp_path / "events.jsonl", event_id)) == 1

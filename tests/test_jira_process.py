"""Jira with real `sebridge run` processes: a crash between create and commit, a lost store.

The fake Jira creates the issue and holds its answer; the daemon is SIGKILLed while it
waits, so the issue exists and the store never learnt its key. The next daemon must find
it by the event's label, not make a second one. Waits are bounded polls, never sleeps.
"""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from fakes.jira import FakeJira
from helpers import (
    DaemonProcess,
    event_gets,
    query,
    toml_str,
    undelivered,
    wait_until,
    write_config,
)
from sebridge.imds.simulator import Simulator

# real `sebridge run` processes killed mid-delivery: up to 4 s a test
pytestmark = pytest.mark.slow


@pytest.fixture(params=["cloud", "datacenter"])
def jira(request: pytest.FixtureRequest) -> Iterator[FakeJira]:
    # Cloud's search sees a new issue only 1.5 s after it was created.
    with FakeJira(request.param, index_lag=1.5) as fake:
        yield fake


def config_for(tmp_path: Path, sim: Simulator, jira: FakeJira) -> Path:
    auth = (
        f"email = {toml_str(jira.email)}\napi_token = {toml_str(jira.token)}"
        if jira.flavour == "cloud"
        else f"pat = {toml_str(jira.pat)}"
    )
    extra = f'[jira]\nurl = {toml_str(jira.url)}\nproject = "OPS"\n{auth}\n'
    return write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "state.db",
        vm_name="vm0",
        extra=extra,
    )


def started(daemon: DaemonProcess, sim: Simulator) -> DaemonProcess:
    start = event_gets(sim)
    wait_until(
        lambda: event_gets(sim) > start or not daemon.alive(), 30, message="the first IMDS GET"
    )
    assert daemon.alive(), daemon.log_text()
    return daemon


def test_kill_between_create_and_commit_makes_exactly_one_issue(
    tmp_path: Path,
    sim: Simulator,
    jira: FakeJira,
    start_daemon: Callable[..., DaemonProcess],
) -> None:
    config = config_for(tmp_path, sim, jira)
    db = tmp_path / "state.db"
    daemon = started(start_daemon(config), sim)
    release = threading.Event()
    fault = jira.fail("POST", "issue", 201, after=True, hold=release)
    try:
        event_id = sim.schedule("Reboot")
        assert fault.reached.wait(30), "the create never reached Jira"
        daemon.signal(signal.SIGKILL)
        assert daemon.wait(10) == -signal.SIGKILL
    finally:
        release.set()
    assert len(jira.issues_of(event_id)) == 1
    assert undelivered(db) == 1  # the store never learnt the key

    started(start_daemon(config), sim)
    wait_until(lambda: undelivered(db) == 0, 30, message="the redelivery")
    (issue,) = jira.issues_of(event_id)
    receipts = query(db, "SELECT external_id FROM receipts WHERE sink = 'jira'")
    assert receipts == [(issue["key"],)]
    assert len(jira.calls_to("POST", "issue")) == 1

    sim.complete(event_id)  # gone before NotBefore, unapproved: cancelled
    wait_until(lambda: issue["status"] == "Done", 30, message="the issue moved to Done")
    assert len(jira.issues) == 1


def test_deleted_store_finds_the_pending_events_issue(
    tmp_path: Path,
    sim: Simulator,
    jira: FakeJira,
    start_daemon: Callable[..., DaemonProcess],
) -> None:
    jira.index_lag = 0.0  # the store is lost long after the create: the index caught up
    config = config_for(tmp_path, sim, jira)
    db = tmp_path / "state.db"
    daemon = started(start_daemon(config), sim)
    event_id = sim.schedule("Redeploy")
    wait_until(lambda: jira.issues_of(event_id), 30, message="the issue")
    wait_until(lambda: undelivered(db) == 0, 30, message="the delivery recorded")
    daemon.signal(signal.SIGTERM)
    assert daemon.wait(15) == 0
    for path in tmp_path.glob("state.db*"):
        path.unlink()

    started(start_daemon(config), sim)
    wait_until(lambda: db.exists() and undelivered(db) == 0, 30, message="the redelivery")
    wait_until(
        lambda: query(db, "SELECT external_id FROM receipts WHERE sink = 'jira'"),
        30,
        message="the adopted issue's key in the new store",
    )
    (issue,) = jira.issues_of(event_id)
    assert query(db, "SELECT external_id FROM receipts WHERE sink = 'jira'") == [(issue["key"],)]
    assert len(jira.calls_to("POST", "issue")) == 1

"""An attempt's process group, recorded and ended (hooks/leftovers.py, store/hook_runs.py):
exactly the group the attempt started, whatever environment its processes keep, and never
a process that was given its id since."""

from __future__ import annotations

import contextlib
import os
import signal
import subprocess
import time
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from helpers import process_alive, wait_until
from sebridge.hooks.leftovers import end_recorded_group, group_identity
from sebridge.model import Document, ScheduledEvent, Transition
from sebridge.store import Store

EVENT = ScheduledEvent(
    event_id="E-GROUP-1",
    event_type="Reboot",
    status="Scheduled",
    resources=("vm0",),
    resource_type="VirtualMachine",
    not_before=datetime(2026, 11, 25, 4, 30, tzinfo=UTC),
)


@pytest.fixture
def groups() -> Iterator[list[subprocess.Popen[bytes]]]:
    """Process groups a test starts (each its own session); whatever is left is killed."""
    started: list[subprocess.Popen[bytes]] = []
    yield started
    for proc in started:
        with contextlib.suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(5)


def clean_group(groups: list[subprocess.Popen[bytes]], script: str) -> tuple[int, list[int]]:
    """A group like a hook's under `env -i`: a shell that starts a child, in a clean
    environment. Returns the group's id and its processes' pids (leader first)."""
    proc = subprocess.Popen(
        ["/usr/bin/env", "-i", "/bin/sh", "-c", script + " & echo $!; wait"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    groups.append(proc)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    return proc.pid, [proc.pid, child]


def test_the_recorded_group_is_ended_whatever_its_environment(
    groups: list[subprocess.Popen[bytes]],
) -> None:
    pgid, pids = clean_group(groups, "sleep 60")
    identity = group_identity(pgid)
    assert identity.count(":") == 1 and identity.split(":")[1].isdigit()
    assert end_recorded_group(pgid, identity, what="prepare hook drain")
    wait_until(lambda: not any(process_alive(p) for p in pids), 5, message="the group's end")


def test_a_group_whose_leader_has_another_start_time_is_left_alone(
    groups: list[subprocess.Popen[bytes]],
) -> None:
    """The recorded id now names another process (the pid was given again): not ours."""
    pgid, pids = clean_group(groups, "sleep 60")
    boot, _, start = group_identity(pgid).partition(":")
    assert not end_recorded_group(pgid, f"{boot}:{int(start) - 1}", what="drain")
    assert not end_recorded_group(pgid, f"another-boot:{start}", what="drain")
    assert not end_recorded_group(pgid, "", what="drain")
    time.sleep(0.2)  # (a kill would have landed by now)
    assert all(process_alive(p) for p in pids)


def test_what_a_group_left_behind_its_leader_is_ended_too(
    groups: list[subprocess.Popen[bytes]],
) -> None:
    """The hook's own process exited; a child it started runs on in its group."""
    proc = subprocess.Popen(
        ["/usr/bin/env", "-i", "/bin/sh", "-c", "sleep 60 & echo $!"],
        stdout=subprocess.PIPE,
        start_new_session=True,
    )
    groups.append(proc)
    assert proc.stdout is not None
    child = int(proc.stdout.readline())
    identity = group_identity(proc.pid)
    proc.wait(5)
    assert process_alive(child)
    assert end_recorded_group(proc.pid, identity, what="drain")
    wait_until(lambda: not process_alive(child), 5, message="the child's end")


def test_a_group_that_ended_is_nothing_to_end(groups: list[subprocess.Popen[bytes]]) -> None:
    pgid, _ = clean_group(groups, "true")
    identity = group_identity(pgid)
    groups[-1].wait(5)
    assert not end_recorded_group(pgid, identity, what="drain")


def test_each_attempt_records_its_group_and_a_restart_finds_the_last(store_url: str) -> None:
    store = Store(store_url, agent="vm0", exclusive=True)
    try:
        now = datetime.now(UTC)
        store.documents.apply(
            Document(1, (EVENT,)), [(Transition("scheduled", EVENT, now), ["s"])], now
        )
        key = {"vm": "vm0", "stage": "prepare", "hook": "drain"}
        first = store.hook_runs.begin(EVENT, now=now, sinks=["s"], **key)
        assert first is not None
        assert store.hook_runs.group(EVENT.event_id, **key) is None  # not started yet
        store.hook_runs.record_group(EVENT.event_id, first, 4242, "boot:100")
        assert store.hook_runs.group(EVENT.event_id, **key) == (4242, "boot:100")
        # A crash; the restart begins attempt 2 and still finds what attempt 1 started.
        second = store.hook_runs.begin(EVENT, now=now, sinks=["s"], **key)
        assert second is not None and second.attempt == 2
        assert store.hook_runs.group(EVENT.event_id, **key) == (4242, "boot:100")
        store.hook_runs.record_group(EVENT.event_id, second, 5151, "boot:200")
        assert store.hook_runs.group(EVENT.event_id, **key) == (5151, "boot:200")
        assert (
            store.hook_runs.group(EVENT.event_id, vm="vm1", stage="prepare", hook="drain") is None
        )
    finally:
        store.close()

"""`sebridge hooks retry EVENT_ID`: a held event's failed prepare hooks run again, and the
held approval is carried out once they succeed; refusals and exit codes. On both stores
(conftest.py: store_url); the daemon is `sebridge once` (no threads: deterministic)."""

from __future__ import annotations

import json
import sys
from pathlib import Path

import pytest

from helpers import cli_main, write_config
from sebridge.imds.simulator import Simulator
from sebridge.model.approval import ApprovalState
from sebridge.store import Store

run = cli_main


@pytest.fixture
def cfg(tmp_path: Path, sim: Simulator, store_url: str) -> str:
    """An approve rule whose prepare hook `drain` fails until tmp_path/fixed exists."""
    drain = tmp_path / "drain.py"
    drain.write_text(
        "import os, sys\n"
        f"open({str(tmp_path / 'ran')!r}, 'a').write(os.environ['SEBRIDGE_VM_NAME'] + '\\n')\n"
        f"if not os.path.exists({str(tmp_path / 'fixed')!r}):\n"
        "    print('pods still running'); sys.exit(1)\n"
    )
    extra = (
        '[[policy.rules]]\nname = "drain first"\naction = "approve"\nprepare = ["drain"]\n'
        f"[hooks.drain]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(drain))}]\n"
    )
    path = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        store_url=store_url,
        console=True,
        vm_name="vm0",
        extra=extra,
    )
    return str(path)


def test_a_retry_runs_the_failed_hook_again_and_carries_the_held_approval_out(
    cfg: str, sim: Simulator, store_url: str, tmp_path: Path
) -> None:
    event_id = sim.schedule("Reboot", notice=1800)
    code, out, _ = run("once", "--config", cfg)
    assert code == 0 and "HELD" in out  # the hook ran and failed in this tick
    assert sim.start_requests == []

    code, out, err = run("hooks", "retry", event_id.lower(), "--as", "alice", "--config", cfg)
    assert code == 0, err
    assert f"hooks retry of {event_id} requested by alice: drain on vm0 will run again" in out
    assert "the held approval is carried out once they succeed on every listed VM" in out
    assert "A running daemon on each of these VMs picks it up" in out
    store = Store(store_url)
    try:  # back to waiting for readiness: no longer held
        approval = store.approvals.get(event_id)
        assert approval is not None and approval.state == ApprovalState.WAITING
    finally:
        store.close()
    code, out, _ = run("history", event_id, "--config", cfg)
    assert "hooks retry requested by alice: drain on vm0 runs again" in out

    (tmp_path / "fixed").write_text("")
    code, out, _ = run("once", "--config", cfg)
    assert code == 0
    assert "drain started on vm0 again (hooks retry asked by alice)" in out
    assert sim.start_requests == [event_id]  # one StartRequests, after the retry succeeded
    assert (tmp_path / "ran").read_text().split() == ["vm0", "vm0"]

    # StartRequests went: draining again would come after the start (issue 37, item 6).
    code, out, err = run("hooks", "retry", event_id, "--config", cfg)
    assert code == 3 and out == ""
    assert f"hooks retry refused: {event_id}'s StartRequests was sent to Azure already" in err
    assert "(approved by policy)" in err


def test_a_retry_is_refused_for_unknown_gone_and_started_events(cfg: str, sim: Simulator) -> None:
    gone = sim.schedule("Redeploy", notice=1800)
    started = sim.schedule("Reboot", notice=1800)
    assert run("once", "--config", cfg)[0] == 0
    sim.complete(gone)
    sim.start_event(started)
    assert run("once", "--config", cfg)[0] == 0
    for event_id, why in (
        ("00000000-0000-4000-8000-000000000000", "unknown event"),
        (gone, "is gone from IMDS"),
        (started, "has started"),
    ):
        code, out, err = run("hooks", "retry", event_id, "--json", "--config", cfg)
        assert code == 3 and out == "", (event_id, err)
        assert "hooks retry refused" in err and why in err


def test_a_hostile_event_id_is_shown_escaped(cfg: str, sim: Simulator) -> None:
    assert run("once", "--config", cfg)[0] == 0
    code, out, err = run("hooks", "retry", "E\x1b[2J\nfake line", "--config", cfg)
    assert code == 3 and out == ""
    assert "\x1b" not in err and "\nfake line" not in err
    assert "unknown event E\\x1b[2J\\nfake line" in err


def test_a_store_that_fails_exits_1(tmp_path: Path, sim: Simulator) -> None:
    db = tmp_path / "broken.db"
    db.write_bytes(b"this is not a SQLite database at all " * 100)
    cfg = str(write_config(tmp_path / "broken.toml", endpoint=sim.url, db=db))
    code, out, err = run("hooks", "retry", "E-1", "--config", cfg)
    assert code == 1 and out == ""
    assert "sebridge:" in err


def test_approve_anyway_on_an_event_nobody_approved_is_refused_with_exit_3(
    sim: Simulator, store_url: str, tmp_path: Path
) -> None:
    """Issue 37, item 6: an ask event nobody approved, its drain not begun (the prepare lead
    is far off): --anyway would send StartRequests before the drain. Refused, exit 3, with
    the plain command; nothing reaches Azure and nothing is recorded."""
    drain = tmp_path / "drain.py"
    drain.write_text(f"open({str(tmp_path / 'ran')!r}, 'a').write('ran')\n")
    extra = (
        '[[policy.rules]]\nname = "ask"\naction = "ask"\nprepare = ["drain"]\n'
        f"[hooks.drain]\ncommand = [{json.dumps(sys.executable)}, {json.dumps(str(drain))}]\n"
    )
    cfg = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        store_url=store_url,
        vm_name="vm0",
        extra=extra.replace("[policy]\n", ""),
    )
    event_id = sim.schedule("Reboot", notice=3600)
    assert run("once", "--config", str(cfg))[0] == 0
    code, out, err = run("approve", event_id, "--anyway", "--as", "alice", "--config", str(cfg))
    assert code == 3 and out == ""
    assert f"nothing holds or delays an approval of {event_id}: approve it with" in err
    assert f"`sebridge approve {event_id}`" in err
    assert sim.start_requests == []
    assert not (tmp_path / "ran").exists()
    store = Store(store_url)
    try:
        record = store.events.get(event_id)
        assert record is not None and record.approval is None
    finally:
        store.close()

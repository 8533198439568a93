"""`sebridge approve` while no daemon runs carries the approval out itself: it must gate it
on the rule's prepare hooks exactly as the daemon does, under the same agent name (the
one IMDS gives when imds.vm_name is not set). See docs/ARCHITECTURE.md, "Agent name" and
"Readiness hooks"."""

from __future__ import annotations

import sqlite3
import sys
from datetime import UTC, datetime
from pathlib import Path

import pytest

from helpers import cli_main, query, write_config
from sebridge.imds.simulator import Simulator
from sebridge.store.codec import iso
from sebridge.store.store import STALE

RULES = (
    '[[policy.rules]]\nname = "ask with a drain"\naction = "ask"\nprepare = ["drain"]\n'
    '[hooks.drain]\ncommand = ["{command}"]\ntimeout = 60\n'
)


def _config(tmp_path: Path, sim: Simulator, vm_name: str) -> Path:
    drain = tmp_path / "drain"
    drain.write_text(f"#!{sys.executable}\nopen({str(tmp_path / 'drained')!r}, 'w')\n")
    drain.chmod(0o755)
    return write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "state.db",
        jsonl=tmp_path / "out.jsonl",
        vm_name=vm_name,
        extra=RULES.format(command=drain),
    )


@pytest.mark.usefixtures("cli_in_process")
@pytest.mark.parametrize("vm_name", ["", "vm0"], ids=["learnt-from-imds", "configured"])
def test_approve_without_a_daemon_waits_for_this_vms_prepare_hooks(
    sim: Simulator, tmp_path: Path, vm_name: str
) -> None:
    config = _config(tmp_path, sim, vm_name)
    event_id = sim.schedule("Redeploy", notice=1200)  # prepare lead (300 s) not reached
    code, _, err = cli_main("once", "--config", str(config))
    assert code == 0, err
    db = tmp_path / "state.db"
    _stopped_long_ago(db)
    code, out, err = cli_main("approve", event_id, "--as", "alice", "--config", str(config))
    assert code == 4, err  # held: recorded, waiting for readiness
    assert "StartRequests sent" not in out
    assert f"approval of {event_id} by alice: waiting for prepare hooks: vm0: " in out
    assert sim.start_requests == []  # the drain has not run here: nothing POSTed
    assert not (tmp_path / "drained").exists()
    assert query(db, "SELECT actor, state FROM approvals") == [("alice", "waiting")]


def _stopped_long_ago(db: Path) -> None:
    """The daemon stopped longer ago than a heartbeat's STALE: no live agent is known."""
    past = iso(datetime.now(UTC) - 2 * STALE)
    with sqlite3.connect(db) as conn:
        conn.execute("UPDATE documents SET seen_at = ?", (past,))
    conn.close()


@pytest.mark.usefixtures("cli_in_process")
def test_approve_exits_4_while_held_and_anyway_carries_it_out(
    sim: Simulator, tmp_path: Path
) -> None:
    config = _config(tmp_path, sim, "vm0")
    event_id = sim.schedule("Redeploy", notice=1200)
    assert cli_main("once", "--config", str(config))[0] == 0
    _stopped_long_ago(tmp_path / "state.db")
    code, out, err = cli_main("approve", event_id, "--as", "alice", "--config", str(config))
    assert code == 4, err
    assert "waiting for prepare hooks" in out
    assert f"Ways out: sebridge approve {event_id} --anyway (starts it now" in out
    code, out, err = cli_main("approve", event_id, "--as", "bob", "--config", str(config))
    assert code == 4, err  # still held; bob hears who approved first
    assert "(approved by alice first)" in out
    code, out, err = cli_main(
        "approve", event_id, "--as", "bob", "--anyway", "--config", str(config)
    )
    assert code == 0, err
    assert out.startswith(f"approved {event_id} anyway as bob: StartRequests sent to Azure")
    assert sim.start_requests == [event_id]
    assert not (tmp_path / "drained").exists()
    code, out, err = cli_main("approve", event_id, "--as", "carol", "--config", str(config))
    assert code == 3, err  # refused: already approved, by the one who asked and by bob anyway
    assert f"{event_id} was already approved by alice, approved anyway by bob (posted)" in out
    code, out, err = cli_main("history", event_id, "--config", str(config))
    assert code == 0, err
    assert "Approval by bob not carried out: waiting for prepare hooks" in out
    assert "already approved by alice" in out  # carol's refused attempt
    # Who approved anyway said once, then the VMs not ready (model/wording/outlook.py: approved_as).
    assert f"{event_id} anyway by bob via cli: Not ready: vm0: waiting (drain not started)" in out

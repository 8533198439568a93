"""`sebridge demo`: the simulator, the daemon and the console sink, on this machine.

A scripted Freeze, Redeploy, User Reboot and Preempt play out at a fast time
scale. The policy approves the Freeze (under 9 s) and the Reboot (User) by
itself; the Redeploy waits for a person: answer the prompt, or run the
printed `sebridge approve` command (this very executable, by its full path)
from another terminal; `--yes` approves it without asking. It ends by itself
with a summary of what happened and what IMDS received.
"""

from __future__ import annotations

import select
import shlex
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Callable, Iterable
from datetime import UTC, datetime
from pathlib import Path

from sebridge.cli.runtime import build_runner
from sebridge.engine.daemon import Daemon
from sebridge.imds.simulator import Simulator, demo_scenario
from sebridge.integrations.registry import load_config
from sebridge.kernel.clock import utcnow
from sebridge.model import EventType
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from sebridge.model.records import EventRecord
from sebridge.store import Store

__all__ = ["run_demo"]

# The whole scenario takes about 20 s at time scale 60; this is a safety net.
MAX_SECONDS = 180.0
# How long the prompt waits for an answer before the demo goes on without one.
ANSWER_SECONDS = 8.0


def run_demo(time_scale: float = 60.0, assume_yes: bool = False) -> int:
    """Run the demo end to end; returns 0 when every event played out, 2 for a bad setting."""
    try:
        simulator = Simulator(time_scale=time_scale, vm_name="demo-vm")
    except ValueError as exc:  # time scale 0, negative or not a number: said as `simulate` says it
        print(f"sebridge demo: {exc}", file=sys.stderr, flush=True)
        return 2
    with tempfile.TemporaryDirectory(prefix="sebridge-demo-") as folder, simulator as sim:
        config_path = Path(folder) / "sebridge.toml"
        config_path.write_text(
            f'[imds]\nendpoint = "{sim.url}"\npoll_interval = 0.25\n'
            f'[store]\nurl = "sqlite:///{folder}/state.db"\n'
        )
        config = load_config(config_path)
        runner = build_runner(config)
        daemon, dispatcher = runner.daemon, runner.parts.dispatcher
        stop = threading.Event()
        worker = threading.Thread(target=runner.run, args=(stop,), daemon=True)
        print(f"sebridge demo: IMDS simulator at {sim.url}, {time_scale:g}x real time")
        print(f"store: {folder}/state.db; console sink below\n")
        worker.start()
        started = utcnow()
        event_ids = sim.load_scenario(demo_scenario())
        try:
            finished = _follow(
                daemon,
                sim,
                started,
                event_ids,
                config_path,
                flush=dispatcher.flush,
                assume_yes=assume_yes,
            )
        finally:
            stop.set()
            worker.join(timeout=15)
        _summary(config.store.url, event_ids, sim.start_requests)
        return 0 if finished else 1


def _follow(
    daemon: Daemon,
    sim: Simulator,
    started: datetime,
    event_ids: list[str],
    config_path: Path,
    *,
    flush: Callable[[float], object],
    assume_yes: bool,
) -> bool:
    asked = False
    deadline = time.monotonic() + MAX_SECONDS
    while time.monotonic() < deadline:
        # Played out is the simulator's to say: at a fast time scale on a busy machine an
        # event can come and go between two polls (a Preempt's 30 s of notice are 0.05 s at
        # 600x); waiting for the daemon to have seen every one would wait forever.
        played_out = _played_out(sim, event_ids)
        records = {
            r.event.event_id: r for r in daemon.store.events.current(include_gone_since=started)
        }
        if played_out and not any(r.present for r in records.values()):
            flush(2.0)  # what the dispatcher has due is delivered before the summary
            return True
        redeploy = _waiting_redeploy(records.values())
        if redeploy and not asked:
            asked = True
            _offer_approval(daemon, redeploy, config_path, assume_yes)
        time.sleep(0.2)
    print("demo: the scenario did not finish in time", file=sys.stderr)
    return False


def _played_out(sim: Simulator, event_ids: list[str]) -> bool:
    """Whether every scripted event has left the simulator's document for good."""
    return all(sim.event(e)["status"] in ("Completed", "Cancelled") for e in event_ids)


def _waiting_redeploy(records: Iterable[EventRecord]) -> EventRecord | None:
    for record in records:
        event = record.event
        if event.event_type == EventType.REDEPLOY and record.present and not event.started:
            return record if record.blocker() is None else None
    return None


def _offer_approval(
    daemon: Daemon, record: EventRecord, config_path: Path, assume_yes: bool
) -> None:
    event_id = record.event.event_id
    if assume_yes:
        print(
            f"\n>>> The Redeploy {event_id} waits for a person: approving it (--yes)\n", flush=True
        )
        _approve(daemon, event_id)
        return
    command = f"SEBRIDGE_CONFIG={shlex.quote(str(config_path))} {_sebridge()} approve {event_id}"
    print(
        f"\n>>> The Redeploy {event_id} waits for a person. Approve it from another terminal:\n"
        f"    {command}\n",
        flush=True,
    )
    if sys.stdin is None or not sys.stdin.isatty():
        return
    # On a line of its own: event lines printed meanwhile must not run into it.
    print(
        f">>> ...or here: type y and Enter within {ANSWER_SECONDS:g} s to approve it now",
        flush=True,
    )
    ready, _, _ = select.select([sys.stdin], [], [], ANSWER_SECONDS)
    if not ready:
        print(
            f">>> no answer in {ANSWER_SECONDS:g} s: not approved here; it starts by itself "
            "at NotBefore unless approved with the command above",
            flush=True,
        )
        return
    if sys.stdin.readline().strip().lower() not in ("y", "yes"):
        print(">>> not approved: it starts by itself at NotBefore", flush=True)
        return
    _approve(daemon, event_id)


def _approve(daemon: Daemon, event_id: str) -> None:
    outcome = daemon.approvals.request(ApprovalRequest(event_id, "you", "demo"))
    if outcome.kind == OutcomeKind.REFUSED:
        print(f">>> too late: {outcome.reason}", flush=True)


def _sebridge() -> str:
    """This very sebridge as a command that works from any shell, venv activated or not."""
    argv0 = Path(sys.argv[0])
    if argv0.name == "sebridge" and argv0.is_file():
        return shlex.quote(str(argv0.absolute()))
    found = shutil.which(sys.argv[0]) if argv0.name == "sebridge" else None
    if found:
        return shlex.quote(str(Path(found).absolute()))
    return f"{shlex.quote(sys.executable)} -m sebridge"  # python -m sebridge, or embedded


def _summary(store_url: str, event_ids: list[str], start_requests: list[str]) -> None:
    store = Store(store_url)
    try:
        records = {
            r.event.event_id: r
            for r in store.events.current(include_gone_since=datetime.min.replace(tzinfo=UTC))
        }
    finally:
        store.close()
    print("\nsummary")
    for event_id in event_ids:
        record = records.get(event_id)
        if record is None:
            print(f"  {event_id}  never seen: it came and went between two polls")
            continue
        approval = record.approval
        how = f"approved by {approval.actor} ({approval.state})" if approval else "not approved"
        posts = start_requests.count(event_id)
        delivered = ", ".join(f"{d.sink} {d.state}" for d in record.deliveries) or "no sinks"
        print(
            f"  {record.event.event_type:<9} {event_id}  {record.state:<9}  {how}; "
            f"StartRequests received by IMDS: {posts}; {delivered}"
        )

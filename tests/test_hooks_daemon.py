"""Readiness hooks, the gate before StartRequests, and reminders: the daemon against the IMDS
simulator, hooks as real processes, on both store dialects (conftest.py: store_url).

The daemon runs without threads here (tick; `sebridge once` does the same): the hook
worker runs before the carrier in each tick, so every step is deterministic.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from helpers import ListSink, carried, wait_until
from sebridge.cli.assembly import compose_daemon
from sebridge.config.loader import from_mapping
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.integrations.jsonl.sink import record
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import StoreError
from sebridge.model.approval import ApprovalState, OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from sebridge.model.leads import REMIND, REMIND_AFTER, Lead
from sebridge.model.wording.hooks import hook_news
from sebridge.policy.compile import build_policy
from sebridge.store import Store


def hook_script(tmp_path: Path, name: str, body: str) -> list[str]:
    """A hook that appends its name and stage to tmp_path/ran, then runs `body`."""
    path = tmp_path / f"{name}.py"
    path.write_text(
        "import os, sys\n"
        f"open({str(tmp_path / 'ran')!r}, 'a').write("
        "os.environ['SEBRIDGE_HOOK'] + ':' + os.environ['SEBRIDGE_STAGE'] + ':' "
        "+ os.environ['SEBRIDGE_VM_NAME'] + '\\n')\n" + body
    )
    return [sys.executable, str(path)]


def ran(tmp_path: Path) -> list[str]:
    path = tmp_path / "ran"
    return path.read_text().split() if path.exists() else []


MakeDaemon = Callable[..., Daemon]

_WAIT_FOR_RELEASE = (
    "import pathlib, time\n"
    "release = pathlib.Path(__file__).parent / 'release'\n"
    "deadline = time.monotonic() + 30\n"
    "while not release.exists() and time.monotonic() < deadline:\n"
    "    time.sleep(0.05)\n"
)


_FAILS_TWICE = (
    "runs = open(os.path.join(os.path.dirname(__file__), 'ran')).read().count('flaky:')\n"
    "if runs <= 2:\n    print(f'lb busy ({runs})'); sys.exit(1)\n"
)


@pytest.fixture
def make_daemon(sim: Simulator, store_url: str, tmp_path: Path) -> Iterator[MakeDaemon]:
    made: list[Daemon] = []
    hooks = {
        "drain": {"command": hook_script(tmp_path, "drain", "print('drained web1')\n")},
        "fails": {"command": hook_script(tmp_path, "fails", "print('lb said 503'); sys.exit(1)\n")},
        "undrain": {"command": hook_script(tmp_path, "undrain", "")},
        # Runs until the test creates tmp_path/release (at most 30 s).
        "slow": {"command": hook_script(tmp_path, "slow", _WAIT_FOR_RELEASE)},
        # Fails its first two runs, then succeeds; retries at once.
        "flaky": {
            "command": hook_script(tmp_path, "flaky", _FAILS_TWICE),
            "retries": 2,
            "retry_delay": 0,
        },
        "fails_twice_tried": {
            "command": hook_script(tmp_path, "fails_twice_tried", "print('503'); sys.exit(1)\n"),
            "retries": 1,
            "retry_delay": 60,
        },
        # A timeout longer than any notice: NotBefore is always nearer.
        "fails_long": {
            "command": hook_script(tmp_path, "fails_long", "sys.exit(2)\n"),
            "retries": 3,
            "retry_delay": 0,
            "timeout": 86400,
        },
    }

    def make(
        rules: list[dict[str, Any]],
        sink: ListSink,
        *,
        vm: str = "vm0",
        dry_run: bool = False,
        lead: int = 300,
        clock: Callable[[], datetime] = utcnow,
    ) -> Daemon:
        config = from_mapping(
            {
                "policy": {"rules": rules, "dry_run": dry_run, "prepare_lead_seconds": lead},
                "hooks": hooks,
            }
        )
        d = compose_daemon(
            ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
            Store(store_url, agent=vm),
            {"list": sink},
            policy=build_policy(config.policy),
            dry_run=dry_run,
            vm_name=vm,
            hooks=config.hooks,
            clock=clock,
        )
        made.append(d)
        return d

    yield make
    for d in made:
        d.imds.close()
        d.store.close()


def tick(d: Daemon) -> None:
    d.tick()
    d.parts.dispatcher.deliver_due("list")


def test_an_approve_rule_posts_only_after_its_prepare_hooks_succeeded(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    rules = [
        {"name": "drain first", "action": "approve", "prepare": ["drain"], "recover": ["undrain"]}
    ]
    d = make_daemon(rules, sink)
    event_id = sim.schedule("Reboot")
    tick(d)
    assert ran(tmp_path) == ["drain:prepare:vm0"]
    assert sim.start_requests == [event_id]
    kinds = sink.kinds(event_id)
    assert kinds.index("hook_started") < kinds.index("hook_succeeded") < kinds.index("approved")
    done = sink.of(event_id, "hook_succeeded")[0].transition.hook
    assert done is not None and done.hook == "drain" and done.vm == "vm0" and done.exit_code == 0
    assert "drained web1" in done.output
    # At most once per event and VM: later ticks run nothing again.
    tick(d)
    assert ran(tmp_path) == ["drain:prepare:vm0"]
    # The event ends: its recover hook runs, once.
    sim.start_event(event_id)
    tick(d)
    sim.complete(event_id)
    tick(d)
    tick(d)
    assert ran(tmp_path) == ["drain:prepare:vm0", "undrain:recover:vm0"]
    assert sink.kinds(event_id)[-2:] == ["hook_started", "hook_succeeded"]


def test_one_events_long_drain_does_not_keep_anothers_hooks_waiting(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    rules = [
        {"event_types": ["Reboot"], "action": "approve", "prepare": ["slow"]},
        {"event_types": ["Preempt"], "action": "approve", "prepare": ["drain"]},
    ]
    d = make_daemon(rules, sink)
    # As in `sebridge run`: the worker and the carrier on threads of their own, the
    # document recorded as the recorder does (no round run by the caller).
    d.parts.hook_worker.start()
    d.carrier.start()
    try:
        reboot = sim.schedule("Reboot", notice=900)
        d.act(d.poll())
        wait_until(lambda: "slow:prepare:vm0" in ran(tmp_path), 10)
        preempt = sim.schedule("Preempt", notice=30)

        def preempt_released() -> bool:
            d.act(d.poll())
            return preempt in sim.start_requests

        # The Reboot's drain is still running; the Preempt's ran beside it and went out.
        wait_until(preempt_released, 15)
        assert "drain:prepare:vm0" in ran(tmp_path)
        assert reboot not in sim.start_requests and not (tmp_path / "release").exists()
        (tmp_path / "release").touch()

        def reboot_released() -> bool:
            d.act(d.poll())
            return reboot in sim.start_requests

        wait_until(reboot_released, 15)
    finally:
        (tmp_path / "release").touch()
        d.parts.hook_worker.stop(5.0)
        d.carrier.stop(5.0)
    assert sim.start_requests.count(reboot) == sim.start_requests.count(preempt) == 1


def test_a_store_that_refuses_a_hook_run_is_not_asked_again_in_a_loop(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sink = ListSink()
    d = make_daemon([{"action": "approve", "prepare": ["drain"]}], sink)
    asked = []

    def refuse(*args: Any, **kwargs: Any) -> None:
        asked.append(time.monotonic())
        raise StoreError("the store does not answer")

    monkeypatch.setattr(d.store.hook_runs, "begin", refuse)
    d.parts.hook_worker.start()  # as in `sebridge run`: the worker on threads of its own
    try:
        sim.schedule("Reboot")
        d.act(d.poll())  # recorded; the worker's thread is woken, not run here
        d.carrier.run_once()  # the approval waits for the hook: the worker is woken again
        wait_until(lambda: asked, 10)
        time.sleep(1.0)
    finally:
        d.parts.hook_worker.stop(5.0)
    # Looked at again by a wake or the heartbeat, not at once: a failed chain must not spin.
    assert len(asked) <= 2, len(asked)
    assert ran(tmp_path) == []


def test_a_failed_prepare_hook_holds_the_approval_and_says_why(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    d = make_daemon([{"action": "approve", "prepare": ["fails", "drain"]}], sink)
    event_id = sim.schedule("Reboot")
    tick(d)
    tick(d)
    assert sim.start_requests == []  # nothing reached IMDS
    assert ran(tmp_path) == ["fails:prepare:vm0"]  # the chain ended at the first failure
    held = sink.of(event_id, "held")
    assert len(held) == 1
    assert "held: fails failed (exit 1) on vm0: lb said 503" in held[0].transition.note
    assert "Nothing was sent to Azure" in held[0].transition.note
    failed = sink.of(event_id, "hook_failed")[0].transition.hook
    assert failed is not None and failed.exit_code == 1 and failed.why == "exit 1"
    # A person's later approval is held too, and told why.
    outcome = carried(d, ApprovalRequest(event_id, "U123", "slack"), wait=1.0)
    assert outcome.kind == OutcomeKind.HELD
    assert "fails failed (exit 1) on vm0" in outcome.reason
    assert sim.start_requests == []


def test_on_prepare_failure_approve_goes_ahead_and_says_so(
    sim: Simulator, make_daemon: MakeDaemon
) -> None:
    sink = ListSink()
    d = make_daemon(
        [{"action": "approve", "prepare": ["fails"], "on_prepare_failure": "approve"}], sink
    )
    event_id = sim.schedule("Reboot")
    tick(d)
    assert sim.start_requests == [event_id]
    approved = sink.of(event_id, "approved")[0].transition
    assert "fails failed (exit 1) on vm0" in approved.note
    assert "approved anyway (on_prepare_failure = approve)" in approved.note


def test_a_persons_approval_waits_for_the_prepare_hooks(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    d = make_daemon([{"action": "ask", "prepare": ["drain"]}], sink, lead=60)
    event_id = sim.schedule("Redeploy", notice=900)
    tick(d)
    assert ran(tmp_path) == []  # asked; NotBefore is further away than the lead
    outcome = carried(d, ApprovalRequest(event_id, "U123", "slack"), wait=1.0)
    assert outcome.kind == OutcomeKind.HELD
    assert "waiting for prepare hooks: vm0: waiting (drain not started)" in outcome.reason
    assert sim.start_requests == []
    tick(d)  # the approval starts the hooks; once they succeeded, StartRequests goes
    assert ran(tmp_path) == ["drain:prepare:vm0"]
    assert sim.start_requests == [event_id]
    approval = d.store.approvals.get(event_id)
    assert approval is not None and approval.state == ApprovalState.POSTED


def test_prepare_hooks_start_by_the_lead_without_an_approval(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    d = make_daemon([{"action": "ask", "prepare": ["drain"]}], sink, lead=900)
    soon = sim.schedule("Redeploy", notice=600)
    later = sim.schedule("Redeploy", notice=3000)
    tick(d)
    assert ran(tmp_path) == ["drain:prepare:vm0"]
    assert sink.kinds(soon).count("hook_succeeded") == 1
    assert "hook_started" not in sink.kinds(later)
    assert sim.start_requests == []  # ready, but nobody approved: ask means ask


def test_dry_run_runs_no_hook_and_says_which_would_have(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    d = make_daemon([{"action": "approve", "prepare": ["drain"]}], sink, dry_run=True)
    event_id = sim.schedule("Reboot")
    tick(d)
    assert ran(tmp_path) == []
    assert sim.start_requests == []
    would = sink.of(event_id, "would_approve")
    assert len(would) == 1 and would[0].prepare == ("drain",)


def test_dry_run_shows_hooks_as_not_run_not_as_waiting(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    # An ask event inside its prepare lead: outside dry run its drain would run now.
    d = make_daemon([{"action": "ask", "prepare": ["drain"]}], sink, dry_run=True, lead=900)
    event_id = sim.schedule("Redeploy", notice=600)
    tick(d)
    tick(d)
    assert ran(tmp_path) == []
    (scheduled,) = sink.of(event_id, "scheduled")
    assert [v.line() for v in scheduled.readiness] == ["vm0: dry run (drain not run)"]


def test_a_run_cut_short_by_a_crash_runs_again_and_says_so(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    rules = [{"action": "ask", "prepare": ["drain"]}]
    first = make_daemon(rules, sink, lead=60)  # not due yet: the test begins the run itself
    event_id = sim.schedule("Reboot")
    first.tick()  # records the event; then "crash" between begin and end of the run
    record = first.store.events.get(event_id)
    assert record is not None
    first.store.hook_runs.begin(
        record.event, vm="vm0", stage="prepare", hook="drain", now=first.clock(), sinks=["list"]
    )
    first.store.close()
    second = make_daemon(rules, sink, lead=3600)
    tick(second)
    assert ran(tmp_path) == ["drain:prepare:vm0"]
    started = [m.transition.hook for m in sink.of(event_id, "hook_started")]
    assert [s.attempt for s in started if s] == [1, 2]
    assert (
        hook_news(sink.of(event_id, "hook_started")[-1].transition)
    ) == "drain started on vm0 again (attempt 2: a restart interrupted the run before)"


def test_an_unapproved_ask_event_is_reminded_once_per_lead(
    sim: Simulator, make_daemon: MakeDaemon
) -> None:
    sink = ListSink()
    shift = [timedelta(0)]
    rules = [{"action": "ask", "remind": [900, 300, 120]}]

    def clock() -> datetime:
        return utcnow() + shift[0]

    d = make_daemon(rules, sink, clock=clock)
    event_id = sim.schedule("Redeploy", notice=600)
    tick(d)

    def leads() -> list[int | None]:
        return [m.transition.remind_before for m in sink.of(event_id, "reminder")]

    # 600 s of notice: the 900 s lead had passed when it was first seen (its first
    # announcement said it), so no reminder a second later.
    assert sink.of(event_id, "scheduled") and leads() == []
    shift[0] = timedelta(seconds=310)
    tick(d)
    assert leads() == [300]
    tick(d)
    d.store.close()
    # A restart does not say it again; the next lead comes in its time.
    again = make_daemon(rules, sink, clock=clock)
    tick(again)
    assert leads() == [300]
    shift[0] = timedelta(seconds=490)
    tick(again)
    assert leads() == [300, 120]


def test_approved_events_are_not_reminded(sim: Simulator, make_daemon: MakeDaemon) -> None:
    sink = ListSink()
    shift = [timedelta(0)]
    d = make_daemon([{"action": "ask", "remind": [900]}], sink, clock=lambda: utcnow() + shift[0])
    approved = sim.schedule("Redeploy", notice=1000)
    asked = sim.schedule("Redeploy", notice=1000)
    tick(d)
    assert sink.of(asked, "reminder") == []  # 1000 s ahead: the 900 s lead has not come
    carried(d, ApprovalRequest(approved, "U1", "slack"), wait=1.0)
    shift[0] = timedelta(seconds=200)
    tick(d)
    assert [m.transition.remind_before for m in sink.of(asked, "reminder")] == [900]
    assert sink.of(approved, "reminder") == []


def test_a_held_event_is_reminded_at_each_lead_of_either_kind(
    sim: Simulator, make_daemon: MakeDaemon
) -> None:
    """The finding: once an approval was held, no reminder came until Azure started the
    event. Held, it is reminded at its `remind_after` and `remind` leads, each once (a
    restart says none again); the leads its 10 minutes' notice can never reach are said in
    its first message. Nothing reaches IMDS."""
    sink = ListSink()
    shift = [timedelta(0)]
    rules = [
        {
            "action": "approve",
            "prepare": ["fails"],
            "remind": [1200, 300],
            "remind_after": [60, 900],
        }
    ]

    def clock() -> datetime:
        return utcnow() + shift[0]

    d = make_daemon(rules, sink, clock=clock)
    event_id = sim.schedule("Redeploy", notice=600)
    tick(d)
    tick(d)
    assert len(sink.of(event_id, "held")) == 1 and sink.of(event_id, "reminder") == []
    (first,) = sink.of(event_id, "scheduled")
    assert first.transition.unreachable == (Lead(REMIND, 1200), Lead(REMIND_AFTER, 900))
    assert record(first)["unreachable_reminders"] == [{"remind": 1200}, {"remind_after": 900}]
    # No document change from here on: only the wake at the hold has the reminders look.
    shift[0] = timedelta(seconds=70)
    tick(d)
    shift[0] = timedelta(seconds=310)
    tick(d)
    d.store.close()
    again = make_daemon(rules, sink, clock=clock)
    tick(again)
    reminders = sink.of(event_id, "reminder")
    said = [(m.transition.remind_before, m.transition.remind_after) for m in reminders]
    assert said == [(None, 60), (300, None)]
    assert all(m.transition.while_held for m in reminders)
    assert all(m.approval_state == ApprovalState.HELD for m in reminders)  # sinks word it so
    lines = [record(m) for m in reminders]
    assert [(x["remind_before"], x["remind_after"], x["while_held"]) for x in lines] == [
        (None, 60, True),
        (300, None, True),
    ]
    assert sim.start_requests == []


def test_remind_after_and_remind_of_the_same_seconds_are_two_reminders(
    sim: Simulator, make_daemon: MakeDaemon
) -> None:
    """An unanswered ask event: 120 s after it was first announced, and 120 s before
    NotBefore, each its own reminder (their keys never collide); waiting for its hooks
    after a person approved, it gets none."""
    sink = ListSink()
    shift = [timedelta(0)]
    rules = [{"action": "ask", "remind": [120], "remind_after": [120]}]
    d = make_daemon(rules, sink, clock=lambda: utcnow() + shift[0])
    event_id = sim.schedule("Redeploy", notice=600)
    tick(d)
    assert sink.of(event_id, "scheduled")[0].transition.unreachable == ()
    shift[0] = timedelta(seconds=130)
    tick(d)
    shift[0] = timedelta(seconds=490)
    tick(d)
    reminders = sink.of(event_id, "reminder")
    said = [(m.transition.remind_before, m.transition.remind_after) for m in reminders]
    assert said == [(None, 120), (120, None)]
    assert not any(m.transition.while_held for m in reminders)
    history = [h for h in d.store.history.entries() if h.transition.kind == "reminder"]
    assert len(history) == 2


@pytest.fixture
def fleet(sim: Simulator, pg_url: str, tmp_path: Path) -> Iterator[Callable[..., Daemon]]:
    """Agents of one fleet on one PostgreSQL database, each its own VM; the hook `check`
    fails on vm1."""
    made: list[Daemon] = []
    check = hook_script(tmp_path, "check", "sys.exit(os.environ['SEBRIDGE_VM_NAME'] == 'vm1')\n")
    undrain = hook_script(tmp_path, "undrain", "")
    hooks = {"check": {"command": check}, "undrain": {"command": undrain}}

    def agent(vm: str, sink: ListSink, rules: list[dict[str, Any]]) -> Daemon:
        config = from_mapping({"policy": {"rules": rules}, "hooks": hooks})
        d = compose_daemon(
            ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
            Store(pg_url, agent=vm),
            {"list": sink},
            policy=build_policy(config.policy),
            vm_name=vm,
            hooks=config.hooks,
        )
        made.append(d)
        d.tick()  # the fleet knows it from now on (an agent never heard of is "no agent")
        return d

    yield agent
    for d in made:
        d.imds.close()
        d.store.close()


def test_a_fleet_posts_once_every_listed_vm_with_an_agent_is_ready(
    sim: Simulator, fleet: Callable[..., Daemon], tmp_path: Path
) -> None:
    sink = ListSink()
    rules = [{"action": "ask", "prepare": ["check"]}]
    vm0, vm2 = fleet("vm0", sink, rules), fleet("vm2", sink, rules)
    event_id = sim.schedule("Reboot", resources=["vm0", "vm2", "vm9"], notice=1800)
    vm0.tick()
    vm2.tick()
    outcome = carried(vm0, ApprovalRequest(event_id, "U1", "slack"), wait=1.0)
    assert outcome.kind == OutcomeKind.HELD
    vm0.parts.hook_worker.run_once()  # vm0 is ready; vm2 has not prepared yet
    vm0.carrier.run_once()
    assert sim.start_requests == []
    lines = [v.line() for v in vm0.hooks.shown(event_id)[0]]
    assert lines == [
        "vm0: ready",
        "vm2: waiting (check not started)",
        "vm9: no agent: sebridge cannot drain it",
    ]
    vm2.parts.hook_worker.run_once()
    vm0.carrier.run_once()
    assert sim.start_requests == [event_id]
    assert sorted(ran(tmp_path)) == ["check:prepare:vm0", "check:prepare:vm2"]


def test_one_failed_vm_holds_the_fleets_approval(
    sim: Simulator, fleet: Callable[..., Daemon]
) -> None:
    sink = ListSink()
    rules = [{"action": "approve", "prepare": ["check"]}]
    vm0, vm1 = fleet("vm0", sink, rules), fleet("vm1", sink, rules)
    event_id = sim.schedule("Reboot", resources=["vm0", "vm1"])
    vm1.tick()  # vm1's hook fails at once (the policy approved)
    vm0.tick()
    for d in (vm0, vm1, vm0):
        d.parts.hook_worker.run_once()
        d.carrier.run_once()
    vm0.parts.dispatcher.deliver_due("list")
    assert sim.start_requests == []
    held = sink.of(event_id, "held")
    assert len(held) == 1 and "check failed (exit 1) on vm1" in held[0].transition.note
    lines = [v.line() for v in vm0.hooks.shown(event_id)[0]]
    assert lines == ["vm0: ready", "vm1: failed: check exit 1"]


def test_every_agent_recovers_at_its_own_tick_after_the_end(
    sim: Simulator, fleet: Callable[..., Daemon], tmp_path: Path
) -> None:
    """Finding: after a 3-VM Reboot, undrain ran at once on the agent whose tick recorded the
    end, a minute later on the others. Each agent's own tick that sees the event gone from
    its own document runs its recover hook, whatever the others saw."""
    sink = ListSink()
    rules = [{"action": "approve", "prepare": ["check"], "recover": ["undrain"]}]
    agents = [fleet(vm, sink, rules) for vm in ("vm0", "vm2", "vm3")]
    event_id = sim.schedule("Reboot", resources=["vm0", "vm2", "vm3"])
    for d in agents * 2:
        d.tick()
    assert sim.start_requests == [event_id]
    sim.start_event(event_id)
    for d in agents:
        d.tick()
    sim.complete(event_id)
    for n, d in enumerate(agents, 1):
        d.tick()  # this agent's document lost the event (the others' may not have yet)
        recovered = sorted(r for r in ran(tmp_path) if r.startswith("undrain"))
        assert recovered == [f"undrain:recover:{a.vm_name()}" for a in agents[:n]]
    record = d.store.events.get(event_id)
    assert record is not None and not record.present  # the last agent's document lost it too


def test_every_recover_hook_runs_even_after_one_failed(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    rules = [{"action": "ask", "recover": ["fails", "undrain"]}]
    d = make_daemon(rules, sink)
    event_id = sim.schedule("Reboot")
    tick(d)
    assert ran(tmp_path) == []  # no prepare hooks; nothing to recover yet
    sim.complete(event_id)
    tick(d)
    tick(d)
    assert ran(tmp_path) == ["fails:recover:vm0", "undrain:recover:vm0"]
    assert sink.kinds(event_id).count("hook_failed") == 1
    assert sink.kinds(event_id).count("hook_succeeded") == 1


def test_approve_anyway_carries_out_a_held_approval_and_the_start_is_an_alarm(
    sim: Simulator, make_daemon: MakeDaemon
) -> None:
    sink = ListSink()
    d = make_daemon([{"action": "approve", "prepare": ["fails"]}], sink)
    event_id = sim.schedule("Reboot")
    tick(d)
    tick(d)
    assert sink.kinds(event_id)[-1] == "held"
    # Without --anyway: held, told the two ways out; a double click is one note, to every sink.
    for _ in range(2):
        outcome = carried(d, ApprovalRequest(event_id, "carol", "cli"), wait=1.0)
        assert outcome.kind == OutcomeKind.HELD
    d.parts.dispatcher.deliver_due("list")
    (note,) = sink.of(event_id, "problem")
    assert note.transition.actor == "carol"
    assert "Approval by carol not carried out: held: fails failed (exit 1) on vm0" in (
        note.transition.note
    )
    assert f"Ways out: sebridge hooks retry {event_id} (runs the failed" in note.transition.note
    assert f"; or sebridge approve {event_id} --anyway (starts it now" in note.transition.note
    assert [h.transition.kind for h in d.store.history.entries(event_id=event_id)].count(
        "problem"
    ) == 1
    assert sim.start_requests == []

    outcome = carried(d, ApprovalRequest(event_id, "carol", "cli", anyway=True), wait=1.0)
    assert outcome.kind == OutcomeKind.APPROVED
    assert sim.start_requests == [event_id]
    d.parts.dispatcher.deliver_due("list")
    (approved,) = sink.of(event_id, "approved")
    assert (approved.transition.actor, approved.transition.via) == ("carol", "cli")
    assert approved.transition.note == (
        "approved anyway by carol; not ready: vm0: failed: fails exit 1"
    )
    approval = d.store.approvals.get(event_id)
    assert approval is not None
    assert (approval.state, approval.actor, approval.anyway_by) == ("posted", "policy", "carol")
    # Messages name who made it happen (Slack's redrawn message, cards): carol, not "policy".
    assert approved.approved_by == "carol"
    # A second anyway finds it carried out: already approved.
    again = carried(d, ApprovalRequest(event_id, "dave", "cli", anyway=True), wait=0.5)
    assert again.kind == OutcomeKind.ALREADY
    assert sim.start_requests == [event_id]

    sim.start_event(event_id)
    tick(d)
    tick(d)
    assert sink.kinds(event_id)[-2:] == ["started", "started_unready"]
    (alarm,) = sink.of(event_id, "started_unready")
    assert alarm.transition.note == "vm0: failed: fails exit 1"


def test_approve_anyway_on_an_event_nothing_holds_or_delays_is_refused_with_the_plain_command(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    """Issue 37, item 6: nobody approved it and its prepare hooks have not begun; anyway
    would send StartRequests before them (the drain then ran 3 s after the POST)."""
    sink = ListSink()
    d = make_daemon([{"action": "ask", "prepare": ["drain"]}], sink, lead=60)
    event_id = sim.schedule("Redeploy", notice=900)
    tick(d)
    outcome = carried(d, ApprovalRequest(event_id, "U123", "slack", anyway=True), wait=1.0)
    assert outcome.kind == OutcomeKind.REFUSED and outcome.approval is None
    assert outcome.reason == (
        f"nothing holds or delays an approval of {event_id}: approve it with"
        f" `sebridge approve {event_id}` (its prepare hooks run first, then StartRequests goes"
        " to Azure); --anyway is for an approval readiness holds or delays"
    )
    assert sim.start_requests == []
    assert ran(tmp_path) == []
    assert d.store.events.get(event_id).approval is None  # type: ignore[union-attr]


def test_an_event_that_starts_ready_raises_no_alarm(
    sim: Simulator, make_daemon: MakeDaemon
) -> None:
    sink = ListSink()
    d = make_daemon([{"action": "approve", "prepare": ["drain"]}], sink)
    event_id = sim.schedule("Reboot")
    tick(d)
    assert sim.start_requests == [event_id]
    sim.start_event(event_id)
    tick(d)
    assert "started" in sink.kinds(event_id)
    assert "started_unready" not in sink.kinds(event_id)


def test_a_held_event_that_azure_starts_at_not_before_is_an_alarm_once_across_a_fleet(
    sim: Simulator, make_daemon: MakeDaemon
) -> None:
    sink, other = ListSink(), ListSink()
    rules = [{"action": "approve", "prepare": ["fails"]}]
    d = make_daemon(rules, sink)
    e = make_daemon(rules, other, vm="vm1")  # a second agent of the same store
    event_id = sim.schedule("Reboot", resources=["vm0", "vm1"])
    tick(d)
    tick(d)
    assert sim.start_requests == []
    sim.start_event(event_id)  # NotBefore came: Azure starts it regardless
    tick(d)
    tick(e)
    tick(d)
    e.parts.dispatcher.deliver_due("list")
    alarms = sink.of(event_id, "started_unready") + other.of(event_id, "started_unready")
    assert len(alarms) == 1
    assert "vm0: failed: fails exit 1" in alarms[0].transition.note


def news(sink: ListSink, event_id: str, kind: str) -> list[str]:
    return [hook_news(m.transition) for m in sink.of(event_id, kind)]


def test_a_failed_prepare_hook_runs_again_and_only_its_final_outcome_counts(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    d = make_daemon([{"action": "approve", "prepare": ["flaky"]}], sink)
    event_id = sim.schedule("Reboot", notice=1800)
    tick(d)  # the first run fails: another try comes, so the approval waits, not held
    assert ran(tmp_path) == ["flaky:prepare:vm0"]
    approval = d.store.approvals.get(event_id)
    assert approval is not None and approval.state == ApprovalState.WAITING
    assert sim.start_requests == []
    tick(d)  # the second fails too
    tick(d)  # the third succeeds: StartRequests goes
    assert ran(tmp_path) == ["flaky:prepare:vm0"] * 3
    assert sim.start_requests == [event_id]
    tick(d)
    assert sink.of(event_id, "held") == []
    assert news(sink, event_id, "hook_started") == [
        "flaky started on vm0 (attempt 1 of 3)",
        "flaky started on vm0 again (attempt 2 of 3)",
        "flaky started on vm0 again (attempt 3 of 3)",
    ]
    failed = news(sink, event_id, "hook_failed")
    assert len(failed) == 2
    assert failed[0].startswith("flaky failed (exit 1) on vm0: lb busy (1); runs again at ")
    assert failed[0].endswith(" UTC (attempt 2 of 3)")
    assert failed[1].endswith(" UTC (attempt 3 of 3)")


def test_a_hook_whose_retries_are_spent_holds_once(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    now = [utcnow()]
    sink = ListSink()
    d = make_daemon(
        [{"action": "approve", "prepare": ["fails_twice_tried"]}], sink, clock=lambda: now[0]
    )
    event_id = sim.schedule("Reboot", notice=1800)
    tick(d)
    tick(d)  # its retry_delay (60 s) has not passed: nothing runs again yet
    assert ran(tmp_path) == ["fails_twice_tried:prepare:vm0"]
    lines = [v.line() for v in d.hooks.shown(event_id)[0]]
    assert lines[0].startswith("vm0: waiting (fails_twice_tried failed (exit 1), runs again at ")
    now[0] += timedelta(seconds=61)
    tick(d)  # the retry came: it fails again, and that is final
    tick(d)
    assert ran(tmp_path) == ["fails_twice_tried:prepare:vm0"] * 2
    assert sim.start_requests == []
    held = sink.of(event_id, "held")
    assert len(held) == 1
    assert "fails_twice_tried failed (exit 1, attempt 2) on vm0" in held[0].transition.note
    assert news(sink, event_id, "hook_failed")[-1].endswith("; no retries left (attempt 2 of 2)")


def test_no_retry_when_notbefore_is_nearer_than_the_hooks_timeout(
    sim: Simulator, make_daemon: MakeDaemon, tmp_path: Path
) -> None:
    sink = ListSink()
    d = make_daemon([{"action": "approve", "prepare": ["fails_long"]}], sink)
    event_id = sim.schedule("Reboot", notice=1800)
    tick(d)
    tick(d)
    assert ran(tmp_path) == ["fails_long:prepare:vm0"]
    assert len(sink.of(event_id, "held")) == 1
    assert news(sink, event_id, "hook_failed")[0].endswith(
        "; no time for another try before NotBefore (attempt 1 of 4)"
    )


def test_a_hooks_retry_runs_again_on_the_agent_where_it_failed_only(
    sim: Simulator, fleet: Callable[..., Daemon], tmp_path: Path
) -> None:
    sink = ListSink()
    rules = [{"action": "approve", "prepare": ["check"]}]
    vm0, vm1 = fleet("vm0", sink, rules), fleet("vm1", sink, rules)
    event_id = sim.schedule("Reboot", resources=["vm0", "vm1"], notice=1800)
    for d in (vm1, vm0, vm1, vm0):
        d.tick()
    vm0.parts.dispatcher.deliver_due("list")
    assert len(sink.of(event_id, "held")) == 1
    assert sorted(ran(tmp_path)) == ["check:prepare:vm0", "check:prepare:vm1"]
    # What `sebridge hooks retry` records (tests/test_hooks_retry.py runs the command).
    answer = vm0.store.hook_retries.request(
        event_id, actor="alice", via="cli", now=utcnow(), sinks_for=lambda r: ("list",)
    )
    assert answer.runs == (("vm1", "check"),) and answer.released
    vm0.heard(frozenset({"hook_retries"}))  # vm0 has nothing to run again
    vm1.heard(frozenset({"hook_retries"}))  # its listener hears the request: check runs again
    for d in (vm0, vm1):  # the rounds the wake asked for, run once (hooks, then the carrier)
        d.rounds.run_once()
    vm0.parts.dispatcher.deliver_due("list")
    assert sorted(ran(tmp_path)) == ["check:prepare:vm0", "check:prepare:vm1", "check:prepare:vm1"]
    # It failed again on vm1: held again, and said again (a new attempt, a new hold).
    assert sim.start_requests == []
    held = [m.transition.note for m in sink.of(event_id, "held")]
    assert len(held) == 2 and "check failed (exit 1, attempt 2) on vm1" in held[1]
    assert [m.transition.note for m in sink.of(event_id, "hooks_retry")] == [
        "hooks retry requested by alice: check on vm1 runs again; the held approval waits for them"
    ]

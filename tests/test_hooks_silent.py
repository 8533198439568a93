"""A fleet agent that dies during a prepare hook: the fleet waits for its VM until the run's
start plus the hook's timeout plus SILENT_MARGIN, says so (a problem note to every sink and
the VM's readiness line, naming the VM and the time), then holds the approval: its agent is
silent, nobody can drain it (issue 34: it was carried out without it, un-drained). When the
agent comes back and its hook succeeds, the held approval is carried out. Two agents in one
process on PostgreSQL, a controlled clock: no waiting for minutes.
"""

from __future__ import annotations

import sys
from collections.abc import Iterator
from datetime import datetime, timedelta
from pathlib import Path

import pytest

from helpers import ListSink
from sebridge.cli.assembly import compose_daemon
from sebridge.config.loader import from_mapping
from sebridge.engine.daemon import Daemon
from sebridge.hooks.readiness import SILENT_MARGIN
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.integrations.jsonl.sink import record
from sebridge.kernel.clock import utcnow
from sebridge.model.approval import ApprovalState
from sebridge.policy.compile import build_policy
from sebridge.store import Store

TIMEOUT = 60  # the hook's timeout, seconds
SINKS: dict[str, ListSink] = {}  # each agent's sink, by its VM (the fixture fills it)


class Clock:
    """The agents' clock, moved by the test."""

    def __init__(self) -> None:
        self.now = utcnow().replace(microsecond=0)

    def __call__(self) -> datetime:
        return self.now

    def at(self, moment: datetime) -> None:
        self.now = moment


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def agents(
    sim: Simulator, pg_url: str, tmp_path: Path, clock: Clock
) -> Iterator[dict[str, Daemon]]:
    """vm0 and vm2 on one PostgreSQL store, each with the prepare hook `check` (exits 0)."""
    check = tmp_path / "check.py"
    check.write_text("print('drained')\n")
    config = from_mapping(
        {
            "policy": {"rules": [{"action": "approve", "prepare": ["check"]}]},
            "hooks": {"check": {"command": [sys.executable, str(check)], "timeout": TIMEOUT}},
        }
    )
    made = {
        vm: compose_daemon(
            ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
            Store(pg_url, agent=vm),
            {"list": SINKS.setdefault(vm, ListSink())},
            policy=build_policy(config.policy),
            vm_name=vm,
            hooks=config.hooks,
            clock=clock,
        )
        for vm in ("vm0", "vm2")
    }
    yield made
    SINKS.clear()
    for d in made.values():
        d.imds.close()
        d.store.close()


def sink_of(d: Daemon) -> ListSink:
    return SINKS[d.vm_name()]


def look(d: Daemon) -> None:
    """A round of vm0's carrier (its heartbeat or due time would start one) and deliveries."""
    d.carrier.run_once()
    d.parts.dispatcher.deliver_due("list")


def test_an_agent_that_dies_mid_hook_is_waited_for_until_its_timeout_plus_the_margin(
    sim: Simulator, agents: dict[str, Daemon], clock: Clock
) -> None:
    vm0, vm2 = agents["vm0"], agents["vm2"]
    t0 = clock()
    vm2.tick()  # vm2's agent is alive (its document recorded at t0) ...
    event_id = sim.schedule("Reboot", resources=["vm0", "vm2"], notice=1800)
    vm0.tick()  # ... vm0 records the event and the policy's approval, and prepares
    event = vm0.store.events.get(event_id)
    assert event is not None
    # ... and vm2 began its hook at t0 + 1 s, then died: nothing more from it.
    clock.at(t0 + timedelta(seconds=1))
    assert vm2.store.hook_runs.begin(
        event.event, vm="vm2", stage="prepare", hook="check", now=clock(), sinks=("list",)
    )
    until = clock() + timedelta(seconds=TIMEOUT) + SILENT_MARGIN
    clock.at(t0 + timedelta(seconds=2))
    look(vm0)
    assert vm0.hooks.shown(event_id)[0][1].line() == "vm2: preparing (check running)"

    # vm2 missed its beats for STALE: taken for dead, but its hook may still be running.
    clock.at(t0 + timedelta(seconds=91))
    look(vm0)
    line = f"vm2: waiting for vm2, whose agent stopped answering during check, until {until:%H:%M:%S} UTC"
    assert vm0.hooks.shown(event_id)[0][1].line() == line
    problems = sink_of(vm0).of(event_id, "problem")
    assert len(problems) == 1
    said = record(problems[0])
    assert said["note"] == (
        f"vm2's agent stopped answering during its prepare hook check: waiting for vm2 until "
        f"{until:%H:%M:%S} UTC (the hook's timeout, 60 s, plus 90 s), then the approval is "
        "held: sebridge cannot drain it"
    )
    assert [v.line() for v in problems[0].readiness][1] == line
    approval = vm0.store.events.get(event_id)
    assert approval is not None and approval.approval is not None
    assert approval.approval.state == ApprovalState.WAITING
    assert line in str(approval.approval.last_error)
    # The carrier's next round is due at the bound, not at the next heartbeat.
    assert vm0.carrier.carry_out_due() == until

    clock.at(until - timedelta(seconds=1))
    look(vm0)
    assert sim.start_requests == []
    assert len(sink_of(vm0).of(event_id, "problem")) == 1  # said once, however often looked at

    # Past the bound: vm2 is silent since its last beat (t0), and holds. Fail closed.
    clock.at(until)
    look(vm0)
    look(vm0)
    assert sim.start_requests == []
    assert sink_of(vm0).of(event_id, "approved") == []
    (held,) = sink_of(vm0).of(event_id, "held")
    silent = f"vm2: agent silent since {t0:%H:%M} UTC"
    assert held.transition.note == (
        f"Approval by policy held: {silent}. Nothing was sent to Azure."
    )
    assert vm0.hooks.shown(event_id)[0][1].line() == silent
    # Its ways out: bring the agent back, or approve anyway (no failed hook to retry).
    assert record(held)["ways_out"] == [
        "start sebridge's agent on vm2 again",
        f"sebridge approve {event_id} --anyway",
    ]

    # vm2's agent comes back: its interrupted hook runs again, succeeds, and the held
    # approval is carried out.
    clock.at(until + timedelta(seconds=5))
    vm2.tick()
    look(vm0)
    assert sim.start_requests == [event_id]
    (approved,) = sink_of(vm0).of(event_id, "approved")
    assert approved.transition.note == ""


def test_a_live_agents_running_hook_is_waited_for_past_the_bound(
    sim: Simulator, agents: dict[str, Daemon], clock: Clock
) -> None:
    """The bound is for agents that stopped answering: one that still beats counts."""
    vm0, vm2 = agents["vm0"], agents["vm2"]
    t0 = clock()
    vm2.tick()
    event_id = sim.schedule("Reboot", resources=["vm0", "vm2"], notice=1800)
    vm0.tick()
    event = vm0.store.events.get(event_id)
    assert event is not None
    assert vm2.store.hook_runs.begin(
        event.event, vm="vm2", stage="prepare", hook="check", now=t0, sinks=("list",)
    )
    clock.at(t0 + timedelta(seconds=TIMEOUT) + SILENT_MARGIN + timedelta(seconds=30))
    vm2.store.agents.heartbeat(clock())  # vm2's agent beats: alive
    look(vm0)
    assert sim.start_requests == []
    assert vm0.hooks.shown(event_id)[0][1].line() == "vm2: preparing (check running)"
    assert sink_of(vm0).of(event_id, "problem") == []

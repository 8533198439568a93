"""Readiness across a fleet of real `sebridge run` processes on PostgreSQL: one event lists
three VMs, each agent runs its own hooks, and StartRequests (one releases them all) goes
out only once every listed VM is ready; one VM's failure holds it for all."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

import test_fleet
from helpers import wait_polls, wait_until
from sebridge.imds.simulator import Simulator
from test_fleet import Fleet

# The fleet of test_fleet.py: three agents on this run's PostgreSQL database (conftest.py
# starts a simulator for each: `sims`).
fleet, AGENTS = test_fleet.fleet, test_fleet.AGENTS

pytestmark = pytest.mark.slow

EVENT = "5D1A3C55-0000-4000-8000-00000000F1EE"


def with_hooks(agents: Fleet, rule: str, body: str) -> Path:
    """Add one rule and the hook `check` (a program running `body`) to every agent's config."""
    check = agents.tmp_path / "check"
    check.write_text(
        f"#!{sys.executable}\nimport os, sys, time\n"
        "vm = os.environ['SEBRIDGE_VM_NAME']\n"
        f"log = open({str(agents.tmp_path / 'ran')!r}, 'a')\n" + body
    )
    check.chmod(0o755)
    extra = f'{rule}prepare = ["check"]\n[hooks.check]\ncommand = ["{check}"]\ntimeout = 60\n'
    for config in agents.configs:
        config.write_text(config.read_text() + extra)
    return agents.tmp_path / "ran"


def schedule_everywhere(imds: list[Simulator]) -> None:
    for sim in imds:
        sim.schedule("Reboot", event_id=EVENT, resources=["vm0", "vm1", "vm2"], notice=1800)


def posted(imds: list[Simulator]) -> list[tuple[float, str]]:
    return [(p.at, i) for sim in imds for p in sim.posts for i in p.ids]


def test_the_approval_waits_for_the_slowest_vm(
    fleet: Fleet,
    sims: list[Simulator],
) -> None:
    ran = with_hooks(
        fleet,
        '[[policy.rules]]\nname = "drain all"\naction = "approve"\n',
        "if vm == 'vm1': time.sleep(3)\nlog.write(f'{vm} {time.time()}\\n')\n",
    )
    fleet.start()
    schedule_everywhere(sims)
    fleet.wait_line(EVENT, "approved")
    finished = dict(line.split() for line in ran.read_text().splitlines())
    assert sorted(finished) == ["vm0", "vm1", "vm2"]
    started = posted(sims)
    assert [i for _, i in started] == [EVENT]  # one StartRequests, to one agent's IMDS
    # It went out after the slow VM was ready (the simulator's clock is time.time's).
    assert started[0][0] >= float(finished["vm1"])
    succeeded = fleet.lines(EVENT, "hook_succeeded")
    assert sorted(str(s["hook_vm"]) for s in succeeded) == ["vm0", "vm1", "vm2"]


def test_one_failed_vm_holds_the_event_for_the_whole_fleet(
    fleet: Fleet,
    sims: list[Simulator],
) -> None:
    with_hooks(
        fleet,
        '[[policy.rules]]\nname = "drain all"\naction = "approve"\n',
        "if vm == 'vm2': print('vm2: jobs still running'); sys.exit(4)\n",
    )
    fleet.start()
    schedule_everywhere(sims)
    fleet.wait_line(EVENT, "held")
    held = fleet.lines(EVENT, "held")
    assert len(held) == 1
    assert "check failed (exit 4) on vm2: vm2: jobs still running" in str(held[0]["note"])
    for sim in sims:  # five polls more of each agent: still nothing reaches IMDS
        wait_polls(sim, 5)
    assert posted(sims) == []
    wait_until(lambda: len(fleet.lines(EVENT, "hook_succeeded")) == 2, 20)

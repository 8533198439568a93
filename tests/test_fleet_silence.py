"""Issue 34, finding 1: nobody is released in silence. A listed VM whose known agent is silent
(or stopped: at once) holds the approval; a VM no agent ever ran on is named in the approved
line and the started_unready alarm, and holds too with `require_agents = true`; `[fleet]
silent_after` below one heartbeat is refused. Daemons in this process on each store (the
IMDS simulator over a real socket), or real runners on PostgreSQL where an agent stops.
"""

from __future__ import annotations

import json
import re
import signal
import sys
from collections.abc import Callable, Iterator
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fakes.teams import FakeTeams
from helpers import (
    DaemonProcess,
    ListSink,
    RunnerThread,
    carried,
    cli_main,
    lines_of,
    run_cli,
    wait_polls,
    wait_until,
    write_config,
)
from sebridge.cli.assembly import compose_daemon
from sebridge.cli.runtime import build_runner
from sebridge.config.core import HEARTBEAT_SECONDS
from sebridge.config.loader import from_mapping
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.integrations.jsonl.sink import record
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.clock import utcnow
from sebridge.model.approval import ApprovalState, OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from sebridge.policy.compile import build_policy
from sebridge.store import Store
from sebridge.store.store import HEARTBEAT

DRAIN = "print('drained')\n"

MakeAgent = Callable[..., Daemon]


def hook(tmp_path: Path) -> dict[str, Any]:
    """The prepare hook `drain` (succeeds at once)."""
    path = tmp_path / "drain.py"
    path.write_text(DRAIN)
    return {"drain": {"command": [sys.executable, str(path)]}}


def agents_on(sim: Simulator, url: str, tmp_path: Path, made: list[Daemon]) -> MakeAgent:
    """agent(vm, sink, rules): a daemon of the fleet in this process, heard from once (its
    first tick) so the fleet knows it."""

    def make(
        vm: str,
        sink: ListSink,
        rules: list[dict[str, Any]],
        *,
        clock: Callable[[], datetime] = utcnow,
    ) -> Daemon:
        config = from_mapping({"policy": {"rules": rules}, "hooks": hook(tmp_path)})
        d = compose_daemon(
            ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
            Store(url, agent=vm),
            {"list": sink},
            policy=build_policy(config.policy),
            vm_name=vm,
            hooks=config.hooks,
            clock=clock,
        )
        made.append(d)
        d.tick()
        return d

    return make


@pytest.fixture
def agent(sim: Simulator, store_url: str, tmp_path: Path) -> Iterator[MakeAgent]:
    """Agents on each store."""
    made: list[Daemon] = []
    yield agents_on(sim, store_url, tmp_path, made)
    for d in made:
        d.imds.close()
        d.store.close()


@pytest.fixture
def fleet_agent(sim: Simulator, pg_url: str, tmp_path: Path) -> Iterator[MakeAgent]:
    """Agents of a fleet: one PostgreSQL store."""
    made: list[Daemon] = []
    yield agents_on(sim, pg_url, tmp_path, made)
    for d in made:
        d.imds.close()
        d.store.close()


def deliver(d: Daemon) -> None:
    d.tick()
    d.carrier.run_once()
    d.parts.dispatcher.deliver_due("list")


# ------------------------------------------------------------------ [fleet] silent_after


def test_silent_after_below_one_heartbeat_is_refused_by_check_naming_the_key(
    tmp_path: Path,
) -> None:
    assert timedelta(seconds=HEARTBEAT_SECONDS) == HEARTBEAT  # config's bound is the beat
    cfg = tmp_path / "sebridge.toml"
    cfg.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "state.db"}"\n[fleet]\nsilent_after = "10s"\n'
    )
    code, _, err = cli_main("check", "--config", str(cfg))
    assert code == 2, err
    assert "fleet.silent_after: must be >= 30 (at least one heartbeat (30 s)" in err
    # Durations as everywhere; the defaults are a week and two heartbeats.
    config = from_mapping({"fleet": {"silent_after": "90s", "known_for": "1d"}})
    assert (config.fleet.silent_after, config.fleet.known_for) == (90.0, 86400.0)
    assert (from_mapping({}).fleet.silent_after, from_mapping({}).fleet.known_for) == (
        60.0,
        604800.0,
    )


# ------------------------------------------------------------------ no agent on a listed VM


def test_a_vm_no_agent_ever_ran_on_is_named_in_the_approval_and_the_alarm(
    sim: Simulator, agent: MakeAgent
) -> None:
    """Finding 1: web9 (no agent) was released un-drained with `not_ready: []` and "Approved
    by judy"; nobody was told. It does not block by default, and every message about the
    approval names it."""
    sink = ListSink()
    vm0 = agent("vm0", sink, [{"action": "approve", "prepare": ["drain"]}])
    event_id = sim.schedule("Reboot", resources=["vm0", "web9"], notice=1800)
    deliver(vm0)
    assert sim.start_requests == [event_id]
    (approved,) = sink.of(event_id, "approved")
    assert approved.transition.note == "web9: no agent: sebridge cannot drain it"
    said = record(approved)  # the JSON line (finding 1: `not_ready: []`)
    assert said["note"] == "web9: no agent: sebridge cannot drain it"
    assert [(v["vm"], v["state"]) for v in said["not_ready"]] == [("web9", "no agent")]
    sim.start_event(event_id)
    deliver(vm0)
    deliver(vm0)
    (alarm,) = sink.of(event_id, "started_unready")
    assert alarm.transition.note == "web9: no agent, not drained"


def test_require_agents_holds_for_a_vm_no_agent_runs_on(sim: Simulator, agent: MakeAgent) -> None:
    sink = ListSink()
    rules = [{"action": "approve", "prepare": ["drain"], "require_agents": True}]
    vm0 = agent("vm0", sink, rules)
    event_id = sim.schedule("Reboot", resources=["vm0", "web9"], notice=1800)
    deliver(vm0)
    deliver(vm0)
    assert sim.start_requests == []
    (held,) = sink.of(event_id, "held")
    assert held.transition.note == (
        "Approval by policy held: web9: no agent: sebridge cannot drain it (require_agents). "
        "Nothing was sent to Azure."
    )
    # No failed hook to retry: approve anyway is the way out.
    assert record(held)["ways_out"] == [f"sebridge approve {event_id} --anyway"]
    out = carried(vm0, ApprovalRequest(event_id, "carol", "cli", anyway=True), wait=2)
    assert out.kind == OutcomeKind.APPROVED
    assert sim.start_requests == [event_id]
    deliver(vm0)
    (approved,) = sink.of(event_id, "approved")
    assert (
        approved.transition.note
        == "approved anyway by carol; not ready: web9: no agent, not drained"
    )


def test_require_agents_without_prepare_hooks_is_a_config_error() -> None:
    from sebridge.kernel.errors import ConfigError

    with pytest.raises(ConfigError, match=r"policy.rules\[1\].require_agents: needs prepare hooks"):
        from_mapping({"policy": {"rules": [{"action": "ask", "require_agents": True}]}})


def test_an_agent_not_heard_from_within_known_for_is_no_agent(
    sim: Simulator, fleet_agent: MakeAgent
) -> None:
    agent = fleet_agent
    sink = ListSink()
    now = utcnow()
    rules = [{"action": "approve", "prepare": ["drain"]}]
    agent("vm2", ListSink(), rules, clock=lambda: now - timedelta(days=8))  # last heard 8 d ago
    vm0 = agent("vm0", sink, rules)
    event_id = sim.schedule("Reboot", resources=["vm0", "vm2"], notice=1800)
    deliver(vm0)
    assert sim.start_requests == [event_id]  # forgotten: no agent, not waited for, named
    (approved,) = sink.of(event_id, "approved")
    assert approved.transition.note == "vm2: no agent: sebridge cannot drain it"


def test_a_known_agent_silent_for_silent_after_holds(
    sim: Simulator, fleet_agent: MakeAgent
) -> None:
    agent = fleet_agent
    sink = ListSink()
    now = utcnow().replace(microsecond=0)
    rules = [{"action": "approve", "prepare": ["drain"]}]
    agent("vm2", ListSink(), rules, clock=lambda: now - timedelta(seconds=61))
    vm0 = agent("vm0", sink, rules, clock=lambda: now)
    event_id = sim.schedule("Reboot", resources=["vm0", "vm2"], notice=1800)
    deliver(vm0)
    deliver(vm0)
    assert sim.start_requests == []
    (held,) = sink.of(event_id, "held")
    silent = f"vm2: agent silent since {now - timedelta(seconds=61):%H:%M} UTC"
    assert held.transition.note == f"Approval by policy held: {silent}. Nothing was sent to Azure."
    assert [v.line() for v in held.readiness] == ["vm0: ready", silent]


def test_an_agent_that_goes_quiet_while_awaited_holds_at_its_beat_plus_silent_after(
    sim: Simulator, fleet_agent: MakeAgent
) -> None:
    """vm2 is live when the approval starts waiting for its drain, then is heard from no
    more: the carrier looks again at vm2's last beat plus silent_after (not at a hook's end,
    which never comes) and holds."""
    now = [utcnow().replace(microsecond=0)]
    t0 = now[0]
    sink = ListSink()
    rules = [{"action": "approve", "prepare": ["drain"]}]
    fleet_agent("vm2", ListSink(), rules, clock=lambda: t0)  # heard from at t0, then silent
    vm0 = fleet_agent("vm0", sink, rules, clock=lambda: now[0])
    event_id = sim.schedule("Reboot", resources=["vm0", "vm2"], notice=1800)
    deliver(vm0)
    approval = vm0.store.approvals.get(event_id)
    assert approval is not None and approval.state == ApprovalState.WAITING
    assert approval.last_error == "waiting for prepare hooks: vm2: waiting (drain not started)"
    assert vm0.carrier.carry_out_due() == t0 + 2 * HEARTBEAT  # when vm2 turns silent
    now[0] = t0 + 2 * HEARTBEAT
    vm0.carrier.carry_out_due()
    vm0.parts.dispatcher.deliver_due("list")
    assert sim.start_requests == []
    (held,) = sink.of(event_id, "held")
    assert f"vm2: agent silent since {t0:%H:%M} UTC" in held.transition.note


# ------------------------------------------------------------------ a stopped agent


def runner_config(sim: Simulator, url: str, tmp_path: Path, vm: str) -> Any:
    return config_from_mapping(
        {
            "imds": {"endpoint": sim.url, "poll_interval": 0.2, "vm_name": vm},
            "store": {"url": url},
            "console": {"enabled": False},
            "jsonl": {"path": str(tmp_path / f"{vm}.jsonl")},
            "dispatch": {"shutdown_grace_seconds": 1.0},
            "policy": {"rules": [{"action": "ask", "prepare": ["drain"]}]},
            "hooks": hook(tmp_path),
        },
        environ={},
    )


@pytest.mark.slow
def test_a_stopped_agent_is_silent_at_once_and_holds_until_it_comes_back_and_prepares(
    sim: Simulator, pg_url: str, tmp_path: Path
) -> None:
    """vm2's `sebridge run` stops cleanly: the fleet hears it at once (not after
    silent_after), and an approval listing vm2 is held naming it. vm2's agent comes back,
    drains, and the held approval is carried out: one StartRequests."""
    config = runner_config(sim, pg_url, tmp_path, "vm2")
    vm2 = RunnerThread(build_runner(config))
    vm2.start()
    store = Store(pg_url, agent="")
    try:
        wait_until(lambda: "vm2" in store.agents.known(utcnow(), timedelta(days=1)), 10)
        vm2.stop()
        stopped = store.agents.known(utcnow(), timedelta(days=1))["vm2"]
        assert stopped.stopped

        sink = ListSink()
        vm0 = compose_daemon(
            ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
            Store(pg_url, agent="vm0"),
            {"list": sink},
            policy=build_policy(config.policy),
            vm_name="vm0",
            hooks=config.hooks,
        )
        try:
            event_id = sim.schedule("Reboot", resources=["vm0", "vm2"], notice=1800)
            deliver(vm0)
            asked = ApprovalRequest(event_id, "judy", "cli")
            out = carried(vm0, asked, wait=5, through_readiness=True)
            assert out.kind == OutcomeKind.HELD
            silent = f"vm2: agent silent since {stopped.seen_at:%H:%M} UTC"
            assert out.reason == f"held: {silent}; nothing sent to Azure"
            deliver(vm0)
            (held,) = sink.of(event_id, "held")
            assert (
                held.transition.note
                == f"Approval by judy held: {silent}. Nothing was sent to Azure."
            )
            assert sim.start_requests == []

            back = RunnerThread(build_runner(config))
            back.start()
            try:
                wait_until(lambda: sim.start_requests == [event_id], 20, message="StartRequests")
                wait_until(
                    lambda: (
                        getattr(store.approvals.get(event_id), "state", "") == ApprovalState.POSTED
                    ),
                    message="the approval recorded as posted",
                )
            finally:
                back.stop()
        finally:
            vm0.imds.close()
            vm0.store.close()
    finally:
        store.close()


# ------------------------------------------------------------------ the walk (issue 34)

AGENTS = 3  # the walk's fleet: conftest.py starts a simulator for each (`sims`)
WALK = "5D1A3C55-0000-4000-8000-0000000051E7"


def said_on_consoles(tmp_path: Path, kind: str) -> list[str]:
    """The console lines of one kind, on whichever agent delivered them."""
    label = kind.replace("_", " ").upper()
    return [
        line
        for i in range(AGENTS)
        if (tmp_path / f"vm{i}.out").exists()
        for line in (tmp_path / f"vm{i}.out").read_text().splitlines()
        if f" {label} " in line and WALK in line
    ]


def walk_lines(tmp_path: Path, kind: str) -> list[dict[str, Any]]:
    return [r for i in range(AGENTS) for r in lines_of(tmp_path / f"vm{i}.jsonl", WALK, kind)]


@pytest.mark.slow
def test_a_fleet_with_a_stopped_agent_holds_then_starts_anyway_with_an_alarm(
    tmp_path: Path,
    sims: list[Simulator],
    pg_url: str,
    start_daemon: Callable[..., DaemonProcess],
    teams: FakeTeams,
) -> None:
    """The issue's walk: three agents on PostgreSQL, web2's (vm2's) stopped; a Reboot lists
    all three. approve -> held naming vm2 ("agent silent since ...") -> no StartRequests ->
    approve --anyway -> exactly one StartRequests -> started_unready naming vm2."""
    drain = tmp_path / "drain"
    drain.write_text(f"#!{sys.executable}\nprint('drained')\n")
    drain.chmod(0o755)
    extra = (
        '[[policy.rules]]\nname = "drain first"\naction = "ask"\nprepare = ["drain"]\n'
        f'[hooks.drain]\ncommand = ["{drain}"]\n'
        f'[teams]\nwebhook_url = "{teams.workflows_url}"\n'
    )
    configs = [
        write_config(
            tmp_path / f"vm{i}.toml",
            endpoint=sim.url,
            store_url=pg_url,
            vm_name=f"vm{i}",
            jsonl=tmp_path / f"vm{i}.jsonl",
            console=True,
            extra=extra,
        )
        for i, sim in enumerate(sims)
    ]
    agents = [
        start_daemon(cfg, sim, stdout=tmp_path / f"vm{i}.out")
        for i, (cfg, sim) in enumerate(zip(configs, sims, strict=True))
    ]
    agents[2].signal(signal.SIGTERM)  # vm2's agent stops cleanly
    assert agents[2].wait(30) == 0, agents[2].log_text()
    for sim in sims:
        sim.schedule("Reboot", event_id=WALK, resources=["vm0", "vm1", "vm2"], notice=1800)
    wait_until(lambda: walk_lines(tmp_path, "scheduled"), 15, message="the scheduled line")

    judy = run_cli("approve", WALK, "--as", "judy", "--config", str(configs[0]))
    assert judy.returncode == 4, judy.stdout + judy.stderr
    silent = re.search(r"vm2: agent silent since \d\d:\d\d UTC", judy.stdout)
    assert silent, judy.stdout
    assert f"approval of {WALK} by judy: held: {silent[0]}; nothing sent to Azure." in judy.stdout
    assert "start sebridge's agent on vm2 again" in judy.stdout
    assert f"hooks retry {WALK}" not in judy.stdout  # no hook failed: nothing to retry
    wait_until(lambda: walk_lines(tmp_path, "held"), 15, message="the held line")
    (held,) = walk_lines(tmp_path, "held")
    assert held["note"] == f"Approval by judy held: {silent[0]}. Nothing was sent to Azure."
    (console,) = wait_until(lambda: said_on_consoles(tmp_path, "held"), 10)
    print(f"the held console line:\n{console}")
    assert f"HELD      Reboot    {WALK} Approval by judy held: {silent[0]}." in console
    assert "Ways out: start sebridge's agent on vm2 again" in console
    card = wait_until(
        lambda: [
            s
            for s in teams.shown
            if "Approval by judy held" in (said := json.dumps(s.card, ensure_ascii=False))
            and silent[0] in said
        ],
        10,
        message="the held Teams card",
    )
    print(f"the held Teams card:\n{json.dumps(card[0].card, indent=1, ensure_ascii=False)}")
    # A second approval is held too and told why, with the same ways out; `events` says it.
    bob = run_cli("approve", WALK, "--as", "bob", "--config", str(configs[1]))
    assert bob.returncode == 4, bob.stdout + bob.stderr
    wait_until(lambda: walk_lines(tmp_path, "problem"), 15, message="bob's note")
    (note,) = walk_lines(tmp_path, "problem")
    assert str(note["note"]).startswith(f"Approval by bob not carried out: held: {silent[0]};")
    assert "start sebridge's agent on vm2 again" in str(note["note"])
    assert "hooks retry" not in str(note["note"])
    events = run_cli("events", "--config", str(configs[0]))
    assert silent[0] in events.stdout, events.stdout
    for sim in sims[:2]:  # five polls more of each running agent: nothing reaches IMDS
        wait_polls(sim, 5)
    assert [i for sim in sims for p in sim.posts for i in p.ids] == []

    alice = run_cli("approve", WALK, "--anyway", "--as", "alice", "--config", str(configs[1]))
    assert alice.returncode == 0, alice.stdout + alice.stderr
    assert [i for sim in sims for p in sim.posts for i in p.ids] == [WALK]
    for sim in sims:
        sim.start_event(WALK)
    wait_until(lambda: walk_lines(tmp_path, "started_unready"), 15, message="the alarm")
    (alarm,) = walk_lines(tmp_path, "started_unready")
    assert silent[0] in str(alarm["note"])
    (loud,) = wait_until(lambda: said_on_consoles(tmp_path, "started_unready"), 10)
    assert f"ALARM: started while not ready: {silent[0]}" in loud
    assert [i for sim in sims for p in sim.posts for i in p.ids] == [WALK]
    assert all(a.alive() for a in agents[:2])


def test_policy_explain_says_what_a_vm_without_an_agent_does(
    sim: Simulator, tmp_path: Path
) -> None:
    drain = tmp_path / "drain"
    drain.write_text(f"#!{sys.executable}\n")
    drain.chmod(0o755)
    cfg = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "state.db",
        vm_name="vm0",
        extra=(
            '[[policy.rules]]\nname = "strict"\naction = "ask"\nprepare = ["drain"]\n'
            f'require_agents = true\n[hooks.drain]\ncommand = ["{drain}"]\n'
        ),
    )
    event = tmp_path / "event.json"
    event.write_text(
        json.dumps(
            {
                "EventId": "602D9444-D2CD-49C7-8624-8643E7171297",
                "EventType": "Reboot",
                "ResourceType": "VirtualMachine",
                "Resources": ["vm0", "web9"],
                "EventStatus": "Scheduled",
                "NotBefore": "Mon, 19 Sep 2016 18:29:47 GMT",
            }
        )
    )
    code, out, err = cli_main("policy", "explain", "--config", str(cfg), "--event", str(event))
    assert code == 0, err
    assert "  require_agents: a listed VM no agent runs on holds the approval" in out
    code, out, err = cli_main(
        "policy", "explain", "--config", str(cfg), "--event", str(event), "--json"
    )
    assert code == 0, err
    assert json.loads(out)["decision"]["require_agents"] is True

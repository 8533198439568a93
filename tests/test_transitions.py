"""`transitions` per instance, and the defaults per kind of channel (issue 34, finding 15):
chat, console and logs hear every step; mail and Teams hear the first message, holds,
reminders, approvals, alarms and the end, with the hook steps folded into one readiness
message once every listed VM is ready or one failed for good. A 3-VM event with one retry
is a handful of mails, not twenty (bench/routing_noise.py measures it on every sink).

Three agents share one store; both stores (conftest.py: store_url).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from helpers import ListSink, carried, run_cli
from sebridge.cli.assembly import compose_daemon
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping, wanted
from sebridge.kernel.errors import ConfigError
from sebridge.model.approval_request import ApprovalRequest
from sebridge.policy.compile import build_policy
from sebridge.store import Store

VMS = ("web1", "web2", "web3")
SINKS = ("slack", "teams", "email", "jsonl")


def drain_script(tmp_path: Path) -> Path:
    """A prepare hook that fails once on web2, then succeeds (its retry)."""
    script = tmp_path / "drain"
    script.write_text(
        "#!/bin/sh\n"
        f'if [ "$SEBRIDGE_VM_NAME" = web2 ] && [ ! -e "{tmp_path}/once" ]; then\n'
        f'  touch "{tmp_path}/once"; echo "web2: jobs still running"; exit 1\n'
        "fi\n"
    )
    script.chmod(0o755)
    return script


def config_for(sim: Simulator, tmp_path: Path) -> Any:
    dead = "http://127.0.0.1:9"  # the sinks here are ListSinks: nothing is sent there
    return config_from_mapping(
        {
            "imds": {"endpoint": sim.url},
            "slack": {"bot_token": "xoxb-1-t", "app_token": "xapp-1-t", "channel": "C1"},
            "teams": {"webhook_url": f"{dead}/teams"},
            "email": {"host": "127.0.0.1", "from": "s@example.com", "to": ["o@example.com"]},
            # An instance narrowed by hand: its first message and its end, nothing else.
            "jsonl": {"path": "-", "transitions": ["Scheduled", "completed"]},
            "policy": {
                # The hooks start at the lead, before anyone approved (a person decides).
                "prepare_lead_seconds": 3600,
                "rules": [{"name": "drain first", "action": "ask", "prepare": ["drain"]}],
            },
            "hooks": {
                "drain": {"command": [str(drain_script(tmp_path))], "retries": 1, "retry_delay": 0}
            },
        },
        environ={},
    )


@pytest.fixture
def fleet(
    sim: Simulator, store_url: str, tmp_path: Path
) -> Iterator[tuple[list[Daemon], dict[str, ListSink]]]:
    config = config_for(sim, tmp_path)
    sinks = {name: ListSink() for name in SINKS}
    daemons = []
    for vm in VMS:
        store = Store(store_url, agent=vm)
        store.outbox.deliver_only(wanted(config))  # as cli/runtime.py's open_store does
        daemons.append(
            compose_daemon(
                ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
                store,
                sinks,
                vm_name=vm,
                policy=build_policy(config.policy),
                hooks=config.hooks,
            )
        )
    yield daemons, sinks
    for d in daemons:
        d.imds.close()
        d.store.close()


def rounds(daemons: list[Daemon], n: int = 4) -> None:
    for _ in range(n):
        for d in daemons:
            d.tick()
        for d in daemons:
            d.parts.hook_worker.run_once()
        for d in daemons:
            d.carrier.run_once()
        for d in daemons:
            for name in SINKS:
                d.parts.dispatcher.deliver_due(name)


def test_mail_and_teams_get_a_handful_and_one_readiness_message(
    sim: Simulator, fleet: tuple[list[Daemon], dict[str, ListSink]]
) -> None:
    daemons, sinks = fleet
    rounds(daemons, 1)  # every agent has run before the event comes
    event = sim.schedule("Reboot", resources=list(VMS), notice=900)
    rounds(daemons)  # each VM drains; web2's fails once, then its retry succeeds

    def kinds(name: str) -> list[str]:
        return [m.transition.kind for m in sinks[name].by_event(event)]

    # Mail and Teams: the hook steps folded into one message, once every VM is ready.
    assert kinds("email") == kinds("teams") == ["scheduled", "ready"]
    (ready,) = [
        m.transition for m in sinks["email"].by_event(event) if m.transition.kind == "ready"
    ]
    assert ready.note == "ready: web1, web2, web3 prepared"
    # Recorded once in the fleet, though each agent judged the readiness after its hooks.
    history = daemons[0].store.history.entries(event_id=event)
    assert [e.transition.kind for e in history].count("ready") == 1

    assert carried(daemons[0], ApprovalRequest(event, "alice", "cli")).kind == "approved"
    rounds(daemons, 1)
    sim.start_event(event)
    rounds(daemons)
    sim.complete(event)
    rounds(daemons)

    # Chat hears every step: three drains, web2's failure and its retry.
    assert kinds("slack").count("hook_started") == 4 and "hook_failed" in kinds("slack")
    assert "ready" not in kinds("slack") and "started" in kinds("slack")
    # Mail and Teams: the first message, readiness, the approval, the end (started is none
    # of their kinds).
    folded = ["scheduled", "ready", "approved", "completed"]
    assert kinds("email") == folded and kinds("teams") == folded
    # `transitions` given: exactly those kinds (any case).
    assert kinds("jsonl") == ["scheduled", "completed"]


def test_a_failure_for_good_before_any_approval_is_one_readiness_message(
    sim: Simulator, store_url: str, tmp_path: Path
) -> None:
    config = config_from_mapping(
        {
            "teams": {"webhook_url": "http://127.0.0.1:9/teams"},
            "policy": {
                "prepare_lead_seconds": 3600,
                "rules": [{"name": "ask", "action": "ask", "prepare": ["drain"]}],
            },
            "hooks": {"drain": {"command": ["/bin/false"]}},
            "imds": {"endpoint": sim.url},
        },
        environ={},
    )
    teams = ListSink()
    store = Store(store_url, agent="web1")
    store.outbox.deliver_only(wanted(config))
    daemon = compose_daemon(
        ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
        store,
        {"teams": teams},
        vm_name="web1",
        policy=build_policy(config.policy),
        hooks=config.hooks,
    )
    try:
        # Within the prepare lead: the hooks start though nobody approved yet.
        event = sim.schedule("Reboot", resources=["web1"], notice=900)
        for _ in range(3):
            daemon.tick()
            daemon.parts.hook_worker.run_once()
            daemon.parts.dispatcher.deliver_due("teams")
    finally:
        daemon.imds.close()
        store.close()
    said = [(m.transition.kind, m.transition.note) for m in teams.by_event(event)]
    assert said[0][0] == "scheduled"
    assert said[1:] == [("ready", "not ready: web1: failed: drain exit 1")]


def test_a_failed_recover_hook_reaches_mail_as_one_message(sim: Simulator, store_url: str) -> None:
    config = config_from_mapping(
        {
            "email": {"host": "127.0.0.1", "from": "s@example.com", "to": ["o@example.com"]},
            "policy": {"rules": [{"name": "undrain", "action": "inform", "recover": ["undrain"]}]},
            "hooks": {"undrain": {"command": ["/bin/false"]}},
            "imds": {"endpoint": sim.url},
        },
        environ={},
    )
    mail = ListSink()
    store = Store(store_url, agent="web1")
    store.outbox.deliver_only(wanted(config))
    daemon = compose_daemon(
        ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
        store,
        {"email": mail},
        vm_name="web1",
        policy=build_policy(config.policy),
        hooks=config.hooks,
    )
    try:
        event = sim.schedule("Reboot", resources=["web1"])
        daemon.tick()
        sim.start_event(event)
        daemon.tick()
        sim.complete(event)
        for _ in range(3):
            daemon.tick()
            daemon.parts.hook_worker.run_once()
            daemon.parts.dispatcher.deliver_due("email")
    finally:
        daemon.imds.close()
        store.close()
    said = [(m.transition.kind, m.transition.note) for m in mail.by_event(event)]
    assert [kind for kind, _ in said] == ["scheduled", "completed", "ready"]
    assert said[-1][1] == "not recovered: web1: undrain failed (exit 1)"


@pytest.mark.parametrize(
    ("transitions", "expected"),
    [
        (["scheduled", "hook_sucess"], '"hook_sucess" (did you mean "hook_succeeded"?)'),
        ([], "teams.transitions: empty: it would deliver nothing"),
        ("scheduled", "teams.transitions: expected a list of strings"),
    ],
)
def test_an_unknown_transition_kind_is_a_config_error(transitions: Any, expected: str) -> None:
    with pytest.raises(ConfigError) as info:
        config_from_mapping(
            {"teams": {"webhook_url": "https://example.com/x", "transitions": transitions}},
            environ={},
        )
    assert expected in str(info.value)


def test_check_exits_2_naming_the_transitions_key(tmp_path: Path) -> None:
    cfg = tmp_path / "sebridge.toml"
    cfg.write_text(
        f'[store]\nurl = "sqlite:///{tmp_path / "s.db"}"\n[console]\ntransitions = ["schedueld"]\n',
        encoding="utf-8",
    )
    done = run_cli("check", "--config", str(cfg))
    assert done.returncode == 2
    assert "console.transitions: must be one of" in done.stderr
    assert '(did you mean "scheduled"?)' in done.stderr

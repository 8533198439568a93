"""The daemon with [[policy.rules]] against the IMDS simulator: what sinks receive for
approve / ask / inform / ignore, what IMDS receives, and what the store keeps.

Every test on both dialects (conftest.py: store_url).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from helpers import ListSink, carried
from sebridge.cli.assembly import compose_daemon
from sebridge.config.loader import from_mapping
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest
from sebridge.model.decision import Decision
from sebridge.policy.compile import build_policy
from sebridge.store import Store

RULES: list[dict[str, Any]] = [
    {"name": "other VMs", "this_vm": False, "action": "ignore"},
    {
        "name": "quick freezes",
        "event_types": ["Freeze"],
        "max_duration_seconds": 9,
        "action": "approve",
        "recover": ["check"],
    },
    {"name": "redeploys for the record", "event_types": ["Redeploy"], "action": "inform"},
    {"name": "reboots", "event_types": ["Reboot"], "action": "ask", "remind": [600, 120]},
]
LINK = "https://vm0.example.net/approve/"


@pytest.fixture
def sink() -> ListSink:
    return ListSink()


@pytest.fixture
def daemon(sim: Simulator, store_url: str, sink: ListSink) -> Iterator[Daemon]:
    config = from_mapping({"policy": {"rules": RULES}, "hooks": {"check": {"command": ["true"]}}})
    d = compose_daemon(
        ImdsClient(sim.url, timeout=2.0, first_timeout=5.0, sleep=lambda s: None),
        Store(store_url, agent="vm0"),
        {"list": sink},
        policy=build_policy(config.policy),
        vm_name="vm0",
        approve_url=lambda e: LINK + e.event_id,
    )
    yield d
    d.imds.close()
    d.store.close()


def tick(d: Daemon) -> None:
    d.tick()
    d.carrier.run_once()
    d.parts.dispatcher.deliver_due("list")


def test_each_action_reaches_sinks_and_imds_as_its_rule_says(
    sim: Simulator, daemon: Daemon, sink: ListSink
) -> None:
    other = sim.schedule("Reboot", resources=["vm7"])
    freeze = sim.schedule("Freeze", duration=5)
    redeploy = sim.schedule("Redeploy")
    reboot = sim.schedule("Reboot")
    long_freeze = sim.schedule("Freeze", duration=30)
    tick(daemon)

    # ignore: recorded, sent nowhere
    assert sink.by_event(other) == []
    record = daemon.store.events.get(other)
    assert record is not None and record.decision == Decision("ignore", "other VMs")
    # approve: StartRequests went to IMDS, the sink hears "approved by policy"
    assert sim.start_requests == [freeze]
    assert [m.transition.kind for m in sink.by_event(freeze)] == ["scheduled", "approved"]
    assert sink.by_event(freeze)[0].policy == "approve"
    # inform: announced, no approval offered (no link, not approvable)
    (informed,) = sink.by_event(redeploy)
    assert (informed.policy, informed.approvable, informed.approve_url) == ("inform", False, None)
    # ask: a person is offered an approval, with the link
    (asked,) = sink.by_event(reboot)
    assert (asked.policy, asked.approvable, asked.approve_url) == ("ask", True, LINK + reboot)
    # no rule matched: ask
    (fallback,) = sink.by_event(long_freeze)
    assert fallback.policy == "ask" and fallback.approvable
    assert daemon.store.events.get(long_freeze).decision == Decision("ask", "no rule matched")  # type: ignore[union-attr]

    # The whole decision is stored with the event, hooks and reminders included.
    assert daemon.store.events.get(freeze).decision == Decision(  # type: ignore[union-attr]
        "approve", "quick freezes", recover=("check",)
    )
    assert daemon.store.events.get(reboot).decision == Decision(  # type: ignore[union-attr]
        "ask", "reboots", remind=(600, 120)
    )


def test_inform_is_not_offered_to_channels_but_a_person_may_still_approve_it(
    sim: Simulator, daemon: Daemon
) -> None:
    redeploy = sim.schedule("Redeploy")
    reboot = sim.schedule("Reboot")
    tick(daemon)
    # The Jira status search looks only at events that offer an approval.
    assert [r.event.event_id for r in daemon.approvals.open_events()] == [reboot]
    outcome = carried(daemon, ApprovalRequest(redeploy, "alice", "cli"))
    assert outcome.kind == OutcomeKind.APPROVED
    assert sim.start_requests == [redeploy]


def test_an_event_keeps_the_decision_it_was_first_recorded_with(
    sim: Simulator, daemon: Daemon, sink: ListSink, store_url: str
) -> None:
    eid = sim.schedule("Reboot")
    tick(daemon)
    daemon.store.close()
    # Restarted with rules that would ignore everything: the known event stays "ask".
    ignore_all = build_policy(from_mapping({"policy": {"rules": [{"action": "ignore"}]}}).policy)
    daemon.store = Store(store_url, agent="vm0")
    again = compose_daemon(
        daemon.imds, daemon.store, {"list": sink}, policy=ignore_all, vm_name="vm0"
    )
    sim.start_event(eid)
    tick(again)
    assert [m.transition.kind for m in sink.by_event(eid)] == ["scheduled", "started"]
    assert [m.policy for m in sink.by_event(eid)] == ["ask", "ask"]


def test_a_started_event_an_approve_rule_matches_is_announced_not_approved(
    sim: Simulator, daemon: Daemon, sink: ListSink
) -> None:
    eid = sim.schedule("Freeze", duration=5, status="Started")
    tick(daemon)
    assert sim.start_requests == []
    (unplanned,) = sink.by_event(eid)
    assert unplanned.transition.kind == "unplanned" and unplanned.policy == "inform"

"""Teams end to end: the daemon, the IMDS simulator and the fake Teams on real sockets.

A Redeploy becomes a card with an "Approve…" link; opening the link approves nothing; the
form's POST sends the StartRequest to the simulator and a follow-up card says who approved.
Replays, tampered links and links of gone events send nothing to IMDS.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.teams import FakeTeams, Shown
from helpers import wait_until
from link_bridge import PUBLIC, LinkBridge
from sebridge.imds.simulator import Simulator

pytestmark = pytest.mark.usefixtures("no_proxy")


@pytest.fixture
def make_bridge(
    sim: Simulator, teams: FakeTeams, tmp_path: Path
) -> Iterator[Callable[..., LinkBridge]]:
    bridges: list[LinkBridge] = []

    def make(fmt: str = "adaptive") -> LinkBridge:
        url = teams.workflows_url if fmt == "adaptive" else teams.connector_url
        section = {"teams": {"webhook_url": url, "format": fmt}}
        bridges.append(LinkBridge(sim, tmp_path, section))
        return bridges[-1]

    yield make
    for bridge in bridges:
        bridge.stop()


def card_text(shown: Shown) -> str:
    """Every text of a card, joined."""
    out: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            for key, value in node.items():
                if key in ("text", "value", "title") and isinstance(value, str):
                    out.append(value)
                walk(value)
        elif isinstance(node, list):
            for item in node:
                walk(item)

    walk(shown.card)
    return "\n".join(out)


def cards_of(teams: FakeTeams, event_id: str) -> list[Shown]:
    return [s for s in teams.shown if event_id in card_text(s)]


def wait_card(teams: FakeTeams, event_id: str, pattern: str) -> Shown:
    found = wait_until(
        lambda: [s for s in cards_of(teams, event_id) if re.search(pattern, card_text(s))],
        10,
        message=lambda: (
            f"a card matching {pattern!r}; shown: {[card_text(s) for s in teams.shown]}"
        ),
    )
    return found[0]


def approve_url(shown: Shown) -> str:
    """The card's Approve… link (Action.OpenUrl, or a MessageCard's OpenUri)."""
    for action in shown.card.get("actions", []):
        if action["type"] == "Action.OpenUrl":
            return str(action["url"])
    for action in shown.card.get("potentialAction", []):
        if action["@type"] == "OpenUri":
            return str(action["targets"][0]["uri"])
    raise AssertionError(f"no approve link in {shown.card}")


@pytest.mark.parametrize("fmt", ["adaptive", "messagecard"])
def test_redeploy_approved_from_a_teams_card(
    make_bridge: Callable[..., LinkBridge], sim: Simulator, teams: FakeTeams, fmt: str
) -> None:
    bridge = make_bridge(fmt)
    event_id = sim.schedule("Redeploy", description="Planned host maintenance")

    card = wait_card(teams, event_id, r"Redeploy")
    assert re.search(r"in \d+ (s|min)\)", card_text(card))
    url = approve_url(card)
    assert url.startswith(f"{PUBLIC}/approve/")
    path = bridge.local(url)

    page = bridge.get(path)  # what a chat unfurler, and then the person, does
    assert (
        page.status_code == 200
        and "Approve" in page.text
        and "Planned host maintenance" in page.text
    )
    sim.refresh()
    assert sim.posts == []

    done = bridge.post(path, name="Alice")
    assert done.status_code == 200 and "Approved by Alice via approval link" in done.text
    assert sim.start_requests == [event_id]

    followup = wait_card(teams, event_id, r"Approved\*\* by Alice via approval link")
    assert "actions" not in followup.card and "potentialAction" not in followup.card

    again = bridge.post(path, name="Bob")
    assert "Already approved by Alice via approval link" in again.text
    assert [p.ids for p in sim.posts] == [(event_id,)]

    sim.start_event(event_id)
    sim.complete(event_id)
    wait_card(teams, event_id, r"Completed")
    assert [p.ids for p in sim.posts] == [(event_id,)]
    kinds = [card_text(s).splitlines()[0] for s in cards_of(teams, event_id)]
    # The card, approved, completed: each once. "Started" is not one of the kinds Teams
    # gets by default (model/kinds.py: FOLDED).
    assert len(kinds) == 3, kinds


def test_tampered_links_and_gone_events_send_nothing(
    make_bridge: Callable[..., LinkBridge], sim: Simulator, teams: FakeTeams
) -> None:
    bridge = make_bridge()
    event_id = sim.schedule("Reboot")
    path = bridge.local(approve_url(wait_card(teams, event_id, "Reboot")))
    body, mac = path.rsplit("/", 1)[1].split(".")
    forged = f"/approve/{body}.{mac[::-1]}"
    assert bridge.post(forged, name="mallory").status_code == 403
    assert bridge.get(forged).status_code == 403

    sim.complete(event_id)
    wait_card(teams, event_id, r"Cancelled")
    gone = bridge.post(path, name="late")
    assert gone.status_code == 410 and "nothing to approve" in gone.text
    sim.refresh()
    assert sim.posts == [] and sim.start_requests == []
    assert bridge.daemon.store.approvals.get(event_id) is None


def test_an_unplanned_event_gets_a_card_without_a_button(
    make_bridge: Callable[..., LinkBridge], sim: Simulator, teams: FakeTeams
) -> None:
    make_bridge()
    first = sim.schedule("Reboot")
    card = wait_card(teams, first, "Reboot")
    assert "Action.OpenUrl" in str(card.card)
    unplanned = sim.schedule("Freeze", status="Started")
    shown = wait_card(teams, unplanned, "host failure")
    assert "actions" not in shown.card  # nothing to approve


@pytest.mark.slow
def test_throttled_then_delivered_once_and_failures_keep_no_url(
    make_bridge: Callable[..., LinkBridge], sim: Simulator, teams: FakeTeams, tmp_path: Path
) -> None:
    bridge = make_bridge()
    teams.fail_next(429, retry_after=0.3)
    throttled = sim.schedule("Reboot")
    wait_card(teams, throttled, "Reboot")
    assert [p.status for p in teams.posts] == [429, 202]  # retried after Retry-After, once
    assert len(cards_of(teams, throttled)) == 1

    teams.deleted = True  # someone removed the workflow
    lost = sim.schedule("Freeze")

    def failed() -> Any:
        record = bridge.daemon.store.events.get(lost)
        return record and [
            d for d in record.deliveries if d.sink == "teams" and d.state == "failed"
        ]

    (delivery,) = wait_until(failed, 10, message="the Teams delivery marked failed")
    assert "create it again and update teams.webhook_url" in (delivery.last_error or "")
    bridge.stop()
    stored = b"".join(p.read_bytes() for p in tmp_path.glob("state.db*"))  # WAL too
    assert teams.sig.encode() not in stored and teams.workflow.encode() not in stored

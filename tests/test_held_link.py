"""A held event's Teams card and mail carry the approval page's link when links are on
(issue 34, finding 10: a phone user had to scroll back to the first card to reach the page
that offers the ways out and Approve anyway).

The daemon in this process with approval links, the IMDS simulator, the fake Teams and a
real SMTP server on sockets; a prepare hook that fails holds the policy's approval.
"""

from __future__ import annotations

import re
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.smtp import FakeSmtp, Received
from fakes.teams import FakeTeams, Shown
from helpers import RunnerThread, wait_until
from link_bridge import PUBLIC, LinkBridge
from sebridge.cli.runtime import build_runner
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping

pytestmark = pytest.mark.usefixtures("no_proxy")

USER, PASSWORD = "bot", "held-Password-5"


@pytest.fixture
def smtp() -> Iterator[FakeSmtp]:
    with FakeSmtp(users={USER: PASSWORD}) as fake:
        yield fake


def held_bridge(
    sim: Simulator, tmp_path: Path, teams: FakeTeams, smtp: FakeSmtp, fmt: str
) -> LinkBridge:
    fails = tmp_path / "drain.py"
    fails.write_text("import sys\nprint('3 sessions still open')\nsys.exit(1)\n")
    url = teams.workflows_url if fmt == "adaptive" else teams.connector_url
    sections: dict[str, Any] = {
        "policy": {"rules": [{"name": "drain", "action": "approve", "prepare": ["drain"]}]},
        "hooks": {"drain": {"command": [sys.executable, str(fails)]}},
        "teams": {"webhook_url": url, "format": fmt},
        "email": {
            "host": "127.0.0.1",
            "port": smtp.port,
            "ca_file": str(smtp.cert.cert),
            "username": USER,
            "password": PASSWORD,
            "from": "sebridge <sebridge@example.com>",
            "to": ["ops@example.com"],
        },
    }
    return LinkBridge(sim, tmp_path, sections)


def held_card(teams: FakeTeams, event_id: str) -> Shown:
    def found() -> list[Shown]:
        return [s for s in teams.shown if event_id in str(s.card) and "**Held**" in str(s.card)]

    return wait_until(found, 15, message=lambda: f"the held card: {teams.shown}")[0]


def held_mail(smtp: FakeSmtp, event_id: str) -> Received:
    def found() -> list[Received]:
        return [m for m in smtp.mails if event_id in m.part("plain") and "Held:" in m.part("plain")]

    return wait_until(found, 15, message="the held mail")[0]


def link_of(shown: Shown) -> tuple[str, str]:
    """The card's one action: its title and URL (an Adaptive Card's, or a MessageCard's)."""
    if shown.kind == "adaptive":
        (action,) = shown.card["actions"]
        return action["title"], action["url"]
    (action,) = shown.card["potentialAction"]
    return action["name"], action["targets"][0]["uri"]


@pytest.mark.parametrize("fmt", ["adaptive", "messagecard"])
def test_the_held_card_and_mail_link_to_the_page_that_offers_the_ways_out(
    sim: Simulator, tmp_path: Path, teams: FakeTeams, smtp: FakeSmtp, fmt: str
) -> None:
    bridge = held_bridge(sim, tmp_path, teams, smtp, fmt)
    try:
        event_id = bridge.schedule("Reboot")
        page = PUBLIC + bridge.link(event_id)

        title, url = link_of(held_card(teams, event_id))
        assert (title, url) == ("Open the approval page…", page)
        mail = held_mail(smtp, event_id)
        assert f"Approval page: {page}" in mail.part("plain")
        assert f'href="{page}"' in mail.part("html")
        assert "Approve…" not in mail.part("plain")  # no Approve where it would be held

        # What the link opens: held, why, and Approve anyway (the page offers it).
        shown = bridge.get(bridge.local(url))
        assert shown.status_code == 200
        assert "Held, not approved: drain failed (exit 1) on vm0" in shown.text
        assert re.search(
            r'<button type="submit" class="danger">Approve anyway…</button>', shown.text
        )
        assert f"sebridge hooks retry {event_id}" in shown.text
        sim.refresh()
        assert sim.start_requests == []
    finally:
        bridge.stop()


def test_without_links_the_held_card_and_mail_carry_none(
    sim: Simulator, tmp_path: Path, teams: FakeTeams, smtp: FakeSmtp
) -> None:
    """Links off (no public_url): the held card has no action, the mail no page line."""
    fails = tmp_path / "drain.py"
    fails.write_text("import sys\nsys.exit(1)\n")
    config = config_from_mapping(
        {
            "imds": {"endpoint": sim.url, "poll_interval": 0.2, "vm_name": "vm0"},
            "store": {"url": f"sqlite:///{tmp_path / 'state.db'}"},
            "console": {"enabled": False},
            "policy": {"rules": [{"action": "approve", "prepare": ["drain"]}]},
            "hooks": {"drain": {"command": [sys.executable, str(fails)]}},
            "teams": {"webhook_url": teams.workflows_url},
            "email": {
                "host": "127.0.0.1",
                "port": smtp.port,
                "ca_file": str(smtp.cert.cert),
                "username": USER,
                "password": PASSWORD,
                "from": "sebridge <sebridge@example.com>",
                "to": ["ops@example.com"],
            },
        },
        environ={},
    )
    running = RunnerThread(build_runner(config))
    running.start()
    try:
        event_id = sim.schedule("Reboot")
        assert "actions" not in held_card(teams, event_id).card
        mail = held_mail(smtp, event_id)
        assert "Approval page" not in mail.part("plain") and "/approve/" not in mail.part("html")
    finally:
        running.stop()

"""Every summary and title names the event's VMs (its Resources), never the VM of the agent
that delivers the message (issue 34, finding 5: an event on web9 delivered by web1's agent
became the Jira issue "Redeploy of web1"; in a fleet every 3-VM issue was titled with one VM).

A fleet of three agents (web1, web2, web3) in this process, each with its own IMDS simulator,
on one PostgreSQL database, with Jira, Teams, e-mail and approval links: what the Jira fake,
the Teams fake and the SMTP fake received, and the approval page's heading.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from fakes.jira import FakeJira
from fakes.slack import FakeMessage, FakeSlack
from fakes.smtp import FakeSmtp
from fakes.teams import FakeTeams
from helpers import simulators, wait_until
from link_bridge import LinkBridge
from sebridge.model import ScheduledEvent
from sebridge.model.title import title, title_vms

pytestmark = pytest.mark.usefixtures("hermetic")

AGENTS = ("web1", "web2", "web3")
USER, PASSWORD = "bot", "titles-Password-7"
CHANNEL, SIGNING_SECRET = "C0123456789", "titles-signing-secret-0123456789abcdef"


@pytest.mark.parametrize(
    ("resources", "shown"),
    [
        ([], "no VMs listed"),
        (["web9"], "web9"),
        (["web1", "web2", "web3"], "web1, web2, web3"),
        (["web1", "web2", "web3", "web4"], "web1, web2 and 2 more"),
        ([f"web{i}" for i in range(1, 11)], "web1, web2 and 8 more"),
    ],
)
def test_a_title_names_the_events_vms_and_cuts_a_long_list(
    resources: list[str], shown: str
) -> None:
    assert title_vms(resources) == shown
    event = ScheduledEvent("E1", "Reboot", "Scheduled", tuple(resources), None)
    assert title(event) == f"Reboot of {shown}"


@pytest.fixture
def jira() -> Iterator[FakeJira]:
    with FakeJira("cloud") as fake:
        yield fake


@pytest.fixture
def smtp() -> Iterator[FakeSmtp]:
    with FakeSmtp(users={USER: PASSWORD}) as fake:
        yield fake


@pytest.fixture
def fleet(
    tmp_path: Path,
    pg_url: str,
    jira: FakeJira,
    teams: FakeTeams,
    smtp: FakeSmtp,
    slack: FakeSlack,
) -> Iterator[list[LinkBridge]]:
    """Three agents on one PostgreSQL database, each polling its own IMDS."""
    sections: dict[str, Any] = {
        "jira": {"url": jira.url, "project": "OPS", "email": jira.email, "api_token": jira.token},
        "teams": {"webhook_url": teams.workflows_url},
        "slack": {
            "bot_token": slack.bot_token,
            "signing_secret": SIGNING_SECRET,
            "channel": CHANNEL,
            "approvers": ["U0AAA"],
            "api_url": slack.url,
        },
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
    with simulators(list(AGENTS), approval_delay=3600) as sims:
        bridges: list[LinkBridge] = []
        try:
            for name, sim in zip(AGENTS, sims, strict=True):
                (tmp_path / name).mkdir()
                bridges.append(
                    LinkBridge(sim, tmp_path / name, sections, vm_name=name, store_url=pg_url)
                )
            yield bridges
        finally:
            for bridge in bridges:
                bridge.stop()


def issue_of(jira: FakeJira, event_id: str) -> dict[str, Any]:
    label = "sebridge-" + event_id.lower()
    (issue,) = wait_until(
        lambda: [i for i in jira.issues.values() if label in i["labels"]],
        15,
        message=f"the issue of {event_id}",
    )
    return issue


def subject_of(smtp: FakeSmtp, event_id: str) -> str:
    (mail,) = wait_until(
        lambda: [m for m in smtp.mails if event_id in m.part("plain")],
        15,
        message=f"the mail of {event_id}",
    )
    return str(mail.message["Subject"])


def card_of(teams: FakeTeams, event_id: str) -> dict[str, Any]:
    (card,) = wait_until(
        lambda: [c.card for c in teams.shown if event_id in json.dumps(c.card)],
        15,
        message=f"the card of {event_id}",
    )
    return card


def slack_message_of(slack: FakeSlack, event_id: str) -> FakeMessage:
    (message,) = wait_until(
        lambda: [
            m
            for m in slack.messages.values()
            if ((m.metadata or {}).get("event_payload") or {}).get("event_id") == event_id
        ],
        15,
        message=f"the Slack message of {event_id}",
    )
    return message


def test_every_title_names_the_events_vms_not_the_delivering_agents(
    fleet: list[LinkBridge], jira: FakeJira, teams: FakeTeams, smtp: FakeSmtp, slack: FakeSlack
) -> None:
    web1 = fleet[0]
    # web1's IMDS lists an event on web9 alone, which has no agent: the fleet delivers it.
    on_web9 = web1.sim.schedule("Redeploy", resources=["web9"])
    # Every agent's IMDS lists an event on all three: whichever agent delivers it.
    on_three = str(uuid.uuid4()).upper()
    for agent in fleet:
        agent.sim.schedule("Reboot", event_id=on_three, resources=list(AGENTS))

    for event_id, said in ((on_web9, "Redeploy of web9"), (on_three, "Reboot of web1, web2, web3")):
        summary = issue_of(jira, event_id)["summary"]
        assert re.fullmatch(rf"{said} not before .+ UTC \({event_id}\)", summary), summary
        subject = subject_of(smtp, event_id)
        assert re.fullmatch(rf"{said} at \d\d:\d\d UTC: approval asked", subject), subject
        card = card_of(teams, event_id)
        kind, of = said.split(" of ")
        assert card["body"][0]["text"].endswith(f"**{kind}** of {of}")
        assert card["fallbackText"] == f"{said} (event {event_id})"
        posted = slack_message_of(slack, event_id)
        assert f" {said}: " in posted.text  # the fallback text: notifications, screen readers
        header = (posted.blocks or [])[0]["text"]["text"]
        assert header.endswith(f"*{kind}* of {of}")
        # The page the card's Approve… opens, on any agent of the fleet: heading and title.
        page = web1.get(web1.local(card["actions"][0]["url"]))
        assert page.status_code == 200
        assert f"{said}</h1>" in page.text
        assert f"<title>Approve {said}? · sebridge</title>" in page.text

"""Every channel at once, routed by rule (issue 25's "done when"): the worked example of
docs/channels/index.md ("Routing: each team its channels") run as written, pointed at local stand-ins.

Two Slack instances ([slack], [slack.dba]: two channels of the fake Slack), one Teams
webhook, PagerDuty through [webhook.pagerduty] and deploy/webhook's template (received
by a receiver that verifies Standard Webhooks signatures), and [email.oncall] on a real
SMTP server (aiosmtpd, STARTTLS, a certificate made by openssl), routed by three rules.
Events of every kind come from the IMDS simulator through the daemon's tick; each
reaches exactly the instances the page's table names for its rule (what every fake got,
and the outbox rows). The mail's approval link is opened on the daemon's own HTTP
server: a scanner's GETs approve nothing, the person's POST approves once, and that
approval follows the event to its instances only.

The config and the table are read from the page, so the two cannot drift. Every test
on both dialects (conftest.py: store_url).
"""

from __future__ import annotations

import io
import re
import tomllib
import urllib.error
import urllib.request
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import requests

from fakes.slack import FakeSlack
from fakes.smtp import FakeSmtp, Received
from fakes.teams import FakeTeams
from fakes.webhook import FakeWebhook
from pages import section as section_of
from rigs.webhook import new_key
from sebridge.cli.runtime import build_runner
from sebridge.engine.daemon import Daemon
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.web.server import HttpServer

pytestmark = pytest.mark.usefixtures("no_proxy")

ROOT = Path(__file__).resolve().parent.parent
PAGE, TITLE = "channels/index.md", "Routing: each team its channels"
OPS, DBA = "C0000000OPS", "C0000000DBA"  # the page's channels
ROUTING_KEY = "R0123456789abcdef0123456789abcde"
SMTP_USER, SMTP_PASSWORD = "sebridge@example.com", "routed-Password-25"
KEY = new_key()


def readme_example() -> tuple[dict[str, Any], dict[str, set[str]]]:
    """The example's config as the page shows it, and its table: rule -> the instances."""
    section = section_of(PAGE, TITLE)
    (text,) = re.findall(r"```toml\n(.*?)```", section, re.S)
    routes = {
        rule: set(re.findall(r"`([a-z.]+)`", reaches))
        for rule, reaches in re.findall(r"^\| [^|]+ \| ([a-z ]+) \| (.+) \|$", section, re.M)
    }
    return tomllib.loads(text), routes


CONFIG, ROUTES = readme_example()


def at_the_fakes(
    data: dict[str, Any],
    sim: Simulator,
    store_url: str,
    slack: FakeSlack,
    hook: FakeWebhook,
    smtp: FakeSmtp,
) -> dict[str, Any]:
    """The page's config with only where it connects changed: every key of routing
    (the rules, notify, route_only) stays as the page shows it."""
    data = {key: dict(value) if isinstance(value, dict) else value for key, value in data.items()}
    data["imds"] = {"endpoint": sim.url, "vm_name": "vm0"}
    data["store"] = {"url": store_url}
    data["http"] = {**data["http"], "listen": "127.0.0.1:0"}
    data["slack"]["api_url"] = slack.url
    data["slack"]["dba"] = {**data["slack"]["dba"], "api_url": slack.url}
    pagerduty = data["webhook"]["pagerduty"]
    template = pagerduty["template"].replace("/etc/sebridge/", str(ROOT / "deploy/webhook") + "/")
    data["webhook"] = {"pagerduty": {**pagerduty, "url": hook.url, "template": template}}
    oncall = data["email"]["oncall"]
    data["email"] = {
        "oncall": {**oncall, "host": "127.0.0.1", "port": smtp.port, "ca_file": str(smtp.cert.cert)}
    }
    return data


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(channels={OPS: "ops", DBA: "dba"}) as fake:
        yield fake


@pytest.fixture
def hook() -> Iterator[FakeWebhook]:
    """PagerDuty's stand-in: verifies every delivery with the `standardwebhooks` verifier."""
    with FakeWebhook(keys=[KEY]) as fake:
        yield fake


@pytest.fixture
def smtp() -> Iterator[FakeSmtp]:
    with FakeSmtp(users={SMTP_USER: SMTP_PASSWORD}) as fake:
        yield fake


class Bridge:
    """The daemon built by `sebridge run`'s composition root, ticked by the test; its HTTP
    server (the approval page) serving on a free local port."""

    def __init__(self, config: dict[str, Any], environ: dict[str, str]) -> None:
        self.console = io.StringIO()
        runner = build_runner(config_from_mapping(config, environ=environ), self.console)
        self.daemon: Daemon = runner.daemon
        (self.server,) = (s for s in runner.services if isinstance(s, HttpServer))
        self.server.start()
        self.daemon.carrier.start()  # as in `sebridge run`: the page's approval is carried out
        self.http = requests.Session()
        self.http.trust_env = False

    def deliver(self) -> None:
        self.daemon.tick()
        for name in self.daemon.parts.dispatcher.sinks:
            self.daemon.parts.dispatcher.deliver_due(name)

    def local(self, url: str) -> str:
        """The mail's public link as a URL of this server (what the TLS proxy does)."""
        public = CONFIG["http"]["public_url"]
        assert url.startswith(public + "/approve/"), url
        return f"http://127.0.0.1:{self.server.port}{url[len(public) :]}"

    def close(self) -> None:
        self.http.close()
        self.server.stop()
        self.daemon.carrier.stop(5.0)
        self.daemon.parts.dispatcher.stop(0.0)
        self.daemon.imds.close()
        self.daemon.store.close()


@pytest.fixture
def bridge(
    sim: Simulator,
    store_url: str,
    slack: FakeSlack,
    teams: FakeTeams,
    hook: FakeWebhook,
    smtp: FakeSmtp,
) -> Iterator[Bridge]:
    environ = {  # what the page's ${...} name, as the service's environment would hold them
        "SLACK_BOT_TOKEN": slack.bot_token,
        "SLACK_APP_TOKEN": slack.app_token,
        "DBA_SLACK_BOT_TOKEN": slack.bot_token,  # one fake Slack serves both channels
        "DBA_SLACK_APP_TOKEN": slack.app_token,
        "TEAMS_WEBHOOK_URL": teams.workflows_url,
        "PD_WEBHOOK_SECRET": KEY,
        "PD_ROUTING_KEY": ROUTING_KEY,
        "SMTP_PASSWORD": SMTP_PASSWORD,
    }
    running = Bridge(at_the_fakes(CONFIG, sim, store_url, slack, hook, smtp), environ)
    yield running
    running.close()


def in_channel(slack: FakeSlack, channel: str) -> set[str]:
    """Every message (thread replies included) in `channel`, as one text each."""
    return {
        f"{m.text} {m.blocks} {m.metadata}" for m in slack.messages.values() if m.channel == channel
    }


def about(texts: Any, event_ids: set[str]) -> set[str]:
    """Which of `event_ids` the pieces of text (messages, cards, mails, lines) name."""
    return {e for e in event_ids for text in texts if e in str(text)}


def mails_of(smtp: FakeSmtp, event_id: str) -> list[Received]:
    return [m for m in smtp.mails if event_id in m.part("plain")]


def test_each_event_reaches_exactly_its_instances_and_the_mail_link_approves_once(
    sim: Simulator,
    bridge: Bridge,
    slack: FakeSlack,
    teams: FakeTeams,
    hook: FakeWebhook,
    smtp: FakeSmtp,
) -> None:
    daemon = bridge.daemon
    assert sorted(daemon.parts.dispatcher.sinks) == [
        "console",
        "email.oncall",
        "slack",
        "slack.dba",
        "teams",
        "webhook.pagerduty",
    ]
    by_rule = {
        "database reboots": {sim.schedule("Reboot", description="Planned db maintenance")},
        "evictions": {sim.schedule("Terminate"), sim.schedule("Preempt")},
        "everything else": {
            sim.schedule("Reboot", description="Planned web maintenance"),
            sim.schedule("Redeploy"),
            sim.schedule("Freeze", duration=5),
        },
    }
    everyone = set().union(*by_rule.values())
    assert set(by_rule) == set(ROUTES)  # the page's table has a row per rule, and no other
    bridge.deliver()

    # The outbox: one row per event and instance, exactly the instances the page's table says.
    rows = daemon.store.db.all("SELECT event_id, sink FROM outbox")
    for rule, events in by_rule.items():
        for event_id in events:
            assert {s for e, s in rows if e == event_id} == ROUTES[rule], (rule, event_id)
            record = daemon.store.events.get(event_id)
            assert record is not None and record.decision.rule == rule
    assert not daemon.store.db.all("SELECT id FROM outbox WHERE delivered_at IS NULL")

    # What each channel shows: its events, no other.
    (db,) = by_rule["database reboots"]
    evictions, rest = by_rule["evictions"], by_rule["everything else"]
    assert about(in_channel(slack, DBA), everyone) == {db}
    assert about(in_channel(slack, OPS), everyone) == evictions | rest
    assert about([shown.card for shown in teams.shown], everyone) == rest
    assert about(bridge.console.getvalue().splitlines(), everyone) == rest
    assert about([m.part("plain") for m in smtp.mails], everyone) == {db}
    # PagerDuty: one alert per eviction, deduplicated by its EventId; every delivery verified.
    assert [p.status for p in hook.posts] == [204, 204]
    assert {b["dedup_key"] for b in hook.bodies} == evictions
    assert {(b["event_action"], b["routing_key"]) for b in hook.bodies} == {
        ("trigger", ROUTING_KEY)
    }
    # A delivery replayed with its body altered is refused by the receiver's verifier.
    taken = hook.posts[0]
    tampered = taken.raw.replace(b'"trigger"', b'"resolve"', 1)
    assert tampered != taken.raw
    signed = {k: v for k, v in taken.headers.items() if k.startswith("webhook-")}
    replay = urllib.request.Request(hook.url, tampered, signed, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(replay, timeout=5)
    assert refused.value.code == 401
    assert [p.status for p in hook.posts] == [204, 204, 401] and len(hook.bodies) == 2

    # The mail, over STARTTLS, signed in, carries the approval link.
    (mail,) = smtp.mails
    assert mail.tls and mail.user == SMTP_USER and mail.recipients == ["dba-oncall@example.com"]
    assert mail.message["Subject"].startswith("Reboot of vm0 at ")
    (url,) = re.findall(r"https://\S+/approve/\S+", mail.part("plain"))
    link = bridge.local(url)
    for _ in range(3):  # Safe Links, a scanner, then the person opening the page
        page = bridge.http.get(link, timeout=10)
        assert page.status_code == 200 and 'method="post"' in page.text.lower()
    sim.refresh()
    assert sim.posts == [] and daemon.store.approvals.get(db) is None

    done = bridge.http.post(link, data={"name": "Alice"}, timeout=10)
    assert done.status_code == 200 and "Approved by Alice via approval link" in done.text
    again = bridge.http.post(link, data={"name": "Bob"}, timeout=10)
    assert again.status_code == 200
    assert "Already approved by Alice via approval link" in again.text
    assert [p.ids for p in sim.posts] == [(db,)]  # IMDS got one StartRequests, for db only

    # The approval follows its event to slack.dba and email.oncall, and nowhere else.
    shown_before = len(teams.shown), len(hook.posts), bridge.console.getvalue()
    ops_before = in_channel(slack, OPS)
    bridge.deliver()
    approved = daemon.store.db.all(
        "SELECT o.sink FROM outbox o JOIN transitions t ON t.id = o.transition_id "
        "WHERE o.event_id = ? AND t.kind = 'approved'",
        (db,),
    )
    assert {sink for (sink,) in approved} == ROUTES["database reboots"]
    assert len(approved) == len(ROUTES["database reboots"])
    assert any("Alice" in text for text in in_channel(slack, DBA))
    assert in_channel(slack, OPS) == ops_before
    assert (len(teams.shown), len(hook.posts), bridge.console.getvalue()) == shown_before
    first, reply = mails_of(smtp, db)
    assert "Approved by Alice via approval link" in reply.part("plain")
    assert reply.message["In-Reply-To"] == first.message["Message-ID"]
    assert len(smtp.mails) == 2

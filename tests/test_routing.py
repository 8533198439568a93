"""Named instances and routing, end to end on the fakes: two Slack channels ([slack] and
[slack.dba]) and two Teams webhooks ([teams] and [teams.web], route_only), routed by
three rules' `notify`. Each event reaches exactly its instances (what each fake shows),
its later transitions and reminders follow it, and each Slack instance threads its
replies under its own message (receipts per instance).

Every test on both dialects (conftest.py: store_url).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest

from fakes.slack import FakeSlack
from fakes.teams import FakeTeams
from sebridge.cli.runtime import build_daemon
from sebridge.engine.daemon import Daemon
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping
from sebridge.kernel.errors import ConfigError

pytestmark = pytest.mark.usefixtures("no_proxy")

OPS, DBA = "C0000000OPS", "C0000000DBA"
RULES: list[dict[str, Any]] = [
    {
        "name": "database reboots",
        "event_types": ["Reboot"],
        "description": "db",
        "action": "ask",
        "notify": ["slack.dba"],
        "remind_after": [60],
    },
    {
        "name": "web redeploys",
        "event_types": ["Redeploy"],
        "action": "inform",
        "notify": ["teams.web", "slack"],
    },
    {"name": "everything else", "action": "ask"},  # no notify: every instance not route_only
]


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(channels={OPS: "ops", DBA: "dba"}) as fake:
        yield fake


@pytest.fixture
def teams_ops() -> Iterator[FakeTeams]:
    with FakeTeams() as fake:
        yield fake


@pytest.fixture
def teams_web() -> Iterator[FakeTeams]:
    with FakeTeams() as fake:
        yield fake


def _slack(fake: FakeSlack, channel: str) -> dict[str, Any]:
    return {
        "bot_token": fake.bot_token,
        "app_token": fake.app_token,
        "channel": channel,
        "api_url": fake.url,
    }


@pytest.fixture
def daemon(
    sim: Simulator,
    store_url: str,
    slack: FakeSlack,
    teams_ops: FakeTeams,
    teams_web: FakeTeams,
) -> Iterator[Daemon]:
    data = {
        "imds": {"endpoint": sim.url, "vm_name": "vm0"},
        "store": {"url": store_url},
        "console": {"enabled": False},
        "policy": {"rules": RULES},
        # [slack] and [slack.dba] in one table, as TOML reads them.
        "slack": {**_slack(slack, OPS), "dba": _slack(slack, DBA)},
        "teams": {
            "webhook_url": teams_ops.workflows_url,
            "web": {"webhook_url": teams_web.workflows_url, "route_only": True},
        },
    }
    d = build_daemon(config_from_mapping(data, environ={}))
    yield d
    d.parts.dispatcher.stop(0.0)
    d.imds.close()
    d.store.close()


def deliver(d: Daemon) -> None:
    d.tick()
    for name in d.parts.dispatcher.sinks:
        d.parts.dispatcher.deliver_due(name)


def in_channel(slack: FakeSlack, channel: str, event_id: str) -> list[str]:
    """The texts of the messages (thread replies included) about `event_id` in `channel`."""
    return [
        m.text for m in slack.messages.values() if m.channel == channel and event_id in _all_text(m)
    ]


def _all_text(message: Any) -> str:
    return f"{message.text} {message.blocks} {message.metadata}"


def on_card(teams: FakeTeams, event_id: str) -> int:
    return sum(event_id in str(shown.card) for shown in teams.shown)


def test_each_event_reaches_exactly_the_instances_its_rule_names(
    sim: Simulator,
    daemon: Daemon,
    slack: FakeSlack,
    teams_ops: FakeTeams,
    teams_web: FakeTeams,
) -> None:
    assert list(daemon.parts.dispatcher.sinks) == ["slack", "slack.dba", "teams", "teams.web"]
    db = sim.schedule("Reboot", description="db maintenance")
    web = sim.schedule("Redeploy")
    other = sim.schedule("Freeze", duration=5)
    deliver(daemon)

    assert in_channel(slack, DBA, db) and not in_channel(slack, OPS, db)
    assert on_card(teams_ops, db) == 0 and on_card(teams_web, db) == 0

    assert in_channel(slack, OPS, web) and not in_channel(slack, DBA, web)
    assert on_card(teams_web, web) == 1 and on_card(teams_ops, web) == 0

    # No notify: every instance but the route_only teams.web.
    assert in_channel(slack, OPS, other) and in_channel(slack, DBA, other)
    assert on_card(teams_ops, other) == 1 and on_card(teams_web, other) == 0

    # What the store queued says the same, per instance.
    rows = daemon.store.db.all("SELECT event_id, sink FROM outbox ORDER BY id")
    assert {(e, s) for e, s in rows if e == db} == {(db, "slack.dba")}
    assert {(e, s) for e, s in rows if e == web} == {(web, "slack"), (web, "teams.web")}
    assert {s for e, s in rows if e == other} == {"slack", "slack.dba", "teams"}
    record = daemon.store.events.get(db)
    assert record is not None and record.decision.notify == ("slack.dba",)


def test_later_transitions_and_reminders_follow_the_event_and_thread_per_instance(
    sim: Simulator,
    daemon: Daemon,
    slack: FakeSlack,
    teams_ops: FakeTeams,
    teams_web: FakeTeams,
) -> None:
    db = sim.schedule("Reboot", description="db maintenance")
    other = sim.schedule("Freeze", duration=5)
    deliver(daemon)
    posted = {(m.channel, m.ts) for m in slack.messages.values() if m.thread_ts is None}
    assert len(posted) == 3  # db in dba; other in ops and in dba

    # A person takes each event ("I'm on it"): a note, routed as its event is.
    assert daemon.approvals.take(db, "alice", "cli")
    assert daemon.approvals.take(other, "bob", "cli")
    deliver(daemon)
    # Each instance's message of each event has its own reply, in its own thread.
    threads = {
        (m.channel, _event_of(m, (db, other))): slack.replies(m.channel, m.ts)
        for m in slack.messages.values()
        if m.thread_ts is None
    }
    assert set(threads) == {(DBA, db), (DBA, other), (OPS, other)}
    for (channel, event_id), replies in threads.items():
        assert len(replies) == 1, (channel, event_id)
        assert replies[0].channel == channel and _event_of(replies[0], (db, other)) == event_id
    receipts = daemon.store.db.all(
        "SELECT sink, external_id FROM receipts WHERE event_id = ? ORDER BY sink", (other,)
    )
    assert [sink for sink, _ in receipts] == ["slack", "slack.dba"]  # Teams keeps none
    slack_ts = dict(receipts)
    assert slack_ts["slack"] != slack_ts["slack.dba"]  # each instance its own message

    # A reminder of the routed event goes where the event went, and nowhere else.
    before = {k: on_card(t, db) for k, t in (("ops", teams_ops), ("web", teams_web))}
    assert daemon.parts.reminders.record_due(daemon.clock() + timedelta(minutes=2)) == 1
    for name in daemon.parts.dispatcher.sinks:
        daemon.parts.dispatcher.deliver_due(name)
    rows = daemon.store.db.all(
        "SELECT o.sink FROM outbox o JOIN transitions t ON t.id = o.transition_id "
        "WHERE o.event_id = ? AND t.kind = 'reminder'",
        (db,),
    )
    assert [sink for (sink,) in rows] == ["slack.dba"]
    assert before == {k: on_card(t, db) for k, t in (("ops", teams_ops), ("web", teams_web))}


def _event_of(message: Any, events: tuple[str, ...]) -> str:
    (found,) = [e for e in events if e in _all_text(message)]
    return found


def test_a_rule_naming_an_instance_not_configured_is_a_config_error() -> None:
    rules = [{"action": "ask", "notify": ["slack.dba"]}]
    with pytest.raises(ConfigError) as raised:
        config_from_mapping({"policy": {"rules": rules}}, environ={})
    assert 'policy.rules[1].notify: "slack.dba" is not configured: no [slack.dba] section' in str(
        raised.value
    )

"""What IMDS may throw at the daemon: hostile text in an event, odd or unfollowable events,
a document far over the size cap. The daemon records what it can read, says once what was
odd, refuses what is too big with one log line, and keeps polling; every sink delivers."""

from __future__ import annotations

import io
import json
import logging
from pathlib import Path
from typing import Any

import pytest

from fakes.imds_fixture import FixtureImds
from rigs.jira import JiraRig
from rigs.slack import SlackRig
from rigs.teams import TeamsRig
from sebridge.cli.runtime import build_daemon
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.client import MAX_DOCUMENT
from sebridge.imds.parse import parse_not_before
from sebridge.imds.simulator import Simulator
from sebridge.imds.unreadable import stand_in_id
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.kernel.errors import MalformedDocumentError
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest

HOSTILE = "Host\ud800 update\x1b[2J\x07\x00 \u202eexe.txt\nINFO forged line"


def daemon_for(
    tmp_path: Path,
    endpoint: str,
    console: io.StringIO,
    store_url: str | None = None,
    sections: dict[str, Any] | None = None,
    vm: str = "vm0",
) -> Daemon:
    config = from_mapping(
        {
            "imds": {"endpoint": endpoint, "vm_name": vm},
            "store": {"url": store_url or f"sqlite:///{tmp_path / 'state.db'}"},
            "jsonl": {"path": str(tmp_path / "events.jsonl")},
            **(sections or {}),
        },
        environ={},
    )
    return build_daemon(config, stdout=console)


def deliver(daemon: Daemon) -> None:
    for sink in ("console", "jsonl"):
        daemon.parts.dispatcher.deliver_due(sink)


def test_hostile_text_is_delivered_to_every_sink_once(tmp_path: Path, sim: Simulator) -> None:
    console = io.StringIO()
    daemon = daemon_for(tmp_path, sim.url, console)
    try:
        event_id = sim.schedule("Reboot", description=HOSTILE, resources=["vm0", "\u202evm1"])
        assert daemon.tick().transitions
        deliver(daemon)
        rows = daemon.store.db.all("SELECT sink, state, attempts FROM outbox")
    finally:
        daemon.imds.close()
        daemon.store.close()
    assert sorted(rows) == [("console", "delivered", 1), ("jsonl", "delivered", 1)]
    (line,) = console.getvalue().splitlines()
    assert event_id in line
    assert "Host\\ud800 update\\x1b[2J\\x07\\x00 \\u202eexe.txt\\nINFO forged line" in line
    (written,) = (tmp_path / "events.jsonl").read_bytes().splitlines()
    assert json.loads(written)["description"] == HOSTILE  # as IMDS sent it, surrogate and all


def test_an_id_that_cannot_be_stored_stops_only_its_own_event(
    tmp_path: Path, sim: Simulator, store_url: str, caplog: pytest.LogCaptureFixture
) -> None:
    """A lone surrogate cannot be encoded for SQLite, a NUL cannot be in PostgreSQL text: such
    an EventId is not followed (said once; announced on a stand-in, below); the same in
    EventType is read as U+FFFD (said once)."""
    caplog.set_level(logging.WARNING, logger="sebridge")
    sim.schedule("Reboot", event_id="SURR\ud800ID")
    sim.schedule("Reboot", event_id="ID\x00NUL")
    odd_type = sim.schedule("Reb\ud800oot", description="Said \x00 and \udc80 as sent")
    normal = sim.schedule("Freeze")
    stand_ins = [stand_in_id("SURR\ud800ID"), stand_in_id("ID\x00NUL")]
    console = io.StringIO()
    daemon = daemon_for(tmp_path, sim.url, console, store_url)
    try:
        for _ in range(3):  # the same document again: nothing said again
            assert daemon.tick().error is None
        deliver(daemon)
        events = {r.event.event_id: r.event for r in daemon.store.events.current()}
        rows = daemon.store.db.all("SELECT event_id, sink, state FROM outbox")
    finally:
        daemon.imds.close()
        daemon.store.close()
    assert sorted(events) == sorted([odd_type, normal])  # a stand-in is never a present event
    assert events[odd_type].event_type == "Reb\ufffdoot"
    assert events[odd_type].description == "Said \x00 and \udc80 as sent"  # kept as sent
    assert sorted(rows) == sorted(
        (event_id, sink, "delivered")
        for event_id in (odd_type, normal, *stand_ins)
        for sink in ("console", "jsonl")
    )
    assert normal in console.getvalue()
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("IMDS document")]
    assert len(said) == 3, said
    for raw, stand_in in zip(('"SURR\\ud800ID"', '"ID\\u0000NUL"'), stand_ins, strict=True):
        assert sum(f"EventId str {raw}" in s and f"announced as {stand_in}" in s for s in said) == 1
    assert sum(f"event {odd_type} has EventType" in s for s in said) == 1


UNREADABLE_ID = "5D1A3C55\x00-4000-8000-\udc80"


def test_an_unreadable_event_is_announced_once_to_every_sink(
    tmp_path: Path, sim: Simulator, store_url: str
) -> None:
    """IMDS lists an event whose EventId holds NUL and a lone surrogate: every sink is told
    once, as a problem on its stand-in (its type and NotBefore as read), across ticks and a
    restart; nothing offers to approve it, and no approval of it is taken."""
    sim.schedule("Reboot", event_id=UNREADABLE_ID, notice=900)
    stand_in = stand_in_id(UNREADABLE_ID)
    not_before = sim.document()["Events"][0]["NotBefore"]
    with SlackRig() as slack, TeamsRig() as teams, JiraRig() as jira:
        sections = {rig.name: rig.section() for rig in (slack, teams, jira)}
        console = io.StringIO()
        for _ in range(2):  # the daemon, then the daemon restarted on the same store
            daemon = daemon_for(tmp_path, sim.url, console, store_url, sections)
            try:
                for _ in range(2):
                    assert daemon.tick().error is None
                    for sink in ("console", "jsonl", "slack", "teams", "jira"):
                        daemon.parts.dispatcher.deliver_due(sink)
                refused = daemon.approvals.request(ApprovalRequest(stand_in, "U1", "cli"))
                assert refused.kind == OutcomeKind.REFUSED
            finally:
                daemon.imds.close()
                daemon.store.close()
        (line,) = console.getvalue().splitlines()
        (written,) = (tmp_path / "events.jsonl").read_text().splitlines()
        assert len(slack.fake.messages) == 1
        assert len(teams.fake.posts) == 1
        assert len(jira.fake.issues) == 1
        slack_text = json.dumps(next(iter(slack.fake.messages.values())).as_dict())
        teams_text = json.dumps(teams.fake.posts[0].body)
        (issue,) = jira.fake.issues.values()
    when = parse_not_before(not_before)
    assert when is not None
    note = (
        'IMDS lists an event sebridge cannot read (its EventId "5D1A3C55\\u0000-4000-8000-'
        '\\udc80" holds NUL and a lone surrogate); it starts at NotBefore, '
        f"{when:%Y-%m-%d %H:%M:%S} UTC, without an approval"
    )
    assert "PROBLEM" in line and "Reboot" in line and stand_in in line
    assert line.endswith(note)
    data = json.loads(written)
    assert (data["transition"], data["event_id"], data["note"]) == ("problem", stand_in, note)
    assert data["event_type"] == "Reboot" and data["not_before"] == when.isoformat()
    assert data["policy"] == "inform" and "approve_url" not in data
    for text in (slack_text, teams_text, json.dumps(issue)):
        assert "sebridge cannot read" in text and stand_in in text
    assert "approve" not in slack_text.lower().replace("without an approval", "")
    assert sim.start_requests == []


def test_a_fleet_announces_an_unreadable_event_once(
    tmp_path: Path, sim: Simulator, pg_url: str
) -> None:
    """Two agents on one PostgreSQL store see the same unreadable event: one problem."""
    sim.schedule("Reboot", event_id=UNREADABLE_ID)
    agents = [
        daemon_for(tmp_path / vm, sim.url, io.StringIO(), pg_url, vm=vm) for vm in ("vm0", "vm1")
    ]
    try:
        for daemon in agents * 2:
            assert daemon.tick().error is None
        rows = agents[0].store.db.all("SELECT event_id, kind FROM transitions")
    finally:
        for daemon in agents:
            daemon.imds.close()
            daemon.store.close()
    assert rows == [(stand_in_id(UNREADABLE_ID), "problem")]


def test_odd_events_are_read_and_said_once(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    odd = {
        "DocumentIncarnation": 1,
        "Events": [
            {"EventId": 42, "EventType": "Reboot", "EventStatus": "Scheduled", "Resources": "vm0"},
            {"EventId": "B", "EventType": "Freeze", "EventStatus": "Scheduled", "Resources": [7]},
            "not an event",
        ],
    }
    caplog.set_level(logging.WARNING, logger="sebridge")
    with FixtureImds(odd) as imds:
        daemon = daemon_for(tmp_path, imds.url, io.StringIO())
        try:
            for _ in range(3):  # the same document again: nothing said again
                daemon.tick()
            ids = {r.event.event_id: r.event.resources for r in daemon.store.events.current()}
        finally:
            daemon.imds.close()
            daemon.store.close()
    assert ids == {"42": ("vm0",), "B": ("7",)}
    said = [r.getMessage() for r in caplog.records if r.getMessage().startswith("IMDS document")]
    assert len(said) == 4, said
    assert any("EventId int 42, expected text: read as text" in s for s in said)
    assert any('Resources str "vm0", expected a list: read as one name' in s for s in said)
    assert any('Events[2] is str "not an event", not an object: skipped' in s for s in said)


def test_a_document_over_the_cap_is_refused_and_polling_goes_on(
    tmp_path: Path, sim: Simulator, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.INFO, logger="sebridge")
    event_id = sim.schedule("Reboot")
    sim.inject("oversized", count=3, size=10 * MAX_DOCUMENT)
    daemon = daemon_for(tmp_path, sim.url, io.StringIO())
    try:
        results = [daemon.tick() for _ in range(4)]
    finally:
        daemon.imds.close()
        daemon.store.close()
    assert [r.polled for r in results] == [False, False, False, True]
    cap = f"over the {MAX_DOCUMENT:,}-byte cap"
    assert cap in (results[0].error or "")
    assert [t.event_id for t in results[3].transitions] == [event_id]
    refused = [r for r in caplog.records if cap in r.getMessage()]
    assert len(refused) == 1  # one line for the outage, not one per poll
    assert any(r.getMessage() == "IMDS answers again" for r in caplog.records)


@pytest.mark.parametrize("size", [MAX_DOCUMENT, MAX_DOCUMENT + 1])
def test_the_cap_is_a_size_in_bytes(sim: Simulator, size: int) -> None:
    sim.inject("oversized", size=size)
    client = ImdsClient(sim.url, timeout=5.0)
    try:
        if size > MAX_DOCUMENT:
            with pytest.raises(MalformedDocumentError, match="refused unread"):
                client.get_document()
        else:
            assert client.get_document().events == ()
        assert client.get_document().events == ()  # and the next poll is served
    finally:
        client.close()

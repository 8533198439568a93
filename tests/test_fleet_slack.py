"""Fleet mode with Slack: three `sebridge run` agents on one PostgreSQL database, each with its
own IMDS simulator, one fake Slack app (Socket Mode) with `socket_connections = 1`.

One Slack message per event across the fleet; a click reaches the one agent holding the
Socket Mode connection, which may not see the event: an agent whose IMDS lists it POSTs the
StartRequests, once in all; kill -9 of the connection's holder: another agent connects and
clicks work again; kill -9 of an agent in the middle of posting a message: another agent
finishes the delivery, and the channel still shows one message.

Real processes, the fake Slack of tests/fakes on sockets, a database of this module's own.
"""

from __future__ import annotations

import signal
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import pg
from fakes.slack import FakeMessage, FakeSlack
from helpers import DaemonProcess, event_gets, toml_str, wait_until, write_config
from sebridge.imds.simulator import Simulator

# fleets of real `sebridge run` processes (pg too, given by conftest.py)
pytestmark = [pytest.mark.slow, pytest.mark.usefixtures("no_proxy")]

OPS = "C0123456789"
AGENTS = 3  # the fleet: conftest.py starts a simulator for each (`sims`)


@pytest.fixture
def agents(
    tmp_path: Path, sims: list[Simulator], slack: FakeSlack, pg_database: str
) -> Iterator[list[DaemonProcess]]:
    url = pg.reset(pg_database)
    started = []
    for i, sim in enumerate(sims):
        section = (
            f"[slack]\nbot_token = {toml_str(slack.bot_token)}\n"
            f"app_token = {toml_str(slack.app_token)}\nchannel = {toml_str(OPS)}\n"
            f'approvers = ["U0AAA"]\napi_url = {toml_str(slack.url)}\nsocket_connections = 1\n'
        )
        config = write_config(
            tmp_path / f"vm{i}.toml",
            endpoint=sim.url,
            store_url=url,
            vm_name=f"vm{i}",
            extra=section,
        )
        before = event_gets(sim)
        agent = DaemonProcess(config, tmp_path / f"vm{i}.log")
        started.append(agent)
        wait_until(lambda s=sim, b=before: event_gets(s) > b, 20, message=f"vm{i}'s first poll")
    yield started
    for agent in started:
        agent.kill()
    for agent in started:
        print(f"--- {agent.log.name} ---\n{agent.log_text()}")


def parents(slack: FakeSlack, event_id: str) -> list[FakeMessage]:
    return [
        m
        for m in slack.messages.values()
        if ((m.metadata or {}).get("event_payload") or {}).get("event_id") == event_id
    ]


def socket_holder(agents: list[DaemonProcess]) -> int:
    """The index of the one live agent whose log says it took the Socket Mode duty."""
    (index,) = [
        i
        for i, a in enumerate(agents)
        if a.alive() and "took the slack.socket duty" in a.log_text()
    ]
    return index


def click_approve(slack: FakeSlack, event_id: str) -> None:
    (message,) = wait_until(lambda: parents(slack, event_id), message=f"the message of {event_id}")
    payload = slack.block_actions_payload(
        "approve", value=event_id, user_id="U0AAA", channel=OPS, message_ts=message.ts
    )
    envelope_id = slack.send_envelope(payload, wait=10)
    assert slack.wait_ack(envelope_id, timeout=10) == {"envelope_id": envelope_id}


def test_one_message_a_click_anywhere_one_post_and_the_connection_survives_kill_9(
    agents: list[DaemonProcess], sims: list[Simulator], slack: FakeSlack
) -> None:
    assert slack.wait_connected(timeout=20)
    holder = wait_until(lambda: [socket_holder(agents)], message="the socket holder")[0]
    assert slack.socket_connections == 1
    for round_ in range(2):
        # The event is listed only by a live agent that does not hold the connection.
        seer = next(i for i, a in enumerate(agents) if i != holder and a.alive())
        event_id = str(uuid.uuid4()).upper()
        sims[seer].schedule("Reboot", event_id=event_id, resources=[f"vm{seer}"])
        click_approve(slack, event_id)
        wait_until(
            lambda s=sims[seer], e=event_id: e in s.start_requests,
            20,
            message="the seeing agent's StartRequests",
        )
        # One POST in all, by the agent whose IMDS lists the event.
        assert [s.start_requests.count(event_id) for s in sims] == [
            1 if i == seer else 0 for i in range(AGENTS)
        ]
        assert len(parents(slack, event_id)) == 1
        if round_ == 0:
            agents[holder].signal(signal.SIGKILL)
            agents[holder].wait(10)
            holder = wait_until(
                lambda: [
                    i
                    for i, a in enumerate(agents)
                    if a.alive() and "took the slack.socket duty" in a.log_text()
                ],
                30,
                message="another agent to connect",
            )[0]
            assert slack.wait_connected(timeout=20)
    assert slack.socket_connections == 1


def test_an_agent_killed_mid_post_leaves_one_message_and_another_agent_finishes_the_delivery(
    agents: list[DaemonProcess], sims: list[Simulator], slack: FakeSlack, pg_database: str
) -> None:
    answer = slack.hold_next("chat.postMessage")
    event_id = str(uuid.uuid4()).upper()
    for sim in sims:
        sim.schedule("Reboot", event_id=event_id, resources=[f"vm{i}" for i in range(AGENTS)])
    (message,) = wait_until(lambda: parents(slack, event_id), message="the message")
    # Slack has it; its sender, the agent whose claim on the row is begun, waits for the answer.
    row = f"FROM outbox WHERE sink = 'slack' AND event_id = '{event_id}'"
    (claimant,) = wait_until(lambda: pg.query(pg_database, f"SELECT claimed_by {row}"))[0]
    sender = agents[int(str(claimant).removeprefix("vm"))]
    sender.signal(signal.SIGKILL)
    sender.wait(10)
    answer.set()
    # A live agent learns of the death at its next heartbeat (30 s at most), takes the row
    # over, finds the message by its metadata, and keeps it as the event's message.
    wait_until(
        lambda: pg.query(pg_database, f"SELECT state, begun {row}") == [("delivered", 2)],
        45,
        message="another agent to finish the delivery",
    )
    assert len(parents(slack, event_id)) == 1
    for sim in sims:
        sim.complete(event_id)
    wait_until(lambda: slack.replies(OPS, message.ts), 20, message="the reply under the message")
    assert len(parents(slack, event_id)) == 1

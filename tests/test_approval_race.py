"""Two channels approve one event at the same moment: one StartRequests, two truthful answers.

The daemons run in this process against the IMDS simulator over real sockets, with their
carriers on their own threads as `sebridge run` has them. On SQLite one daemon gets both
requests (a Slack click and a link POST, on two threads); on PostgreSQL two agents whose
IMDS both list the event get one each, as when a click reaches one agent and a link
another. Whoever loses hears who won, when, and that IMDS took it: never "not sent yet"
for an approval that succeeded.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from contextlib import ExitStack

import pytest

from sebridge.cli.assembly import compose_daemon
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.model.approval import OutcomeKind
from sebridge.model.approval_request import ApprovalRequest, Outcome
from sebridge.store import Store

ROUNDS = 8


def _daemon(sim: Simulator, url: str, agent: str) -> Daemon:
    store = Store(url, agent=agent, exclusive=True)
    daemon = compose_daemon(ImdsClient(sim.url, timeout=5.0), store, {}, vm_name=agent)
    daemon.carrier.start()
    daemon.watch_store()  # PostgreSQL: another agent's approval is heard at once
    return daemon


@pytest.fixture
def daemons(sim: Simulator, store_url: str) -> Iterator[list[Daemon]]:
    """One daemon on SQLite (one per file); two agents on PostgreSQL."""
    agents = ["vm0"] if store_url.startswith("sqlite") else ["vm0", "vm1"]
    with ExitStack() as stack:
        running = []
        for agent in agents:
            daemon = _daemon(sim, store_url, agent)
            stack.callback(daemon.imds.close)
            stack.callback(daemon.store.close)
            stack.callback(daemon.carrier.stop, 5.0)
            running.append(daemon)
        yield running


def _race(daemons: list[Daemon], event_id: str) -> list[Outcome]:
    """A Slack click and a link POST for one event, let go at the same instant."""
    requests = [
        ApprovalRequest(event_id, "U0ALICE", "slack"),
        ApprovalRequest(event_id, "approval link (Bob)", "link"),
    ]
    start = threading.Barrier(len(requests))
    outcomes: list[Outcome] = []

    def ask(daemon: Daemon, request: ApprovalRequest) -> None:
        start.wait()
        outcomes.append(daemon.approvals.request(request))

    threads = [
        threading.Thread(target=ask, args=(daemons[i % len(daemons)], request))
        for i, request in enumerate(requests)
    ]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert len(outcomes) == 2
    return outcomes


def test_two_channels_at_once_give_one_start_request_and_two_truthful_answers(
    sim: Simulator, daemons: list[Daemon]
) -> None:
    for _ in range(ROUNDS):
        event_id = sim.schedule("Reboot", resources=["vm0", "vm1"])
        for daemon in daemons:
            daemon.tick()  # every agent's IMDS lists it
        first, second = sorted(_race(daemons, event_id), key=lambda o: o.kind)
        assert (first.kind, second.kind) == (OutcomeKind.ALREADY, OutcomeKind.APPROVED)
        winner, loser = second.approval, first.approval
        assert winner is not None and loser is not None
        # The winner's answer says IMDS took it; the loser's names the winner and the same.
        assert winner.state == "posted" and second.reason == "StartRequests sent to Azure"
        assert (loser.actor, loser.at, loser.state) == (winner.actor, winner.at, "posted")
        assert first.reason == "StartRequests sent to Azure"
        assert event_id in sim.start_requests  # "posted" is recorded after IMDS answered
    # Each event once, however the two requests met.
    assert sorted(sim.start_requests) == sorted(set(sim.start_requests))
    assert len(sim.start_requests) == ROUNDS

"""Fleet mode: several `sebridge run` agents (one per "VM": its own imds.vm_name and its own
IMDS simulator serving the same events under the same EventIds) on one PostgreSQL database.

One JSON line per transition across the fleet, and a second daemon of one agent's name (`run`
or `once`) refused; an
approval recorded where the event is not listed is carried out by an agent whose IMDS lists
it, with one StartRequests POST in all; kill -9 of a duty's holder: another takes it over;
the database unreachable: polling goes on, /healthz says so, what IMDS still lists is recorded
when it answers again.

Real processes, simulators, JSON lines in tmp_path, a database of this module's own
(tests/pg.py).
"""

from __future__ import annotations

import json
import signal
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pg
from helpers import (
    DaemonProcess,
    event_gets,
    free_port,
    lines_of,
    run_cli,
    wait_line,
    wait_until,
    write_config,
)
from sebridge.imds.simulator import Simulator

# fleets of real `sebridge run` processes (pg too, given by conftest.py)
pytestmark = pytest.mark.slow

AGENTS = 3  # the fleet: conftest.py starts a simulator for each (`sims`)
START_TIMEOUT = 20.0


class Fleet:
    """The agents, their configs and JSON-lines files."""

    def __init__(self, tmp_path: Path, sims: list[Simulator], url: str) -> None:
        self.tmp_path, self.sims = tmp_path, sims
        self.configs = [
            write_config(
                tmp_path / f"vm{i}.toml",
                endpoint=sim.url,
                store_url=url,
                vm_name=f"vm{i}",
                jsonl=tmp_path / f"vm{i}.jsonl",
            )
            for i, sim in enumerate(sims)
        ]
        self.agents: list[DaemonProcess] = []

    def start(self) -> None:
        for i, config in enumerate(self.configs):
            before = event_gets(self.sims[i])
            agent = DaemonProcess(config, self.tmp_path / f"vm{i}.log")
            self.agents.append(agent)
            wait_until(
                lambda s=self.sims[i], b=before, a=agent: event_gets(s) > b or not a.alive(),
                START_TIMEOUT,
                message=f"vm{i}'s first IMDS GET",
            )
            assert agent.alive(), agent.log_text()

    def lines(self, event_id: str, kind: str | None = None) -> list[dict[str, object]]:
        found = []
        for i in range(len(self.configs)):
            found += lines_of(self.tmp_path / f"vm{i}.jsonl", event_id, kind)
        return found

    def wait_line(self, event_id: str, kind: str) -> None:
        wait_until(lambda: self.lines(event_id, kind), message=f"a {kind} line for {event_id}")

    def stop(self) -> None:
        for agent in self.agents:
            agent.kill()
        for agent in self.agents:
            print(f"--- {agent.log.name} ---\n{agent.log_text()}")


@pytest.fixture
def fleet(tmp_path: Path, sims: list[Simulator], pg_url: str) -> Iterator[Fleet]:
    f = Fleet(tmp_path, sims, pg_url)
    yield f
    f.stop()


def test_each_transition_is_one_line_across_the_fleet_and_once_beside_it_adds_none(
    fleet: Fleet, sims: list[Simulator]
) -> None:
    fleet.start()
    event_id = str(uuid.uuid4()).upper()
    for sim in sims:
        sim.schedule("Reboot", event_id=event_id, resources=["vm0", "vm1", "vm2"])
    fleet.wait_line(event_id, "scheduled")
    # Every agent saw it (its sighting), yet the transition was recorded and delivered once.
    wait_until(
        lambda: (
            len(
                pg.query(
                    fleet_url(fleet),
                    f"SELECT 1 FROM sightings WHERE event_id = '{event_id}' AND present = 1",
                )
            )
            == AGENTS
        ),
        message="every agent's sighting",
    )
    # A second daemon of vm0's name (`run` or `once` with its config) would share its
    # sightings: refused, naming the first, as a second daemon on a SQLite file is.
    for command in ("once", "run"):
        second = run_cli(command, "--config", str(fleet.configs[0]), timeout=30)
        assert second.returncode == 1, second.stderr
        assert "another sebridge daemon named 'vm0' is running on the store" in second.stderr
        assert "give each VM's agent its own imds.vm_name" in second.stderr
    for sim in sims:
        sim.complete(event_id)
    fleet.wait_line(event_id, "cancelled")
    # Settle: every agent has recorded the event gone before counting.
    wait_until(
        lambda: not pg.query(fleet_url(fleet), "SELECT 1 FROM sightings WHERE present = 1"),
        message="every agent to lose sight of it",
    )
    # One line each (written by whichever agent claimed the row, so maybe in two files).
    assert sorted(str(r["transition"]) for r in fleet.lines(event_id)) == ["cancelled", "scheduled"]
    assert all(a.alive() for a in fleet.agents)
    # The logs say it once too: where it was recorded, not by every agent that saw it.
    said = "".join(a.log_text() for a in fleet.agents)
    assert said.count(f"scheduled Reboot {event_id}") == 1, said


def fleet_url(fleet: Fleet) -> str:
    text = fleet.configs[0].read_text(encoding="utf-8")
    return text.split('url = "', 1)[1].split('"', 1)[0]


def test_an_approval_where_the_event_is_not_listed_is_posted_once_by_an_agent_that_lists_it(
    fleet: Fleet, sims: list[Simulator]
) -> None:
    fleet.start()
    event_id = str(uuid.uuid4()).upper()
    # vm0's IMDS does not list the event (another placement group); vm1 and vm2's do.
    for sim in sims[1:]:
        sim.schedule("Reboot", event_id=event_id, resources=["vm1", "vm2"])
    fleet.wait_line(event_id, "scheduled")
    approved = run_cli("approve", event_id, "--as", "alice", "--config", str(fleet.configs[0]))
    assert approved.returncode == 0, approved.stderr
    # The CLI waits for what the agent that carried it out recorded, and says it.
    assert f"approved {event_id} as alice: StartRequests sent to Azure" in approved.stdout
    fleet.wait_line(event_id, "approved")
    posts = [sim.start_requests for sim in sims]
    assert posts[0] == [] and sorted(posts[1] + posts[2]) == [event_id]
    assert [r["actor"] for r in fleet.lines(event_id, "approved")] == ["alice"]
    assert pg.query(fleet_url(fleet), "SELECT actor, state FROM approvals") == [("alice", "posted")]


def test_kill_9_of_the_prune_duty_holder_hands_the_duty_to_another_agent(fleet: Fleet) -> None:
    fleet.start()

    def holders() -> list[DaemonProcess]:
        return [a for a in fleet.agents if a.alive() and "took the prune duty" in a.log_text()]

    wait_until(lambda: len(holders()) == 1, message="one agent to take the prune duty")
    (first,) = holders()
    first.signal(signal.SIGKILL)
    first.wait(10)
    wait_until(lambda: len(holders()) == 1, message="another agent to take it over")
    assert holders()[0] is not first
    # The survivors still deliver: the fleet goes on.
    event_id = fleet.sims[0].schedule("Reboot")
    for sim in fleet.sims[1:]:
        sim.schedule("Reboot", event_id=event_id, resources=["vm0"])
    fleet.wait_line(event_id, "scheduled")


def healthz(port: int) -> tuple[int, dict[str, Any]]:
    try:
        with urllib.request.urlopen(f"http://127.0.0.1:{port}/healthz", timeout=5) as answer:
            return answer.status, json.loads(answer.read())
    except urllib.error.HTTPError as failing:
        return failing.code, json.loads(failing.read())


def test_while_the_database_is_unreachable_polling_goes_on_and_what_it_saw_is_recorded_after(
    tmp_path: Path, sims: list[Simulator], pg_url: str
) -> None:
    relay = pg.Relay()
    sim, port = sims[0], free_port()
    config = write_config(
        tmp_path / "vm0.toml",
        endpoint=sim.url,
        store_url=relay.url(pg_url),
        vm_name="vm0",
        jsonl=tmp_path / "vm0.jsonl",
        extra=f'[http]\nlisten = "127.0.0.1:{port}"\n',
    )
    agent = DaemonProcess(config, tmp_path / "vm0.log")
    try:
        before = sim.schedule("Reboot")
        wait_line(tmp_path / "vm0.jsonl", before, "scheduled")
        assert wait_until(lambda: healthz(port)[0] == 200, message="healthy")
        relay.cut()
        during = sim.schedule("Redeploy")
        _, body = wait_until(
            lambda: (h := healthz(port))[0] == 503 and h, message="/healthz to say the store fails"
        )
        assert body["store"]["writable"] is False and "error" in body["store"]
        assert body["imds"]["reachable"] is True  # IMDS polling goes on
        polls = event_gets(sim)
        wait_until(lambda: event_gets(sim) > polls + 5, message="polls during the outage")
        assert lines_of(tmp_path / "vm0.jsonl", during) == []
        relay.restore()
        # Still listed when the store answers again: announced late, not lost.
        wait_line(tmp_path / "vm0.jsonl", during, "scheduled")
        wait_until(lambda: healthz(port)[0] == 200, message="healthy again")
        log = agent.log_text()
        assert log.count("the store does not answer") == 1, log
        assert "the store answers again" in log
    finally:
        agent.kill()
        relay.close()
        print(agent.log_text())

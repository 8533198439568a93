"""Host-local sinks in a fleet: an agent killed right after it wrote a JSON line, before it
recorded the line as delivered. Another agent takes the delivery over and writes the line
to its own file, marked `"maybe_repeat": true`: no unmarked duplicate anywhere
(docs/ARCHITECTURE.md, "Guarantees").

Two real `sebridge run` agents (vm0, vm1: each its own IMDS simulator serving the same
events, its own JSON lines file) on one PostgreSQL database, each through a relay that
slows its round trips, so the moment between a line's write and its ack is wide enough to
stop the writer in (SIGSTOP), confirm in the database that the row is still pending, and
kill it (SIGKILL). A stop that comes too late (the row already delivered) resumes the agent
and tries the next event.
"""

from __future__ import annotations

import signal
import time
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

import pg
from helpers import (
    DaemonProcess,
    event_gets,
    lines_of,
    read_jsonl,
    wait_polls,
    wait_until,
    write_config,
)
from sebridge.imds.simulator import Simulator
from sebridge.store.store import HEARTBEAT

pytestmark = pytest.mark.slow

AGENTS = 2  # the fleet: conftest.py starts a simulator for each (`sims`)
TRIES = 8


@pytest.fixture
def relays() -> Iterator[list[pg.Relay]]:
    made = [pg.Relay(delay=0.02) for _ in range(AGENTS)]
    yield made
    for relay in made:
        relay.close()


def pending(url: str, event_id: str) -> bool:
    """Whether the event's scheduled line is still owed to the JSON lines sink."""
    rows = pg.query(
        url,
        "SELECT o.state FROM outbox o JOIN transitions t ON t.id = o.transition_id "
        f"WHERE o.sink = 'jsonl' AND t.kind = 'scheduled' AND o.event_id = '{event_id}'",
    )
    return bool(rows) and rows[0][0] == "pending"


def test_a_line_written_by_an_agent_killed_before_its_ack_is_repeated_only_marked(
    tmp_path: Path, sims: list[Simulator], relays: list[pg.Relay], pg_url: str
) -> None:
    files = [tmp_path / f"vm{i}.jsonl" for i in range(AGENTS)]
    agents = []
    for i in range(AGENTS):
        config = write_config(
            tmp_path / f"vm{i}.toml",
            endpoint=sims[i].url,
            store_url=relays[i].url(pg_url),
            vm_name=f"vm{i}",
            jsonl=files[i],
        )
        before = event_gets(sims[i])
        agents.append(DaemonProcess(config, tmp_path / f"vm{i}.log"))
        wait_until(lambda s=sims[i], b=before: event_gets(s) > b, 20, message=f"vm{i} polls")
    try:
        victim = killed = None
        for _ in range(TRIES):
            event_id = str(uuid.uuid4()).upper()
            for sim in sims:
                sim.schedule("Reboot", resources=["vm0", "vm1"], event_id=event_id)
            deadline = time.monotonic() + 20
            while victim is None and time.monotonic() < deadline:
                victim = next((i for i in range(AGENTS) if lines_of(files[i], event_id)), None)
            assert victim is not None, "no agent wrote the line"
            agents[victim].signal(signal.SIGSTOP)
            if pending(pg_url, event_id):  # written, not acked: kill it in that moment
                agents[victim].kill()
                killed = event_id
                break
            agents[victim].signal(signal.SIGCONT)  # too late: acked already; next event
            victim = None
        assert killed is not None and victim is not None, f"no stop in time in {TRIES} tries"

        survivor = 1 - victim
        # Nothing announces a death: the survivor's next heartbeat finds the dead agent's row
        # (its claimant's session gone, the 2 min lease still running) and delivers it.
        wait_until(
            lambda: lines_of(files[survivor], killed),
            2 * HEARTBEAT.total_seconds(),
            message="the taken-over line",
        )
        wait_polls(sims[survivor], 5)  # nothing more follows: the survivor polled on
        first, again = lines_of(files[victim], killed), lines_of(files[survivor], killed)
        assert [line["maybe_repeat"] for line in first] == [False]
        assert [line["maybe_repeat"] for line in again] == [True]
        assert again[0]["transition_id"] == first[0]["transition_id"]
        assert not pending(pg_url, killed)
        # Across the fleet, one unmarked line per transition: the only repeat is marked.
        unmarked = [
            (line["event_id"], line["transition"], line["ts"])
            for path in files
            for line in (read_jsonl(path) if path.exists() else [])
            if not line["maybe_repeat"]
        ]
        assert len(unmarked) == len(set(unmarked)), unmarked
    finally:
        for agent in agents:
            if agent.alive():
                agent.signal(signal.SIGCONT)
            agent.kill()

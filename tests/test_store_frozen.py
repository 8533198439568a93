"""A frozen database: PostgreSQL's connection stays up but nothing answers (a stopped server,
a frozen proxy). A real `sebridge run` behind a TCP relay that stops relaying without
closing anything (tests/pg.py Relay.freeze): polling IMDS goes on at its pace, /healthz
answers 503 within its own wait, every document seen meanwhile is recorded once the
database answers (an event that came and went during the freeze included), and the log
says so in two plain lines (docs/ARCHITECTURE.md, "Guarantees").
"""

from __future__ import annotations

import http.client
import json
import logging
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pg
from helpers import DaemonProcess, event_gets, free_port, wait_line, wait_until, write_config
from sebridge.imds.simulator import Simulator
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import StoreError
from sebridge.store import Store, pg_deadline
from sebridge.store.duties import advisory_key

pytestmark = pytest.mark.slow


def healthz(port: int) -> tuple[int, dict[str, Any], float]:
    """Status, body and how long the answer took (a 10 s wait is a failure here)."""
    start = time.monotonic()
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request("GET", "/healthz")
        response = conn.getresponse()
        return response.status, json.loads(response.read()), time.monotonic() - start
    finally:
        conn.close()


@pytest.fixture
def relay() -> Iterator[pg.Relay]:
    relay = pg.Relay()
    yield relay
    relay.close()


def test_a_frozen_database_stops_neither_polling_nor_healthz_and_loses_nothing(
    tmp_path: Path, sim: Simulator, pg_url: str, relay: pg.Relay
) -> None:
    port = free_port()
    jsonl = tmp_path / "events.jsonl"
    config = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        store_url=relay.url(pg_url),
        jsonl=jsonl,
        vm_name="vm0",
        extra=f'[http]\nlisten = "127.0.0.1:{port}"\n',
    )
    daemon = DaemonProcess(config, tmp_path / "daemon.log")
    try:
        before = sim.schedule("Reboot", resources=["vm0"])
        wait_line(jsonl, before, "scheduled", timeout=30)
        wait_until(lambda: healthz(port)[0] == 200, 15, message="/healthz 200 before")

        relay.freeze()
        during = sim.schedule("Redeploy", resources=["vm0"])
        # Polling goes on: 0.2 s polls, 5 s -> 25 GETs (at least 10 on a busy machine).
        gets = event_gets(sim)
        time.sleep(5)
        assert event_gets(sim) - gets >= 10, daemon.log_text()
        # /healthz answers, and says the store does not.
        status, body, took = healthz(port)
        assert (status, body["store"]["writable"]) == (503, False), body
        assert took < 5, f"/healthz took {took:.1f} s"
        # An event that comes and goes while the database is frozen.
        brief = sim.schedule("Freeze", resources=["vm0"])
        time.sleep(1.0)
        sim.complete(brief)
        time.sleep(1.0)
        status, body, took = healthz(port)
        assert status == 503 and took < 5, (status, took)
        # Past the statement's own deadline (12 s) the log says so, once.
        wait_until(
            lambda: "the store does not answer" in daemon.log_text(), 30, message="outage line"
        )
        time.sleep(3.0)  # statements after the first fail at once: still one line
        assert event_gets(sim) - gets >= 40, daemon.log_text()

        relay.thaw()
        wait_line(jsonl, during, "scheduled", timeout=40)
        wait_line(jsonl, brief, "scheduled", timeout=10)
        wait_line(jsonl, brief, "cancelled", timeout=10)
        wait_until(lambda: healthz(port)[0] == 200, 40, message="/healthz 200 after")
        assert daemon.alive(), daemon.log_text()
    finally:
        daemon.kill()
    log = daemon.log_text()
    assert log.count("the store does not answer") == 1, log
    assert log.count("the store answers again") == 1, log
    assert "Traceback" not in log, log


def test_after_a_freeze_the_agent_takes_its_name_back_from_its_own_old_session(
    pg_url: str, relay: pg.Relay, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    """The old session, frozen behind the relay, still holds the agent's name when the name's
    connection (which carries the heartbeat) is opened again (here, deterministically, straight to the server: the URL's second host).
    The store says so plainly, not as another daemon, and takes the name back at the
    heartbeat after the old session ended, saying so once."""
    monkeypatch.setattr(pg_deadline, "DEADLINE_SECONDS", 2.0)  # the frozen statement fails sooner
    url = relay.url(pg_url).replace(
        f"@127.0.0.1:{relay.port}/", f"@127.0.0.1:{relay.port},{pg.HOST}:{pg.PORT}/"
    )
    url += "&connect_timeout=2"  # a held connection through the frozen relay: the next host
    key = advisory_key("sebridge.agent.simvm")  # the name lock (store/postgres.py)
    store = Store(url, agent="simvm", exclusive=True)
    try:
        first = _holder(pg_url, key)
        assert first is not None
        caplog.set_level(logging.INFO, logger="sebridge.store")
        relay.freeze()
        with pytest.raises(StoreError):
            store.agents.heartbeat(utcnow())  # frozen: cut at the deadline, reconnecting begins
        wait_until(lambda: _beats(store), 30, message="the store reconnected")
        assert _holder(pg_url, key) == first  # the frozen old session still holds the name
        said = caplog.text
        assert "another sebridge daemon" not in said and "ERROR" not in said, said
        assert "most likely this daemon's own" in said, said
        relay.thaw()  # the old session ends
        wait_until(lambda: _holder(pg_url, key) != first, 15, message="the old session ended")
        wait_until(lambda: _beats(store) and _holder(pg_url, key) is not None, 15)
        assert _holder(pg_url, key) not in (None, first)  # the name's new session
        store.agents.heartbeat(utcnow())  # held: nothing more is said
        assert caplog.text.count("holds its name 'simvm' again") == 1, caplog.text
    finally:
        store.close()


def _beats(store: Store) -> bool:
    try:
        store.agents.heartbeat(utcnow())
    except StoreError:
        return False
    return True


def _holder(url: str, key: int) -> object:
    """The pid of the session holding advisory lock `key`, or None."""
    rows = pg.query(
        url,
        "SELECT pid FROM pg_locks WHERE locktype = 'advisory' AND granted AND objsubid = 1 "
        f"AND ((classid::bigint << 32) | objid::bigint) = {key}",
    )
    return rows[0][0] if rows else None

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
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

import pg
from helpers import DaemonProcess, event_gets, free_port, wait_line, wait_until, write_config
from sebridge.simulator import Simulator

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

"""An approval whose StartRequests POST a kill -9 cut short is sent again as soon as the daemon
is back: not after the claim's 60 s lease, when a 45 s notice would have run out. One that IMDS
had taken before the kill, whose event then started, is recorded, announced and counted as
sent: never as "not sent to Azure: it started first".

A real `sebridge run` against the IMDS simulator in this process. The approval comes through
its link (the daemon's HTTP server); IMDS holds the POST unanswered (or takes it and holds its
answer), the daemon is killed in the middle, and started again. IMDS takes a repeated
StartRequests for one event as one, so sending it again is always safe; not sending it would
let the event start unapproved.
"""

from __future__ import annotations

import contextlib
import threading
import time
from pathlib import Path

import pytest
import requests
from prometheus_client.parser import text_string_to_metric_families

from helpers import DaemonProcess, free_port, lines_of, wait_until, write_config
from sebridge.imds.simulator import Simulator
from sebridge.store import Store
from sebridge.web.links import LinkSigner

pytestmark = pytest.mark.slow

SECRET = "kill-9-test-link-key-0123456789abcdefghijklmnop"  # 47 bytes
POLL = 60.0  # no poll between the approval and the kill: IMDS's next request is the POST


def _approval_state(url: str, event_id: str) -> str:
    store = Store(url)
    try:
        approval = store.approvals.get(event_id)
        return approval.state if approval else ""
    finally:
        store.close()


def test_a_post_cut_short_by_kill_9_is_sent_again_at_restart(
    tmp_path: Path, sim: Simulator, store_url: str
) -> None:
    port = free_port()
    jsonl = tmp_path / "events.jsonl"
    cfg = _config(tmp_path, sim, store_url, jsonl, port)
    event_id = sim.schedule("Reboot")
    first = DaemonProcess(cfg, tmp_path / "first.log")
    try:
        link = _link(first, jsonl, store_url, event_id, port)
        sim.inject("hang", seconds=60)  # IMDS takes the POST and never answers it
        clicked = threading.Thread(
            target=lambda: _post_ignoring_the_crash(link), name="approval-link", daemon=True
        )
        clicked.start()
        wait_until(
            lambda: _approval_state(store_url, event_id) == "posting", 10, message="the POST"
        )
        time.sleep(0.5)
        first.kill()  # SIGKILL, half a second into the POST
    finally:
        first.kill()
    assert sim.start_requests == []  # the POST was held, never taken
    sim.clear_faults()

    restarted_at = time.monotonic()
    second = DaemonProcess(cfg, tmp_path / "second.log")
    try:
        wait_until(
            lambda: event_id in sim.start_requests,
            10,
            message=lambda: f"the StartRequests sent again; log: {second.log_text()}",
        )
        again_after = time.monotonic() - restarted_at
        wait_until(lambda: _approval_state(store_url, event_id) == "posted", 10, message="posted")
        approved = wait_until(lambda: lines_of(jsonl, event_id, "approved"), 10, message="news")
    finally:
        second.kill()
    assert again_after < 10  # the claim's lease is 60 s: only a released claim gets here
    assert sim.start_requests == [event_id]
    assert [line["actor"] for line in approved] == ["approval link"]
    assert lines_of(jsonl, event_id, "problem") == []  # never "not sent to Azure"


def test_a_post_imds_took_before_kill_9_is_recorded_as_sent_after_the_restart(
    tmp_path: Path, store_url: str
) -> None:
    port = free_port()
    jsonl = tmp_path / "events.jsonl"
    with Simulator(port=0, vm_name="vm0", approval_delay=0) as sim:  # taken: it starts at once
        cfg = _config(tmp_path, sim, store_url, jsonl, port)
        event_id = sim.schedule("Reboot")
        first = DaemonProcess(cfg, tmp_path / "first.log")
        try:
            link = _link(first, jsonl, store_url, event_id, port)
            sim.inject("hang_after", seconds=60)  # IMDS takes the POST; its answer never comes
            threading.Thread(
                target=lambda: _post_ignoring_the_crash(link), name="approval-link", daemon=True
            ).start()
            wait_until(lambda: event_id in sim.start_requests, 10, message="IMDS taking the POST")
            first.kill()  # SIGKILL at once: IMDS has the POST, the store not its outcome
        finally:
            first.kill()
        assert _approval_state(store_url, event_id) == "posting"
        sim.clear_faults()

        second = DaemonProcess(cfg, tmp_path / "second.log")
        try:
            wait_until(
                lambda: _approval_state(store_url, event_id) == "posted",
                15,
                message=lambda: f"posted; log: {second.log_text()}",
            )
            (approved,) = wait_until(lambda: lines_of(jsonl, event_id, "approved"), 10)
            counted = _approvals_counted(port)
        finally:
            second.kill()
        assert sim.start_requests == [event_id]  # the event started: nothing to send again
    assert approved["actor"] == "approval link"
    assert approved["note"].startswith("StartRequests sent (an earlier attempt may have reached")
    assert lines_of(jsonl, event_id, "problem") == []  # never "not sent to Azure"
    store = Store(store_url)
    try:
        history = [
            h.transition for h in store.history.entries() if h.transition.event_id == event_id
        ]
    finally:
        store.close()
    assert [t.note for t in history if t.kind == "approved"] == [approved["note"]]
    assert not [t for t in history if "not sent" in t.note]
    assert counted == {"approved": 1.0, "refused": 0.0}


def _config(tmp_path: Path, sim: Simulator, store_url: str, jsonl: Path, port: int) -> Path:
    return write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        store_url=store_url,
        jsonl=jsonl,
        poll_interval=POLL,
        vm_name="vm0",
        extra=(
            f'[http]\nlisten = "127.0.0.1:{port}"\npublic_url = "https://vm0.example.net"\n'
            f'link_secret = "{SECRET}"\n'
        ),
    )


def _link(daemon: DaemonProcess, jsonl: Path, store_url: str, event_id: str, port: int) -> str:
    """The event's approval link, once the daemon has announced the event."""
    wait_until(
        lambda: lines_of(jsonl, event_id, "scheduled"),
        20,
        message=lambda: f"the event; log: {daemon.log_text()}",
    )
    store = Store(store_url)
    try:
        record = store.events.get(event_id)
    finally:
        store.close()
    assert record is not None
    return f"http://127.0.0.1:{port}/approve/{LinkSigner(SECRET).token_for(record.event)}"


def _approvals_counted(port: int) -> dict[str, float]:
    """sebridge_approvals_total{via="link"} by outcome, from the daemon's /metrics."""
    text = requests.get(f"http://127.0.0.1:{port}/metrics", timeout=10).text
    return {
        s.labels["outcome"]: s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == "sebridge_approvals_total"
        and s.labels["via"] == "link"
        and s.labels["outcome"] in ("approved", "refused")
    }


def _post_ignoring_the_crash(link: str) -> None:
    """The person's browser: its request dies with the daemon."""
    with contextlib.suppress(requests.RequestException):
        requests.post(link, data={"name": ""}, timeout=30)

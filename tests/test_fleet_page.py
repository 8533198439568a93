"""The fleet page (issue 38): `[web] page = true` serves /fleet, /fleet.json and the calendar
feed over every agent's store, to the person an authenticating proxy names.

A daemon in this process polls the IMDS simulator and serves the page (tests/link_bridge.py);
requests come from 127.0.0.1, the default trusted proxy, unless a test says otherwise. A
2-agent fleet shares one PostgreSQL database (tests/pg.py).
"""

from __future__ import annotations

import re
import shlex
import sys
import tomllib
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from icalendar import Calendar

from helpers import cli_main, wait_polls, wait_until
from link_bridge import PUBLIC, LinkBridge
from pages import blocks
from pages import page as page_text
from sebridge.imds.simulator import Simulator

pytestmark = pytest.mark.usefixtures("no_proxy")

WEB = {"web": {"page": True}}
ANN = {"X-Forwarded-User": "ann@example.net"}


@pytest.fixture
def bridge(sim: Simulator, tmp_path: Path) -> Iterator[LinkBridge]:
    b = LinkBridge(sim, tmp_path, WEB)
    yield b
    b.stop()


def page(bridge: LinkBridge, path: str = "/fleet", headers: dict[str, str] | None = None) -> Any:
    return bridge.http.get(
        bridge.base + path, headers=ANN if headers is None else headers, timeout=10
    )


def csrf(html: str) -> str:
    found = re.search(r'name="csrf_token" value="([^"]+)"', html)
    assert found, html[:2000]
    return found.group(1)


def test_off_by_default_the_page_and_the_feed_are_404(sim: Simulator, tmp_path: Path) -> None:
    bridge = LinkBridge(sim, tmp_path)
    try:
        for path in ("/fleet", "/fleet.json", "/calendar/anything.ics"):
            assert page(bridge, path).status_code == 404, path
    finally:
        bridge.stop()


def test_only_a_person_named_by_a_trusted_proxy_sees_the_page(bridge: LinkBridge) -> None:
    event_id = bridge.schedule("Reboot", resources=["vm0", "web2"])
    assert page(bridge, headers={}).status_code == 401  # no header
    assert page(bridge, headers={"X-Forwarded-User": ""}).status_code == 401  # no name
    shown = page(bridge)
    assert shown.status_code == 200, shown.text
    assert "ann@example.net" in shown.text and event_id in shown.text
    assert (
        "web2</strong>: agent no agent" in shown.text and "vm0</strong>: agent live" in shown.text
    )
    data = page(bridge, "/fleet.json").json()
    assert data["person"] == "ann@example.net"
    (event,) = data["events"]
    assert (event["event_id"], event["action"], event["offers"]) == (event_id, "ask", ["approve"])
    assert [v["agent"] for v in event["vms"]] == ["live", "no agent"]


def test_the_header_from_an_address_not_trusted_is_401(sim: Simulator, tmp_path: Path) -> None:
    bridge = LinkBridge(sim, tmp_path, {"web": {"page": True, "trusted_proxies": ["192.0.2.0/24"]}})
    try:
        bridge.schedule("Reboot")
        assert page(bridge).status_code == 401
        assert page(bridge, "/fleet.json").status_code == 401
    finally:
        bridge.stop()


def test_filters_by_type_vm_pattern_and_state(bridge: LinkBridge) -> None:
    reboot = bridge.schedule("Reboot", resources=["vm0", "WEB7"])
    freeze = bridge.schedule("Freeze", resources=["db1"])

    def ids(query: str) -> list[str]:
        answer = page(bridge, f"/fleet.json?{query}")
        assert answer.status_code == 200, answer.text
        return [e["event_id"] for e in answer.json()["events"]]

    assert ids("type=reboot") == [reboot]
    assert ids("vm=web*") == [reboot]  # a shell pattern, any case
    assert ids("vm=db?") == [freeze]
    assert sorted(ids("state=open")) == sorted([reboot, freeze])
    assert ids("state=ended") == []
    bad = page(bridge, "/fleet.json?state=nonsense")
    assert bad.status_code == 400 and "open, ended, held" in bad.json()["error"]


def test_a_form_without_its_csrf_token_is_refused_with_it_one_start_requests(
    bridge: LinkBridge, sim: Simulator
) -> None:
    event_id = bridge.schedule("Redeploy", resources=["vm0"])
    token = csrf(page(bridge).text)
    url = bridge.base + "/fleet"
    form = {"event_id": event_id, "action": "approve"}
    assert bridge.http.post(url, data=form, headers=ANN, timeout=10).status_code == 403
    # A token is the person's: Bob's forms cannot carry Ann's.
    bob = {"X-Forwarded-User": "bob"}
    mine = {**form, "csrf_token": token}
    assert bridge.http.post(url, data=mine, headers=bob, timeout=10).status_code == 403
    assert bridge.http.post(url, data=mine, headers={}, timeout=10).status_code == 401
    wait_polls(sim, 3)
    assert sim.start_requests == []

    done = bridge.http.post(url, data=mine, headers=ANN, timeout=10)
    assert done.status_code == 200, done.text
    assert "Approved by ann@example.net" in done.text
    wait_until(lambda: sim.start_requests == [event_id], 10)
    approval = bridge.daemon.store.approvals.get(event_id)
    assert approval is not None
    assert (approval.actor, approval.via, approval.state) == ("ann@example.net", "page", "posted")
    again = bridge.http.post(url, data=mine, headers=ANN, timeout=10)
    assert "Not approved again" in again.text
    wait_polls(sim, 3)
    assert sim.start_requests == [event_id]  # one StartRequests in all


def test_the_calendar_feed_parses_and_a_cancelled_event_moves_its_sequence(
    bridge: LinkBridge, sim: Simulator
) -> None:
    kept = bridge.schedule("Reboot", resources=["vm0", "web2"], duration=600)
    gone = bridge.schedule("Freeze", resources=["vm0"])
    # The command as docs/fleet-page.md shows it, with this test's config.
    (block,) = blocks(page_text("fleet-page.md"), "sh")
    line = block.text.strip().replace("/etc/sebridge/sebridge.toml", _config_file(bridge))
    program, *argv = shlex.split(line)
    assert program == "sebridge"
    code, out, err = cli_main(*argv)
    assert code == 0, err
    url = out.strip()
    assert url.startswith(f"{PUBLIC}/calendar/") and url.endswith(".ics")
    path = url.removeprefix(PUBLIC)
    assert bridge.get(path.replace("/calendar/", "/calendar/x")).status_code == 404
    assert bridge.get("/calendar/.ics").status_code == 404

    def feed() -> dict[str, Any]:
        answer = bridge.get(path)
        assert answer.status_code == 200
        assert answer.headers["Content-Type"].startswith("text/calendar")
        cal = Calendar.from_ical(answer.content)
        return {str(e["uid"]): e for e in cal.walk("VEVENT")}

    before = feed()
    assert set(before) == {f"{kept}@sebridge", f"{gone}@sebridge"}
    reboot = before[f"{kept}@sebridge"]
    record = bridge.daemon.store.events.get(kept)
    assert record is not None and record.event.not_before is not None
    assert reboot.decoded("dtstart") == record.event.not_before
    assert reboot.decoded("dtend") - reboot.decoded("dtstart") == timedelta(seconds=600)
    assert str(reboot["summary"]) == "Reboot: vm0, web2 (ask)"
    assert f"{PUBLIC}/fleet#{kept}" in str(reboot["description"])
    freeze = before[f"{gone}@sebridge"]
    assert str(freeze["status"]) == "CONFIRMED"
    assert freeze.decoded("dtend") - freeze.decoded("dtstart") == timedelta(minutes=15)

    sim.complete(gone)  # it leaves IMDS without starting
    wait_until(lambda: (r := bridge.daemon.store.events.get(gone)) and r.state == "cancelled", 10)
    after = feed()[f"{gone}@sebridge"]
    assert str(after["status"]) == "CANCELLED"
    assert int(after["sequence"]) > int(freeze["sequence"])
    assert after.decoded("last-modified") >= freeze.decoded("last-modified")
    assert "Approval: nobody" in str(feed()[f"{kept}@sebridge"]["description"])

    # Approved on the page: the kept entry is written again, saying who.
    form = {"csrf_token": csrf(page(bridge).text), "event_id": kept, "action": "approve"}
    assert bridge.http.post(bridge.base + "/fleet", data=form, headers=ANN, timeout=10).ok
    wait_until(lambda: sim.start_requests == [kept], 10)
    approved = feed()[f"{kept}@sebridge"]
    assert "Approval: ann@example.net via page (posted)" in str(approved["description"])
    assert int(approved["sequence"]) > int(reboot["sequence"])


def _config_file(bridge: LinkBridge) -> str:
    """The bridge's config written as a file for the CLI (its store, its [http] and [web])."""
    path = Path(bridge.config.store.sqlite_path).parent / "calendar.toml"
    path.write_text(
        f'[store]\nurl = "{bridge.config.store.url}"\n'
        f'[http]\npublic_url = "{PUBLIC}"\n[web]\npage = true\n',
        encoding="utf-8",
    )
    return str(path)


@pytest.mark.slow  # two daemons on one PostgreSQL database
def test_a_fleet_shows_an_event_only_the_other_agents_vm_lists(pg_url: str, tmp_path: Path) -> None:
    with Simulator(port=0, vm_name="vm0") as sim0, Simulator(port=0, vm_name="vm1") as sim1:
        here = LinkBridge(sim0, tmp_path / "vm0", WEB, vm_name="vm0", store_url=pg_url)
        other = LinkBridge(sim1, tmp_path / "vm1", WEB, vm_name="vm1", store_url=pg_url)
        try:
            theirs = other.schedule("Redeploy", resources=["vm1"])
            data = page(here, "/fleet.json").json()
            (event,) = [e for e in data["events"] if e["event_id"] == theirs]
            assert [(v["vm"], v["agent"]) for v in event["vms"]] == [("vm1", "live")]
            assert theirs in page(here).text
            other.stop()  # a clean stop: the fleet takes vm1's agent for silent at once
            data = page(here, "/fleet.json").json()
            (event,) = [e for e in data["events"] if e["event_id"] == theirs]
            ((vm, agent),) = [(v["vm"], v["agent"]) for v in event["vms"]]
            assert vm == "vm1" and agent.startswith("silent since "), agent
        finally:
            here.stop()
            other.stop()


def test_a_held_event_offers_retry_and_approve_anyway_behind_a_confirmation(
    sim: Simulator, tmp_path: Path
) -> None:
    fails = tmp_path / "drain.py"
    fails.write_text("import sys\nprint('drain refused: token=hunter2hunter2')\nsys.exit(1)\n")
    sections = {
        **WEB,
        "policy": {
            "rules": [{"name": "drain", "action": "ask", "prepare": ["drain"]}],
            "prepare_lead_seconds": 3600,  # the hook runs at once: nobody approved it yet
        },
        "hooks": {"drain": {"command": [sys.executable, str(fails)]}},
    }
    bridge = LinkBridge(sim, tmp_path, sections)
    try:
        event_id = bridge.schedule("Reboot", resources=["vm0"])
        wait_until(lambda: "drain refused" in page(bridge).text, 15, message="the failed hook")
        (event,) = page(bridge, "/fleet.json").json()["events"]
        assert event["held"] and event["offers"] == ["anyway", "retry"]
        (hook,) = event["hooks"]
        assert (hook["vm"], hook["hook"], hook["state"]) == ("vm0", "drain", "failed")
        shown = page(bridge).text
        assert 'class="danger">Approve anyway' in shown and "Approve: let it start now" not in shown
        assert "sebridge hooks retry" in shown  # the ways out

        url, token = bridge.base + "/fleet", csrf(shown)
        form = {"csrf_token": token, "event_id": event_id}
        retried = bridge.http.post(url, data={**form, "action": "retry"}, headers=ANN, timeout=10)
        assert "hooks retry requested by ann@example.net: drain on vm0" in retried.text

        def failed_again() -> bool:
            (again,) = page(bridge, "/fleet.json").json()["events"]
            return [(h["attempt"], h["state"]) for h in again["hooks"]] == [(2, "failed")]

        wait_until(failed_again, 15, message="the hook's second run failed")

        confirm = bridge.http.post(url, data={**form, "action": "anyway"}, headers=ANN, timeout=10)
        assert 'name="confirm"' in confirm.text and 'class="danger"' in confirm.text
        wait_polls(sim, 3)
        assert sim.start_requests == []  # the first POST only asks to confirm
        done = bridge.http.post(
            url, data={**form, "action": "anyway", "confirm": "1"}, headers=ANN, timeout=10
        )
        assert "Approved anyway by ann@example.net" in done.text, done.text
        wait_until(lambda: sim.start_requests == [event_id], 10)
        approval = bridge.daemon.store.approvals.get(event_id)
        assert approval is not None and (approval.anyway_by, approval.anyway_via) == (
            "ann@example.net",
            "page",
        )
    finally:
        bridge.stop()


@pytest.mark.parametrize(
    ("web", "said"),
    [
        ({"trusted_proxies": ["10.0.0.1/8"]}, 'web.trusted_proxies: "10.0.0.1/8" is not a CIDR'),
        ({"trusted_proxies": ["proxy.local"]}, 'web.trusted_proxies: "proxy.local" is not a CIDR'),
        ({"page": True, "trusted_proxies": []}, "web.trusted_proxies: empty"),
        ({"user_header": "X User"}, 'web.user_header: "X User" is not an HTTP header name'),
        ({"recent_days": 0}, "web.recent_days"),
    ],
)
def test_a_bad_web_section_is_refused_naming_the_key(web: dict[str, Any], said: str) -> None:
    from sebridge.integrations.registry import config_from_mapping
    from sebridge.kernel.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(said)):
        config_from_mapping({"web": web}, environ={})


def test_trusted_proxies_are_kept_in_their_canonical_spelling() -> None:
    from sebridge.integrations.registry import config_from_mapping

    config = config_from_mapping({"web": {"trusted_proxies": ["10.1.0.0/16", "::1"]}}, environ={})
    assert config.web.trusted_proxies == ("10.1.0.0/16", "::1/128")


@pytest.mark.parametrize("name", ["fleet-page.md", "operations/health.md"])
def test_the_configs_the_docs_show_for_the_page_load(name: str) -> None:
    from sebridge.integrations.registry import config_from_mapping

    shown = [b for b in blocks(page_text(name), "toml") if "[web]" in b.text]
    assert shown, name
    for block in shown:
        config = config_from_mapping(tomllib.loads(block.text), environ={})
        assert config.web.page and config.web.trusted_proxies[0] == "127.0.0.1/32"

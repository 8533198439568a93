"""The approval page over real sockets: the daemon in this process, the IMDS simulator, and
HTTP requests the way a phone's browser sends them. GET never approves; POST approves once."""

from __future__ import annotations

import io
import re
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest
import requests

from helpers import wait_until
from link_bridge import PUBLIC, LinkBridge
from sebridge.cli import commands
from sebridge.imds.simulator import Simulator
from sebridge.integrations.registry import config_from_mapping as from_mapping
from sebridge.web.links import LinkSigner

Bridge = LinkBridge


@pytest.fixture
def make_bridge(sim: Simulator, tmp_path: Path) -> Iterator[Callable[..., Bridge]]:
    bridges: list[Bridge] = []

    def make(**http: Any) -> Bridge:
        bridges.append(Bridge(sim, tmp_path, **http))
        return bridges[-1]

    yield make
    for bridge in bridges:
        bridge.stop()


@pytest.fixture
def bridge(make_bridge: Callable[..., Bridge]) -> Bridge:
    return make_bridge()


def text_of(html: str) -> str:
    """What a person reads: tags dropped, whitespace collapsed."""
    return " ".join(re.sub(r"<[^>]+>", " ", html).split())


def assert_hardened(response: requests.Response) -> None:
    headers = response.headers
    assert headers["Cache-Control"] == "no-store"
    assert headers["Referrer-Policy"] == "no-referrer"
    csp = headers["Content-Security-Policy"]
    assert "default-src 'none'" in csp and "frame-ancestors 'none'" in csp
    assert "form-action 'self'" in csp


def test_get_shows_the_event_and_never_approves(bridge: Bridge, sim: Simulator) -> None:
    event_id = bridge.schedule(
        "Redeploy", resources=["vm0", "vm1"], description="Host <b>update</b> & more", duration=300
    )
    for _ in range(3):  # an unfurler, a mail scanner, the person
        page = bridge.get(bridge.link(event_id))
        assert page.status_code == 200
    assert_hardened(page)
    assert page.headers["Content-Type"].startswith("text/html")
    seen = text_of(page.text)
    assert "Redeploy" in seen and "vm0 (this VM)" in seen and "vm1" in seen
    assert re.search(r"Not before \d{4}-\d\d-\d\d \d\d:\d\d:\d\d UTC \(in 1\d min\)", seen)
    assert "5 min" in seen and "Platform" in seen and event_id in seen
    assert "Approving releases every VM this event lists: vm0, vm1." in seen
    assert "Host &lt;b&gt;update&lt;/b&gt; &amp; more" in page.text  # IMDS text is escaped
    assert re.search(r'<form method="post">', page.text)
    assert "<script" not in page.text and "http" not in page.text.split("<body>")[1]
    bridge.sim.refresh()
    assert sim.start_requests == []
    assert bridge.daemon.store.approvals.get(event_id) is None


def test_post_approves_once_then_says_who(bridge: Bridge, sim: Simulator) -> None:
    event_id = bridge.schedule()
    link = bridge.link(event_id)

    done = bridge.post(link, name="Alice \u202eevil\x00")
    assert done.status_code == 200
    assert_hardened(done)
    assert "Approved by Alice evil via approval link" in text_of(done.text)
    assert "Azure was told it may start now" in text_of(done.text)
    assert sim.start_requests == [event_id]
    approval = bridge.daemon.store.approvals.get(event_id)
    assert approval is not None
    assert (approval.actor, approval.via, approval.state) == (
        "approval link (Alice evil)",
        "link",
        "posted",
    )

    again = bridge.post(link, name="Bob")
    assert again.status_code == 200
    said = text_of(again.text)
    assert "Already approved by Alice evil via approval link at" in said
    assert "Nothing more was sent" in said
    assert bridge.get(link).status_code == 200  # and GET says the same, no button
    assert "<form" not in bridge.get(link).text
    assert sim.start_requests == [event_id]
    assert [p.ids for p in sim.posts] == [(event_id,)]


def test_post_without_a_name(bridge: Bridge, sim: Simulator) -> None:
    event_id = bridge.schedule("Reboot")
    assert bridge.post(bridge.link(event_id)).status_code == 200
    approval = bridge.daemon.store.approvals.get(event_id)
    assert approval is not None and approval.actor == "approval link"
    assert sim.start_requests == [event_id]


def _tampered(bridge: Bridge, event_id: str) -> list[str]:
    link = bridge.link(event_id)
    body, mac = link.rsplit("/", 1)[1].split(".")
    flipped = mac[:-2] + ("AA" if mac[-2:] != "AA" else "BB")
    record = bridge.daemon.store.events.get(event_id)
    assert record is not None
    past = datetime.now(UTC) - timedelta(seconds=5)
    return [
        f"/approve/{body}.{flipped}",
        f"/approve/{LinkSigner('not the key').token_for(record.event)}",
        f"/approve/{bridge.signer.token(event_id, past)}",  # expired
        f"/approve/{bridge.signer.token('00000000-0000-0000-0000-000000000000', past.replace(year=2099))}",
        "/approve/garbage",
    ]


def test_tampered_expired_and_unknown_links_get_a_bare_403(bridge: Bridge, sim: Simulator) -> None:
    event_id = bridge.schedule()
    for path in _tampered(bridge, event_id):
        for answer in (bridge.get(path), bridge.post(path, name="mallory")):
            assert answer.status_code == 403, path
            assert answer.text == "Forbidden"
            assert_hardened(answer)
    assert bridge.daemon.store.approvals.get(event_id) is None
    assert sim.start_requests == [] and sim.posts == []


def test_a_gone_event_cannot_be_approved(bridge: Bridge, sim: Simulator) -> None:
    event_id = bridge.schedule()
    link = bridge.link(event_id)
    sim.complete(event_id)
    wait_until(lambda: not bridge.daemon.store.events.get(event_id).present, 10)  # type: ignore[union-attr]
    for answer in (bridge.get(link), bridge.post(link, name="late")):
        assert answer.status_code == 410
        assert "This event is over (cancelled): there is nothing to approve" in text_of(answer.text)
        assert "<form" not in answer.text
    assert bridge.daemon.store.approvals.get(event_id) is None
    assert sim.posts == []


def test_a_started_event_cannot_be_approved(bridge: Bridge, sim: Simulator) -> None:
    event_id = bridge.schedule("Freeze")
    link = bridge.link(event_id)
    sim.start_event(event_id)
    wait_until(lambda: bridge.daemon.store.events.get(event_id).event.started, 10)  # type: ignore[union-attr]
    answer = bridge.post(link)
    assert answer.status_code == 409
    assert "already started" in text_of(answer.text)
    assert bridge.daemon.store.approvals.get(event_id) is None
    assert sim.posts == []


def test_other_methods_and_big_bodies_are_refused(bridge: Bridge, sim: Simulator) -> None:
    event_id = bridge.schedule()
    link = bridge.link(event_id)
    put = bridge.http.put(bridge.base + link, data="x", timeout=10)
    assert put.status_code == 405 and put.headers["Allow"] == "GET, POST"
    big = bridge.post(link, name="x" * 20_000)
    assert big.status_code == 413
    many = bridge.http.post(
        bridge.base + link,
        data="&".join(["a=1"] * 50),
        timeout=10,
        headers={"Content-Type": "application/x-www-form-urlencoded"},
    )
    assert many.status_code == 200  # not our form's fields: approved without a name
    approval = bridge.daemon.store.approvals.get(event_id)
    assert approval is not None and approval.actor == "approval link"
    assert bridge.get("/approve/").status_code == 403


def test_check_reports_links_without_the_key(
    make_bridge: Callable[..., Bridge], tmp_path: Path
) -> None:
    bridge = make_bridge()
    key = bridge.daemon.store.settings.get("link_secret")
    assert key
    out = io.StringIO()
    assert commands.check(bridge.config, as_json=False, out=out) == 0
    report = out.getvalue()
    assert f"ok: http: approval links point at {PUBLIC}/approve/..." in report
    assert "ok: http: approval links are signed with the key kept in the store" in report
    assert key not in report
    out = io.StringIO()
    commands.check(bridge.config, as_json=True, out=out)
    assert key not in out.getvalue()


def test_check_before_first_start_says_a_key_will_be_made(tmp_path: Path, sim: Simulator) -> None:
    config = from_mapping(
        {
            "imds": {"vm_name": "vm0", "endpoint": sim.url},
            "store": {"url": f"sqlite:///{tmp_path / 's.db'}"},
            "http": {"public_url": PUBLIC},
        },
        environ={},
    )
    out = io.StringIO()
    assert commands.check(config, as_json=False, out=out) == 0
    assert "no link key yet: the daemon generates one on first start" in out.getvalue()


def test_imds_down_the_page_says_it_keeps_trying(bridge: Bridge, sim: Simulator) -> None:
    event_id = bridge.schedule("Reboot")
    link = bridge.link(event_id)
    sim.inject("500", count=10_000)  # every IMDS request fails, polls and POSTs alike
    done = bridge.post(link, name="Alice")
    assert done.status_code == 200
    assert "Azure did not answer yet. sebridge keeps trying on every poll" in text_of(done.text)
    assert sim.start_requests == []
    sim.clear_faults()
    wait_until(lambda: sim.start_requests == [event_id], 10, message="the retried StartRequest")
    # Recorded just after IMDS answered the POST: wait for that commit, not only the POST.
    wait_until(
        lambda: getattr(bridge.daemon.store.approvals.get(event_id), "state", None) == "posted",
        message="the approval recorded as posted",
    )
    assert "Azure was told it may start now" in text_of(bridge.get(link).text)


def test_dry_run_records_and_sends_nothing(sim: Simulator, tmp_path: Path) -> None:
    bridge = LinkBridge(sim, tmp_path, {"policy": {"dry_run": True}})
    try:
        event_id = bridge.schedule("Reboot")
        link = bridge.link(event_id)
        assert "Dry run: nothing will be sent to Azure" in text_of(bridge.get(link).text)
        done = bridge.post(link)
        assert "Approval recorded (dry run): nothing was sent to Azure" in text_of(done.text)
        approval = bridge.daemon.store.approvals.get(event_id)
        assert approval is not None and approval.state == "dry_run"
        sim.refresh()
        assert sim.posts == []
    finally:
        bridge.stop()


def test_the_page_reopened_later_says_where_the_event_is_now(
    bridge: Bridge, sim: Simulator
) -> None:
    event_id = bridge.schedule("Reboot")
    link = bridge.link(event_id)
    assert "Azure was told it may start now" in text_of(bridge.post(link, name="Ann").text)
    sim.start_event(event_id)
    wait_until(lambda: bridge.daemon.store.events.get(event_id).event.started, 10)  # type: ignore[union-attr]
    said = text_of(bridge.get(link).text)
    assert "the Reboot has started" in said
    assert "may start now" not in said
    sim.complete(event_id)
    wait_until(lambda: not bridge.daemon.store.events.get(event_id).present, 10)  # type: ignore[union-attr]
    said = text_of(bridge.get(link).text)
    assert re.search(r"the Reboot is over: Azure no longer lists it \(since \d{4}-", said), said
    assert "may start now" not in said and "has started" not in said
    assert "Already approved by Ann via approval link" in said
    assert [p.ids for p in sim.posts] == [(event_id,)]


def test_a_held_approval_is_not_approved_and_says_what_happens_next(
    make_bridge: Callable[..., Bridge], tmp_path: Path
) -> None:
    """Finding 2: the page of a held event never says "Already approved"; it says held and
    why, when Azure starts it anyway, the VM not ready, and the two ways out."""
    fails = tmp_path / "fails.py"
    fails.write_text("import sys\nprint('lb refused web1')\nsys.exit(1)\n")
    bridge = make_bridge(
        sections={
            "policy": {"rules": [{"name": "drain first", "action": "ask", "prepare": ["drain"]}]},
            "hooks": {"drain": {"command": [sys.executable, str(fails)]}},
        }
    )
    event_id = bridge.schedule("Redeploy")
    path = bridge.link(event_id)
    bridge.post(path, name="carol (on-call)")
    wait_until(
        lambda: (
            (a := bridge.daemon.store.approvals.get(event_id)) is not None and a.state == "held"
        ),
        10,
        message="the approval held",
    )
    seen = text_of(bridge.get(path).text)
    assert "Already approved" not in seen and "✅" not in seen
    assert "Asked to approve by carol (on-call) via approval link at " in seen
    assert "it is not approved yet" in seen and "(carol (on-call))" not in seen
    assert "⛔ Held, not approved: drain failed (exit 1) on vm0" in seen
    assert re.search(r"Azure starts it anyway at \S+ \S+ UTC \(in \d+ min\), ready or not", seen)
    assert "Not ready: vm0: failed: drain exit 1 lb refused web1" in seen  # the output's tail
    assert seen.count("vm0: failed: drain exit 1") == 1  # each listed VM said once
    assert f"sebridge hooks retry {event_id} : runs the failed prepare hooks again" in seen
    assert f"sebridge approve {event_id} --anyway : starts it now" in seen
    # Approve anyway is offered (behind a confirming POST), never a plain Approve.
    assert '<input type="hidden" name="anyway" value="1">' in bridge.get(path).text


def test_a_held_event_offers_approve_anyway_behind_a_confirming_post(
    make_bridge: Callable[..., Bridge], sim: Simulator, tmp_path: Path
) -> None:
    fails = tmp_path / "fails.py"
    fails.write_text(
        "import sys\nprint('drained 3 of 4')\nprint('<b>lb said 503</b>')\nsys.exit(1)\n"
    )
    bridge = make_bridge(
        sections={
            "policy": {"rules": [{"action": "approve", "prepare": ["fails"]}]},
            "hooks": {"fails": {"command": [sys.executable, str(fails)]}},
        }
    )
    event_id = bridge.schedule("Reboot")
    store = bridge.daemon.store
    wait_until(lambda: (a := store.approvals.get(event_id)) is not None and a.state == "held", 10)
    link = bridge.link(event_id)

    shown = bridge.get(link)
    assert shown.status_code == 200
    seen = text_of(shown.text)
    assert "Approve: let it start now" not in seen  # no Approve while held
    assert "vm0: failed: fails exit 1" in seen
    assert "drained 3 of 4 | &lt;b&gt;lb said 503&lt;/b&gt;" in shown.text  # tail, escaped
    assert '<input type="hidden" name="anyway" value="1">' in shown.text
    assert 'name="confirm"' not in shown.text
    assert f"sebridge hooks retry {event_id}" in seen

    held = bridge.post(link, name="Bob")  # an old page's Approve: held, and says so
    assert "Held, not approved: fails failed (exit 1) on vm0" in text_of(held.text)
    assert "Approve anyway…" in held.text
    confirming = bridge.post(link, anyway="1", name="Carol")  # the first POST only asks
    assert confirming.status_code == 200
    assert '<input type="hidden" name="confirm" value="1">' in confirming.text
    assert "Approving anyway lets the Reboot start now" in text_of(confirming.text)
    bridge.sim.refresh()
    assert sim.start_requests == []
    assert store.approvals.get(event_id).state == "held"  # type: ignore[union-attr]

    done = bridge.post(link, anyway="1", confirm="1", name="Carol")
    assert done.status_code == 200
    assert "Azure was told it may start now" in text_of(done.text)
    assert sim.start_requests == [event_id]
    approval = store.approvals.get(event_id)
    assert approval is not None
    assert (approval.state, approval.anyway_by) == ("posted", "approval link (Carol)")
    again = bridge.get(link)
    assert "<form" not in again.text  # carried out: neither Approve nor anyway
    # Who decided is said with "anyway" (issue 34, finding 6).
    assert "Already approved by Carol via approval link, anyway" in text_of(again.text)

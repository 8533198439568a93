"""E-mail end to end: the daemon, the IMDS simulator and a real SMTP server on real sockets.

A Reboot becomes a mail whose link opens the approval page. A mail scanner opens every
link it finds (GET, several times, before the person does): that approves nothing. The
person's POST from the page's button approves once; the follow-ups thread under the
first mail.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest

from fakes.smtp import FakeSmtp, Received
from helpers import wait_until
from link_bridge import PUBLIC, LinkBridge
from sebridge.imds.simulator import Simulator

pytestmark = pytest.mark.usefixtures("no_proxy")

USER, PASSWORD = "bot", "e2e-Password-31"


@pytest.fixture
def smtp() -> Iterator[FakeSmtp]:
    with FakeSmtp(users={USER: PASSWORD}) as fake:
        yield fake


@pytest.fixture
def bridge(sim: Simulator, smtp: FakeSmtp, tmp_path: Path) -> Iterator[LinkBridge]:
    section = {
        "host": "127.0.0.1",
        "port": smtp.port,
        "ca_file": str(smtp.cert.cert),
        "username": USER,
        "password": PASSWORD,
        "from": "sebridge <sebridge@example.com>",
        "to": ["ops@example.com"],
    }
    running = LinkBridge(sim, tmp_path, {"email": section})
    yield running
    running.stop()


def mails_of(smtp: FakeSmtp, event_id: str) -> list[Received]:
    return [m for m in smtp.mails if event_id in m.part("plain")]


def wait_mail(smtp: FakeSmtp, event_id: str, pattern: str) -> Received:
    found = wait_until(
        lambda: [m for m in mails_of(smtp, event_id) if re.search(pattern, m.part("plain"))],
        10,
        message=lambda: f"a mail matching {pattern!r}: {[m.part('plain') for m in smtp.mails]}",
    )
    return found[0]


def test_a_scanners_get_approves_nothing_and_the_persons_post_approves_once(
    bridge: LinkBridge, sim: Simulator, smtp: FakeSmtp
) -> None:
    event_id = sim.schedule("Reboot", description="Planned host maintenance")
    first = wait_mail(smtp, event_id, r"Reboot of vm0 \(this VM\)")
    assert re.fullmatch(r"Reboot of vm0 at \d\d:\d\d UTC: approval asked", first.message["Subject"])
    (url,) = re.findall(rf"{re.escape(PUBLIC)}/approve/\S+", first.part("plain"))
    assert f'href="{url}"' in first.part("html")  # the same link in both parts
    path = bridge.local(url)

    for _ in range(3):  # Safe Links, a scanner, then the person opening the page
        page = bridge.get(path)
        assert page.status_code == 200 and "Planned host maintenance" in page.text
        assert 'method="post"' in page.text.lower()
    sim.refresh()
    assert sim.posts == [] and bridge.daemon.store.approvals.get(event_id) is None

    done = bridge.post(path, name="Alice")
    assert done.status_code == 200 and "Approved by Alice via approval link" in done.text
    assert sim.start_requests == [event_id]
    again = bridge.post(path, name="Bob")
    assert "Already approved by Alice via approval link" in again.text
    assert [p.ids for p in sim.posts] == [(event_id,)]

    approved = wait_mail(smtp, event_id, r"Approved by Alice via approval link")
    assert approved.message["Subject"] == "Re: " + first.message["Subject"]
    assert approved.message["In-Reply-To"] == first.message["Message-ID"]
    assert approved.message["References"] == first.message["Message-ID"]
    assert url not in approved.part("plain")  # approved: no link any more
    sim.start_event(event_id)  # not one of the kinds mail gets by default (model/kinds.py)
    sim.complete(event_id)
    done_mail = wait_mail(smtp, event_id, r"Completed")
    assert done_mail.message["In-Reply-To"] == first.message["Message-ID"]
    ids = [m.message["Message-ID"] for m in mails_of(smtp, event_id)]
    assert len(ids) == len(set(ids)) == 3  # scheduled, approved, completed: once each

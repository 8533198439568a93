"""One answer to "would an approval of this event be carried out now?", whoever asks.

Every approval state (none, pending, posting, waiting, held, posted, dry_run, failed,
abandoned) times every situation of the event (in IMDS's document, gone, started): the
store's record, the message a sink is given at delivery (its Approve button and link), the
Jira search of open events and the approval page's GET all give the answer of the table
below. A real store on both dialects holds all 27 events; the messages come from the
dispatcher's claims, the page from its WSGI app.
"""

from __future__ import annotations

import contextlib
import io
import json
import re
import threading
from collections.abc import Iterator
from dataclasses import dataclass, replace
from datetime import UTC, datetime, timedelta
from typing import Any
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
import requests

import pg
from fakes.slack_web import FakeMessage
from helpers import ListSink
from rigs.slack import SlackRig
from rigs.teams import TeamsRig
from sebridge.approval.assembly import assemble
from sebridge.approval.gate import GateAnswer
from sebridge.approval.usecase import Approvals
from sebridge.engine.dispatch import Dispatcher
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.integrations.render import Renderer
from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.approval import Blocker
from sebridge.model.approval_request import ApprovalRequest
from sebridge.model.diff import diff
from sebridge.store import Store
from sebridge.web.approval_page import PREFIX, ApprovalPage
from sebridge.web.links import LinkSigner

T0 = datetime(2026, 11, 27, 9, 0, tzinfo=UTC)
T1 = T0 + timedelta(minutes=1)
LINK = "https://sebridge.example.net/approve/"
APPROVE_BUTTON = "Approve: let it start now"  # the page's Approve form
ANYWAY_FIELD = '<input type="hidden" name="anyway" value="1">'  # its "Approve anyway" form

STATES = [None, "pending", "posting", "waiting", "held", "posted", "dry_run", "failed", "abandoned"]
SITUATIONS = ["present", "gone", "started"]
# The one answer: None (it would be carried out: offered), else why not. An approval, whatever
# became of it, is named before the event's end.
BY_STATE = {
    "pending": Blocker.UNDER_WAY,
    "posting": Blocker.UNDER_WAY,
    "waiting": Blocker.WAITING,
    "held": Blocker.HELD,
    "posted": Blocker.APPROVED,
    "dry_run": Blocker.APPROVED,
    "failed": Blocker.NOT_SENT,
    "abandoned": Blocker.NOT_SENT,
}
WITHOUT_APPROVAL = {"present": None, "gone": Blocker.GONE, "started": Blocker.STARTED}


def answer(state: str | None, situation: str) -> Blocker | None:
    return WITHOUT_APPROVAL[situation] if state is None else BY_STATE[state]


def event_id(state: str | None, situation: str) -> str:
    return f"E-{state or 'none'}-{situation}"


@dataclass(frozen=True)
class Seen:
    """What each affordance says of one event."""

    blocker: Blocker | None  # EventRecord.blocker()
    approvable: bool  # the last message delivered: Message.approvable
    link: str | None  # ... and its approval link
    open: bool  # in the Jira search's open events
    page: tuple[int, bool]  # the page's GET: status, and whether it offers an Approve form
    anyway: tuple[bool, bool]  # "Approve anyway" offered: the last message (Message.anyway), page


class Host:
    """The page's host: the approval use case (nothing carries out here: GETs only)."""

    def __init__(self, approvals: Approvals) -> None:
        self.approvals = approvals

    def vm_name(self) -> str:
        return "vm0"


def get(page: ApprovalPage, path: str) -> tuple[int, str]:
    answered: list[str] = []
    environ: dict[str, Any] = {
        "REQUEST_METHOD": "GET",
        "PATH_INFO": path,
        "wsgi.input": io.BytesIO(b""),
    }
    body = b"".join(page(environ, lambda status, headers, exc_info=None: answered.append(status)))
    return int(answered[0].split()[0]), body.decode()


@pytest.fixture(scope="module", params=["sqlite", pytest.param("postgresql", marks=pytest.mark.pg)])
def seen(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[dict[str, Seen]]:
    """One store with an event for each (state, situation), delivered, searched and shown."""
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path_factory.mktemp('approvable') / 'state.db'}"
        yield from _seen(url)
    else:
        with pg.temporary_database() as database:
            yield from _seen(pg.reset(database))


def _seen(url: str) -> Iterator[dict[str, Seen]]:
    store = Store(url, agent="vm0")
    try:
        cases = [(state, situation) for state in STATES for situation in SITUATIONS]
        first = {
            event_id(*case): ScheduledEvent(
                event_id(*case),
                "Redeploy",
                "Scheduled",
                ("vm0",),
                not_before=T0 + timedelta(hours=1),
            )
            for case in cases
        }
        then = [
            ScheduledEvent(e.event_id, e.event_type, "Started", e.resources)
            if e.event_id.endswith("-started")
            else e
            for e in first.values()
            if not e.event_id.endswith("-gone")
        ]
        before, after = Document(1, tuple(first.values())), Document(2, tuple(then))
        scheduled = [
            (Transition(TransitionKind.SCHEDULED, e, T0), ["list"]) for e in first.values()
        ]
        store.documents.apply(before, scheduled, T0)
        store.documents.apply(after, [(t, ["list"]) for t in diff(before, after, T1)], T1)
        for state, situation in cases:
            if state is not None:
                store.approvals.record(Approval(event_id(state, situation), "alice", "cli", T1))
                store.db.execute(
                    "UPDATE approvals SET state = ? WHERE event_id = ?",
                    (state, event_id(state, situation)),
                )
        sink = ListSink()
        Dispatcher(
            store,
            {"list": sink},
            vm_name=lambda: "vm0",
            clock=lambda: T1,
            approve_url=lambda e: LINK + e.event_id,
        ).deliver_due("list")
        approvals = Approvals(store, None, lambda action: ["list"], clock=lambda: T1)
        signer = LinkSigner("a-key-for-the-approvable-table", clock=lambda: T1)
        page = ApprovalPage(signer, Host(approvals), Renderer(), clock=lambda: T1)
        open_ids = {r.event.event_id for r in approvals.open_events()}
        found: dict[str, Seen] = {}
        for eid, e in first.items():
            record = store.events.get(eid)
            assert record is not None
            last = sink.by_event(eid)[-1]
            status, body = get(page, PREFIX + signer.token_for(e))
            found[eid] = Seen(
                record.blocker(),
                last.approvable,
                last.approve_url,
                eid in open_ids,
                (status, APPROVE_BUTTON in body),
                (last.anyway, ANYWAY_FIELD in body),
            )
        yield found
    finally:
        store.close()


@pytest.mark.parametrize("situation", SITUATIONS)
@pytest.mark.parametrize("state", STATES)
def test_every_affordance_gives_the_one_answer(
    seen: dict[str, Seen], state: str | None, situation: str
) -> None:
    expected = answer(state, situation)
    offered = expected is None
    anyway_offered = state in ("waiting", "held") and situation == "present"
    page_status = {Blocker.STARTED: 409, Blocker.GONE: 410}.get(expected, 200)
    assert seen[event_id(state, situation)] == Seen(
        blocker=expected,
        approvable=offered,
        link=LINK + event_id(state, situation) if offered else None,
        # The Jira search also takes started events (a person who moved the issue is told
        # why) and held ones that can still start (told it is held, why, the ways out).
        open=expected in (None, Blocker.STARTED) or (state, situation) == ("held", "present"),
        page=(page_status, offered),
        # Instead of Approve: the approval waits for or is held by the prepare hooks, and the
        # event can still start on it.
        anyway=(anyway_offered, anyway_offered),
    )


# -- held and waiting, end to end: what people are shown -----------------------------------


class QuietHandler(WSGIRequestHandler):
    def log_message(self, format: str, *args: Any) -> None:
        pass


@pytest.mark.parametrize(
    ("gate", "state", "said"),
    [
        (
            GateAnswer(hold="drain failed on vm0 (exit 1)"),
            "held",
            "Held, not approved: drain failed on vm0",
        ),
        (GateAnswer(wait="vm0 is preparing (drain)"), "waiting", "not sent to Azure yet"),
    ],
)
def test_an_approval_held_or_waiting_is_offered_nowhere(
    store_url: str, sim: Simulator, gate: GateAnswer, state: str, said: str
) -> None:
    """Slack's message loses its Approve button, the Teams card of the next change carries no
    link, and the link's page shows the approval instead of an Approve button."""
    now = datetime.now(UTC).replace(microsecond=0)
    signer = LinkSigner("a-key-for-the-held-event")
    event = ScheduledEvent(
        "E1", "Redeploy", "Scheduled", ("vm0",), not_before=now + timedelta(hours=1)
    )
    moved = replace(event, not_before=event.not_before + timedelta(minutes=10))
    with SlackRig() as slack, TeamsRig() as teams, contextlib.ExitStack() as stack:
        store = Store(store_url, agent="vm0")
        stack.callback(store.close)
        imds = ImdsClient(sim.url, timeout=2.0)
        stack.callback(imds.close)
        sinks = {"slack": slack.sink(), "teams": teams.sink()}
        dispatcher = Dispatcher(
            store,
            sinks,
            vm_name=lambda: "vm0",
            approve_url=lambda e: f"{LINK}{signer.token_for(e)}",
        )

        def deliver() -> None:
            for name in sinks:
                dispatcher.deliver_due(name)

        approvals, carrier = assemble(
            store,
            imds,
            lambda action: list(sinks),
            carries=True,
            dry_run=False,
            gate=lambda r: gate,
        )
        assert carrier is not None
        carrier.start()  # carries the approval out on its thread, as the daemon's does
        stack.callback(carrier.stop, 5.0)
        before = Document(1, (event,))
        store.documents.apply(
            before, [(Transition(TransitionKind.SCHEDULED, event, now), list(sinks))], now
        )
        deliver()
        (parent,) = slack.fake.messages.values()
        assert "approve" in buttons(parent)  # offered while nobody approved it
        assert "Approve…" in card_of(teams.fake.posts[-1].body)

        outcome = approvals.request(ApprovalRequest("E1", "alice", "slack"), wait=5.0)
        assert outcome.approval is not None and outcome.approval.state == state
        after = Document(2, (moved,))
        store.documents.apply(after, [(t, list(sinks)) for t in diff(before, after, now)], now)
        deliver()

        (parent,) = slack.fake.messages.values()
        assert "approve" not in buttons(parent)
        assert buttons(parent) == ["approve_anyway"]  # instead: anyway, behind a confirm dialog
        (anyway,) = (
            e for b in parent.blocks or () for e in b.get("elements", ()) if "confirm" in e
        )
        assert anyway["confirm"]["title"]["text"] == "Approve anyway?"
        # (no readiness rows here: the gate is a stand-in)
        said_first = anyway["confirm"]["text"]["text"]
        assert (
            said_first
            == "Not ready: prepare hooks. Let the Redeploy start now anyway? (event `E1`)"
        )
        card = card_of(teams.fake.posts[-1].body)
        assert "Changed: not before" in card  # the full card: it offers the link while approvable
        assert "Approve…" not in card
        if state == "held":  # the page's link instead: its ways out and Approve anyway
            assert re.search(f'"title": "Open the approval page…", "url": "{LINK}', card)
        else:
            assert LINK not in card
        server = make_server(
            "127.0.0.1",
            0,
            ApprovalPage(signer, Host(approvals), Renderer()),
            handler_class=QuietHandler,
        )
        stack.callback(server.server_close)
        threading.Thread(target=server.serve_forever, name="page", daemon=True).start()
        stack.callback(server.shutdown)
        page = requests.get(
            f"http://127.0.0.1:{server.server_port}{PREFIX}{signer.token_for(moved)}", timeout=10
        )
    assert page.status_code == 200
    assert APPROVE_BUTTON not in page.text
    assert ANYWAY_FIELD in page.text  # Approve anyway instead (confirmed by a second POST)
    assert said in page.text
    assert sim.start_requests == []


def card_of(body: Any) -> str:
    """A card Teams received, as its text."""
    return json.dumps(body, ensure_ascii=False)


def buttons(message: FakeMessage) -> list[str]:
    """The action ids of a Slack message's buttons, as people see it now."""
    return [
        e.get("action_id", "")
        for b in message.blocks or ()
        if b.get("type") == "actions"
        for e in b.get("elements", ())
    ]

"""The Teams sink against the fake Workflows webhook and fake connector, over real sockets,
through requests (adaptive) and pymsteams (messagecard) as production uses them."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime, timedelta

import pytest

from fakes.teams import FakeTeams
from helpers import free_port
from sebridge.integrations.render import Renderer
from sebridge.integrations.teams.card import MAX_PAYLOAD
from sebridge.integrations.teams.sink import TeamsSink
from sebridge.kernel.errors import PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import ScheduledEvent, Transition
from sebridge.model.leads import REMIND, Lead
from sebridge.model.message import Message

NOW = datetime(2026, 11, 23, 14, 0, tzinfo=UTC)
LINK = "https://vm0.example.net/approve/abc.def"
pytestmark = pytest.mark.usefixtures("no_proxy")


def event(**changes: object) -> ScheduledEvent:
    fields: dict[str, object] = {
        "event_id": "C7061BAC-AFDC-4513-B24B-AA5F13A16123",
        "event_type": "Redeploy",
        "status": "Scheduled",
        "resources": ("vm1", "vm0"),
        "not_before": NOW + timedelta(minutes=14, seconds=10),
        "description": "Host update",
        "source": "Platform",
        "duration_seconds": 300,
    }
    fields.update(changes)
    return ScheduledEvent(**fields)  # type: ignore[arg-type]


def message(kind: str = "scheduled", e: ScheduledEvent | None = None, **more: object) -> Message:
    t = Transition(
        kind, e or event(), NOW, actor=more.pop("actor", None), via=more.pop("via", None)
    )  # type: ignore[arg-type]
    return Message(t, "vm0", str(more.pop("policy", "ask")), **more)  # type: ignore[arg-type]


def sink(url: str, fmt: str = "adaptive") -> TeamsSink:
    return TeamsSink(url, Renderer(), format=fmt, timeout=5, clock=lambda: NOW)


def texts(card: dict[str, object]) -> str:
    return json.dumps(card, ensure_ascii=False)


# ------------------------------------------------------------------ adaptive through Workflows


def test_an_inform_card_offers_no_approval(teams: FakeTeams) -> None:
    sink(teams.workflows_url).send(message(approve_url=LINK, policy="inform"))
    (shown,) = teams.wait_shown(1)
    assert "inform only (no approval asked; Azure starts it at NotBefore)" in texts(shown.card)
    assert "Approve" not in json.dumps(shown.card.get("actions", []))


def test_the_first_card_shows_the_event_and_the_approve_link(teams: FakeTeams) -> None:
    s = sink(teams.workflows_url)
    assert s.send(message(approve_url=LINK)) is None
    (post,) = teams.posts
    assert post.status == 202
    assert post.body["type"] == "message"
    (attachment,) = post.body["attachments"]
    assert attachment["contentType"] == "application/vnd.microsoft.card.adaptive"
    (shown,) = teams.wait_shown(1)
    card = shown.card
    assert card["type"] == "AdaptiveCard" and card["version"] == "1.5"
    title = card["body"][0]["text"]
    # The event's VMs in IMDS's order; the Resources fact marks this VM.
    assert title == "🚚 **Redeploy** of vm1, vm0"
    facts = {f["title"]: f["value"] for f in card["body"][1]["facts"]}
    assert facts["Not before"] == "2026-11-23 14:14:10 UTC (in 14 min)"
    assert facts["Duration"] == "5 min" and facts["Source"] == "Platform"
    assert "Host update" in texts(card)
    assert "waiting for a person to approve" in texts(card)
    assert card["actions"] == [
        {"type": "Action.OpenUrl", "title": "Approve…", "url": LINK, "style": "positive"}
    ]
    s.close()


def test_no_link_no_button(teams: FakeTeams) -> None:
    s = sink(teams.workflows_url)
    s.send(message())
    s.send(message(approve_url=LINK, approved_by="alice"))  # approved meanwhile: not approvable
    for shown in teams.wait_shown(2):
        assert "actions" not in shown.card
    s.close()


@pytest.mark.parametrize(
    ("kind", "more", "says"),
    [
        (
            "approved",
            {"actor": "approval link (Alice)", "via": "link"},
            "✅ **Approved** by Alice via approval link",
        ),
        ("started", {"approved_by": "alice"}, "▶️ **Started** (approved by alice)"),
        ("completed", {}, "🏁 **Completed**"),
        ("cancelled", {}, "🚫 **Cancelled** before it started"),
    ],
)
def test_later_transitions_post_a_follow_up_naming_the_event(
    teams: FakeTeams, kind: str, more: dict[str, str], says: str
) -> None:
    s = sink(teams.workflows_url)
    s.send(message(kind, **more))
    (shown,) = teams.wait_shown(1)
    body = shown.card["body"]
    assert body[0]["text"] == says
    assert "C7061BAC-AFDC-4513-B24B-AA5F13A16123" in body[1]["text"]
    assert "Redeploy of vm1, vm0" in body[1]["text"]
    assert "actions" not in shown.card
    s.close()


def test_imds_text_is_escaped_for_teams_markdown(teams: FakeTeams) -> None:
    s = sink(teams.workflows_url)
    s.send(
        message(
            e=event(description="**all** [hosts](http://evil) _now_\n- item", resources=("vm_*0*",))
        )
    )
    (shown,) = teams.wait_shown(1)
    text = texts(shown.card)
    assert r"\\*\\*all\\*\\* \\[hosts\\](http://evil) \\_now\\_\n\\- item" in text
    assert r"vm\\_\\*0\\*" in text
    s.close()


def test_a_huge_description_is_cut_to_stay_under_28_kb(teams: FakeTeams) -> None:
    s = sink(teams.workflows_url)
    huge = event(description="x" * 100_000, resources=tuple(f"vm{i}" for i in range(2000)))
    s.send(message(e=huge, approve_url=LINK))
    (post,) = teams.posts
    assert post.size <= MAX_PAYLOAD
    (shown,) = teams.wait_shown(1)  # the flow posted it: it fits
    assert "…" in texts(shown.card) and "more" in texts(shown.card)
    assert shown.card["actions"][0]["url"] == LINK
    s.close()


# ------------------------------------------------------------------ MessageCard through pymsteams


def test_messagecard_to_a_connector(teams: FakeTeams) -> None:
    s = sink(teams.connector_url, "messagecard")
    s.send(message(approve_url=LINK))
    s.send(message("approved", actor="alice", via="slack"))
    first, followup = teams.wait_shown(2)
    assert [p.status for p in teams.posts] == [200, 200]
    assert first.kind == "messagecard"
    assert first.card["title"] == "🚚 **Redeploy** of vm1, vm0"
    assert first.card["potentialAction"] == [
        {"@type": "OpenUri", "name": "Approve…", "targets": [{"os": "default", "uri": LINK}]}
    ]
    facts = {f["name"]: f["value"] for f in first.card["sections"][0]["facts"]}
    assert facts["Not before"] == "2026-11-23 14:14:10 UTC (in 14 min)"
    assert followup.card["title"] == "✅ **Approved** by alice via slack"
    assert "potentialAction" not in followup.card
    s.close()


def test_a_messagecard_without_summary_or_text_is_refused_for_good(
    teams: FakeTeams, tmp_path: object
) -> None:
    from pathlib import Path

    folder = Path(str(tmp_path)) / "teams"
    folder.mkdir()
    (folder / "messagecard.j2").write_text('{"title": "", "summary": "", "text": "", "facts": []}')
    s = TeamsSink(
        teams.connector_url, Renderer(folder.parent), format="messagecard", clock=lambda: NOW
    )
    with pytest.raises(PermanentDeliveryError, match="Summary or Text is required") as caught:
        s.send(message())
    assert "fix the teams/ templates" in str(caught.value)
    assert teams.shown == []
    s.close()


def test_a_connector_that_says_200_without_posting(teams: FakeTeams) -> None:
    s = sink(teams.connector_url, "messagecard")
    teams.fail_next(
        200,
        "Webhook message delivery failed with error: Microsoft Teams endpoint returned HTTP error 429",
    )
    with pytest.raises(RetryableDeliveryError, match="throttled"):
        s.send(message())
    s.close()


# ------------------------------------------------------------------ failures


@pytest.mark.parametrize("fmt", ["adaptive", "messagecard"])
@pytest.mark.parametrize(
    ("status", "body", "retry_after", "expected", "says"),
    [
        (429, "", 7, RetryableDeliveryError, "throttled by Teams (429), retry after 7s"),
        (503, "<html>down</html>", None, RetryableDeliveryError, "Teams failed (HTTP 503)"),
        (502, "", None, RetryableDeliveryError, "Teams failed (HTTP 502)"),
        (
            400,
            '{"error":{"code":"InvalidRequestContent"}}',
            None,
            PermanentDeliveryError,
            "fix the teams/ templates",
        ),
        (401, "", None, PermanentDeliveryError, "copy the URL again"),
        (403, "", None, PermanentDeliveryError, "not allowed to post"),
        (404, "", None, PermanentDeliveryError, "create it again and update teams.webhook_url"),
        (
            413,
            "",
            None,
            PermanentDeliveryError,
            "too large for Teams (HTTP 413): shorten the teams/ templates",
        ),
        (418, "teapot", None, PermanentDeliveryError, "answered HTTP 418: teapot"),
    ],
)
def test_answers_are_classified_with_what_to_fix(
    teams: FakeTeams,
    fmt: str,
    status: int,
    body: str,
    retry_after: float | None,
    expected: type[Exception],
    says: str,
) -> None:
    url = teams.workflows_url if fmt == "adaptive" else teams.connector_url
    s = sink(url, fmt)
    teams.fail_next(status, body, retry_after=retry_after)
    with pytest.raises(expected) as caught:
        s.send(message(approve_url=LINK))
    assert says in str(caught.value)
    if retry_after is not None:
        assert (
            isinstance(caught.value, RetryableDeliveryError)
            and caught.value.retry_after == retry_after
        )
    assert teams.sig not in str(caught.value) and teams.connector not in str(caught.value)
    assert teams.shown == []
    s.close()


def test_a_wrong_signature_and_a_deleted_workflow(teams: FakeTeams) -> None:
    wrong = sink(teams.workflows_url.replace(teams.sig, "forged"))
    with pytest.raises(PermanentDeliveryError, match="HTTP 401") as caught:
        wrong.send(message())
    assert "DirectApiInvalidAuthorizationSignature" in str(caught.value)
    assert "forged" not in str(caught.value)
    teams.deleted = True
    with pytest.raises(PermanentDeliveryError, match="HTTP 404"):
        sink(teams.workflows_url).send(message())
    wrong.close()


def test_an_echoed_url_is_scrubbed(teams: FakeTeams) -> None:
    s = sink(teams.workflows_url)
    teams.fail_next(400, f"bad request to {teams.workflows_url}")
    with pytest.raises(PermanentDeliveryError) as caught:
        s.send(message())
    assert teams.sig not in str(caught.value) and teams.workflow not in str(caught.value)
    s.close()


@pytest.mark.parametrize("fmt", ["adaptive", "messagecard"])
def test_unreachable_is_retried_and_names_no_url(fmt: str) -> None:
    port = free_port()
    url = f"http://127.0.0.1:{port}/workflows/abc/triggers/manual/paths/invoke?sig=SECRETSIG"
    s = sink(url, fmt)
    with pytest.raises(RetryableDeliveryError, match="cannot reach the webhook") as caught:
        s.send(message())
    assert "SECRETSIG" not in str(caught.value) and str(port) not in str(caught.value)
    s.close()


def test_the_url_never_reaches_the_logs(teams: FakeTeams, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    s = sink(teams.workflows_url)
    s.send(message())
    teams.fail_next(500)
    with pytest.raises(RetryableDeliveryError):
        s.send(message())
    assert any("POST" in r.getMessage() for r in caplog.records)  # urllib3 did log the request
    assert teams.sig not in caplog.text and teams.workflow not in caplog.text
    s.close()


def test_proxy_variables_are_honoured(teams: FakeTeams, monkeypatch: pytest.MonkeyPatch) -> None:
    """The fake answers as the proxy too: a request for an unresolvable host reaches it."""
    monkeypatch.setenv("HTTP_PROXY", teams.base)
    url = teams.workflows_url.replace(teams.base, "http://teams.invalid")
    s = sink(url)
    s.send(message())
    assert [p.status for p in teams.posts] == [202]
    s.close()


@pytest.mark.parametrize("fmt", ["adaptive", "messagecard"])
def test_the_first_card_names_the_reminders_its_notice_can_never_reach(
    teams: FakeTeams, fmt: str
) -> None:
    """14 min 10 s of notice: a 900 s `remind` can never come (a 600 s one can)."""
    url = teams.workflows_url if fmt == "adaptive" else teams.connector_url
    first = Transition("scheduled", event(), NOW, unreachable=(Lead(REMIND, 900),))
    sink(url, fmt).send(Message(first, "vm0", "ask"))
    said = json.dumps(teams.posts[0].body, ensure_ascii=False)
    assert "Reminders that can never come (NotBefore is 850 s after it was first announced)" in said
    assert "900 s before NotBefore" in said
    later = Transition("reminder", event(), NOW, remind_before=600)
    sink(url, fmt).send(Message(later, "vm0", "ask"))
    assert "can never come" not in json.dumps(teams.posts[1].body, ensure_ascii=False)

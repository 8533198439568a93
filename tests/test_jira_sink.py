"""The Jira sink through the real jira library against the fake Jira, Cloud and Data Center."""

from __future__ import annotations

import http.client
import http.server
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

import pytest

from fakes.jira import FakeJira
from sebridge.config.secrets import Secret
from sebridge.integrations.jira.client import JiraApi
from sebridge.integrations.jira.limits import fit
from sebridge.integrations.jira.settings import JiraSettings
from sebridge.integrations.jira.sink import JiraSink
from sebridge.integrations.render import Renderer
from sebridge.kernel.errors import PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import Receipt, ScheduledEvent, Transition
from sebridge.model.leads import REMIND, REMIND_AFTER, Lead
from sebridge.model.message import Message

EVENT_ID = "C7061BAC-AFDC-4513-B24B-AA5F13A16123"
NOT_BEFORE = datetime(2026, 11, 23, 22, 26, 58, tzinfo=UTC)
# Transitions of this process (after every sink's start): older ones may have been tried before.
NOW = datetime.now(UTC) + timedelta(hours=1)


pytestmark = pytest.mark.usefixtures("no_proxy")


@pytest.fixture(params=["cloud", "datacenter"])
def jira(request: pytest.FixtureRequest) -> Iterator[FakeJira]:
    with FakeJira(request.param, index_lag=0.3) as fake:
        yield fake


def settings_for(fake: FakeJira, **more: Any) -> JiraSettings:
    auth: dict[str, Any] = (
        {"email": fake.email, "api_token": Secret(fake.token)}
        if fake.flavour == "cloud"
        else {"pat": Secret(fake.pat)}
    )
    return JiraSettings(**{"url": fake.url, "project": "OPS", **auth, **more})


def make_sink(fake: FakeJira, templates: Path | None = None, **more: Any) -> JiraSink:
    return JiraSink(
        JiraApi(settings_for(fake, **more)),
        Renderer(templates),
        lag_waits=(0.2, 0.2, 0.2, 0.2, 0.2),
    )


def event(**more: Any) -> ScheduledEvent:
    fields: dict[str, Any] = dict(
        resources=("vm2", "vm0"),
        not_before=NOT_BEFORE,
        description="Host [update] {x}",
        source="Platform",
        duration_seconds=600,
    )
    fields.update(more)
    return ScheduledEvent(EVENT_ID, "Reboot", "Scheduled", **fields)


def message(kind: str, receipt: Receipt | None = None, attempt: int = 0, **more: Any) -> Message:
    at = more.pop("at", NOW + timedelta(seconds=len(kind)))
    t = Transition(
        kind, more.pop("ev", event()), at, more.pop("changes", ()), *more.pop("who", (None, None))
    )
    policy = more.pop("policy", "ask")
    return Message(t, "vm0", policy, receipt=receipt, attempt=attempt, **more)


def test_scheduled_creates_one_labelled_issue(jira: FakeJira) -> None:
    sink = make_sink(jira, approve_status="Approved")
    url = "https://vm0.example.net/approve/t0k3n"
    receipt = sink.send(message("scheduled", approve_url=url))

    (issue,) = jira.issues.values()
    assert receipt == Receipt(issue["key"], {"key": issue["key"]})
    assert issue["project"] == "OPS" and issue["type"] == "Task"
    assert issue["labels"] == ["sebridge", "sebridge-" + EVENT_ID.lower()]
    # The event's VMs (it lists vm2, vm0), not only the delivering agent's vm0.
    assert issue["summary"] == f"Reboot of vm2, vm0 not before 2026-11-23 22:26:58 UTC ({EVENT_ID})"
    text = issue["description"]
    for line in (
        "Event type: Reboot",
        "Resources: vm0 (this VM), vm2",
        "NotBefore (UTC): 2026-11-23 22:26:58 UTC",
        r"Description: Host \[update\] \{x\}",  # wiki markup escaped
        "Source: Platform",
        "Duration: 10 min",
        'by moving this issue to "Approved"',
        f"Approve it now: {url}",
    ):
        assert line in text, text
    # One search by label, one create; once per process the done transition's id (and
    # the library's serverInfo and field list).
    per_event = [(c.method, c.path) for c in jira.calls[2:]]
    search = "search/jql" if jira.flavour == "cloud" else "search"
    key = issue["key"]
    assert per_event == [("GET", search), ("POST", "issue"), ("GET", f"issue/{key}/transitions")]
    sink.send(message("scheduled", ev=replace(event(), event_id="E2")))
    assert [(c.method, c.path) for c in jira.calls[5:]] == [("GET", search), ("POST", "issue")]
    assert [(c.method, c.path) for c in jira.calls[:2]] == [("GET", "serverInfo"), ("GET", "field")]


def test_an_inform_event_offers_no_approval(jira: FakeJira) -> None:
    sink = make_sink(jira, approve_status="Approved")
    sink.send(
        message("scheduled", approve_url="https://vm0.example.net/approve/t0k3n", policy="inform")
    )
    (issue,) = jira.issues.values()
    assert "For information (policy): nobody is asked to approve" in issue["description"]
    assert "Approve it now" not in issue["description"]
    assert "moving this issue" not in issue["description"]


def test_no_approval_link_without_one(jira: FakeJira) -> None:
    make_sink(jira).send(message("scheduled"))
    (issue,) = jira.issues.values()
    assert "Approve it now" not in issue["description"]
    assert "moving this issue" not in issue["description"]


def test_lifecycle_comments_then_done(jira: FakeJira) -> None:
    sink = make_sink(jira)
    receipt = sink.send(message("scheduled"))
    moved = event(not_before=NOT_BEFORE + timedelta(hours=1))
    assert sink.send(message("changed", receipt, ev=moved, changes=("not_before",))) == receipt
    sink.send(message("approved", receipt, who=("Alice Example", "jira")))
    sink.send(message("started", receipt, approved_by="Alice Example"))
    before = len(jira.calls)
    sink.send(message("completed", receipt))
    # The comment, then the transition whose id was learnt when the issue was created.
    assert [(c.method, c.path.split("/")[-1]) for c in jira.calls[before:]] == [
        ("POST", "comment"),
        ("POST", "transitions"),
    ]

    key = receipt.external_id if receipt else ""
    comments = jira.comments(key)
    assert [c.splitlines()[0] for c in comments] == [
        "Changed:",
        "Approved by Alice Example via jira: StartRequests sent to Azure, the event may start now.",
        "Started (approved by Alice Example).",
        "Completed: the event is over and gone from the schedule.",
    ]
    assert "NotBefore (UTC) is now 2026-11-23 23:26:58 UTC" in comments[0]
    assert jira.issues[key]["status"] == "Done"
    assert len(jira.issues) == 1


def test_503_on_create_then_exactly_one_issue(jira: FakeJira) -> None:
    sink = make_sink(jira)
    jira.fail("POST", "issue", 503, headers={"Retry-After": "7"})
    with pytest.raises(RetryableDeliveryError) as info:
        sink.send(message("scheduled"))
    assert info.value.retry_after == 7.0
    assert jira.issues == {}
    sink.send(message("scheduled", attempt=1))
    assert len(jira.issues_of(EVENT_ID)) == 1


@pytest.mark.parametrize("how", ["503", "drop"])
def test_lost_answer_on_create_is_adopted_not_repeated(jira: FakeJira, how: str) -> None:
    """The create landed but its answer was lost; Cloud's search sees it only later."""
    sink = make_sink(jira)
    jira.fail("POST", "issue", 503, after=True, drop=how == "drop")
    with pytest.raises(RetryableDeliveryError):
        sink.send(message("scheduled"))
    assert len(jira.issues) == 1
    receipt = sink.send(message("scheduled", attempt=1))
    (issue,) = jira.issues_of(EVENT_ID)
    assert receipt is not None and receipt.external_id == issue["key"]
    assert len(jira.calls_to("POST", "issue")) == 1


def test_transition_of_a_previous_process_waits_for_the_index(jira: FakeJira) -> None:
    """A process died between create and commit; its successor must not create again.
    The dispatcher recorded the attempt as begun, so the next one comes with attempt 1."""
    earlier = datetime.now(UTC) - timedelta(seconds=5)
    with pytest.raises(RetryableDeliveryError):
        jira.fail("POST", "issue", 503, after=True)
        make_sink(jira).send(message("scheduled", at=earlier))
    receipt = make_sink(jira).send(message("scheduled", at=earlier, attempt=1))
    (issue,) = jira.issues.values()
    assert receipt is not None and receipt.external_id == issue["key"]


def test_lost_store_adopts_the_existing_issue(jira: FakeJira) -> None:
    make_sink(jira).send(message("scheduled"))
    jira.index_lag = 0.0
    receipt = make_sink(jira).send(message("scheduled"))  # a fresh store sees it "scheduled" again
    (issue,) = jira.issues.values()
    assert receipt is not None and receipt.external_id == issue["key"]


def test_first_delivery_of_a_later_transition_creates_then_comments(jira: FakeJira) -> None:
    receipt = make_sink(jira).send(message("approved", who=("bob", "cli")))
    (issue,) = jira.issues.values()
    assert receipt is not None and receipt.external_id == issue["key"]
    assert jira.comments(issue["key"])[0].startswith("Approved by bob via cli")


def test_lost_comment_answer_is_not_repeated(jira: FakeJira) -> None:
    sink = make_sink(jira)
    receipt = sink.send(message("scheduled"))
    jira.fail("POST", "/comment", 502, after=True)
    with pytest.raises(RetryableDeliveryError):
        sink.send(message("started", receipt))
    sink.send(message("started", receipt, attempt=1))
    key = receipt.external_id if receipt else ""
    assert len(jira.comments(key)) == 1


def test_missing_transition_is_one_permanent_error_and_the_comment_lands(jira: FakeJira) -> None:
    sink = make_sink(jira, done_transition="Resolve")
    receipt = sink.send(message("scheduled"))
    with pytest.raises(PermanentDeliveryError) as info:
        sink.send(message("cancelled", receipt))
    text = str(info.value)
    assert 'transition "Resolve" is not available from its status "To Do"' in text
    assert '"Start Progress", "Approve", "Done"' in text and "jira.done_transition" in text
    key = receipt.external_id if receipt else ""
    with pytest.raises(PermanentDeliveryError):
        sink.send(message("cancelled", receipt, attempt=1))
    assert [c.splitlines()[0] for c in jira.comments(key)] == [
        "Cancelled: gone from the schedule before it started."
    ]
    assert jira.issues[key]["status"] == "To Do"


def test_done_transition_id_is_looked_up_again_from_another_status(jira: FakeJira) -> None:
    """Most workflows reach Done by one id from every status; this one does not."""
    jira.workflow["Approved"] = [("41", "Close", "Done")]
    sink = make_sink(jira)
    first = sink.send(message("scheduled"))
    assert first is not None
    sink.send(message("completed", first))  # 31, learnt when the first issue was created
    assert jira.issues[first.external_id]["status"] == "Done"
    event2 = event(resources=("vm0",))
    second = sink.send(message("scheduled", ev=replace(event2, event_id="E2")))
    assert second is not None
    jira.move(second.external_id, "Approved")
    before = len(jira.calls)
    sink.send(message("completed", second, ev=replace(event2, event_id="E2")))
    assert jira.issues[second.external_id]["status"] == "Done"
    # comment, transition 31 (refused from Approved), read, transition 41
    assert [(c.method, c.path.split("/")[-1]) for c in jira.calls[before:]] == [
        ("POST", "comment"),
        ("POST", "transitions"),
        ("GET", second.external_id),
        ("POST", "transitions"),
    ]
    assert len(jira.comments(second.external_id)) == 1


def test_issue_closed_by_a_person_gets_the_comment_only(jira: FakeJira) -> None:
    sink = make_sink(jira)
    receipt = sink.send(message("scheduled"))
    key = receipt.external_id if receipt else ""
    jira.move(key, "Done")
    sink.send(message("completed", receipt))
    assert len(jira.comments(key)) == 1


def test_bad_credentials_are_permanent_and_never_quoted(jira: FakeJira) -> None:
    wrong = "wrong-" + (jira.token if jira.flavour == "cloud" else jira.pat)
    field = "api_token" if jira.flavour == "cloud" else "pat"
    sink = make_sink(jira, **{field: Secret(wrong)})
    with pytest.raises(PermanentDeliveryError) as info:
        sink.send(message("scheduled"))
    text = str(info.value)
    assert "Jira refused the credentials (401)" in text and "jira.api_token" in text
    assert wrong not in text and "Authorization" not in text and "Basic" not in text


@pytest.mark.parametrize(
    ("more", "expected"),
    [
        ({"issue_type": "Epic"}, "(400) (issuetype: Specify a valid issue type)"),
        ({"project": "NOPE"}, "(400) (The value 'NOPE' does not exist for the field 'project'.)"),
    ],
)
def test_unknown_project_or_issue_type_says_what_to_fix(
    jira: FakeJira, more: dict[str, str], expected: str
) -> None:
    with pytest.raises(PermanentDeliveryError) as info:
        make_sink(jira, **more).send(message("scheduled"))
    assert expected in str(info.value) and "jira.issue_type" in str(info.value)


@pytest.mark.parametrize(("status", "wait"), [(429, 30.0), (503, 1.0), (500, None)])
def test_throttling_and_outages_are_retried(
    jira: FakeJira, status: int, wait: float | None
) -> None:
    sink = make_sink(jira)
    headers = {"Retry-After": "30"} if status == 429 else {}
    jira.fail("POST", "issue", status, headers=headers)
    with pytest.raises(RetryableDeliveryError) as info:
        sink.send(message("scheduled"))
    assert info.value.retry_after == wait


def test_unreachable_jira_is_retried(jira: FakeJira) -> None:
    settings = settings_for(jira, url="http://127.0.0.1:9")
    sink = JiraSink(JiraApi(settings, timeout=(2.0, 2.0)), Renderer())
    with pytest.raises(RetryableDeliveryError) as info:
        sink.send(message("scheduled"))
    assert "cannot reach Jira" in str(info.value)


def test_broken_template_is_permanent(jira: FakeJira, tmp_path: Path) -> None:
    (tmp_path / "jira").mkdir()
    (tmp_path / "jira" / "comment.j2").write_text("{% if %}", encoding="utf-8")
    sink = make_sink(jira, templates=tmp_path)
    with pytest.raises(PermanentDeliveryError) as info:
        sink.check_templates()
    assert "jira/comment.j2 is broken" in str(info.value)


class _Proxy(http.server.BaseHTTPRequestHandler):
    """A forward HTTP proxy that records the absolute URLs it is asked for."""

    seen: list[str]

    def log_message(self, format: str, *args: Any) -> None:
        pass

    def _forward(self) -> None:
        self.seen.append(self.path)
        url = urlsplit(self.path)
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else None
        conn = http.client.HTTPConnection(url.hostname or "", url.port, timeout=10)
        headers = {k: v for k, v in self.headers.items() if k.lower() != "proxy-connection"}
        conn.request(self.command, url.path + (f"?{url.query}" if url.query else ""), body, headers)
        answer = conn.getresponse()
        data = answer.read()
        self.send_response(answer.status)
        for key, value in answer.getheaders():
            if key.lower() not in ("transfer-encoding", "connection", "content-length"):
                self.send_header(key, value)
        self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)
        conn.close()

    do_GET = do_POST = _forward


@pytest.mark.parametrize("bypass", [False, True])
def test_proxy_variables_are_honoured(
    jira: FakeJira, monkeypatch: pytest.MonkeyPatch, bypass: bool
) -> None:
    handler = type("Proxy", (_Proxy,), {"seen": []})
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, args=(0.05,))
    thread.start()
    try:
        monkeypatch.setenv("HTTP_PROXY", f"http://127.0.0.1:{server.server_address[1]}")
        monkeypatch.setenv("NO_PROXY", "127.0.0.1" if bypass else "")
        make_sink(jira).send(message("scheduled"))
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)
    assert len(jira.issues) == 1
    if bypass:
        assert handler.seen == []
    else:
        assert f"{jira.url}/rest/api/2/issue" in handler.seen


def test_a_hanging_jira_times_out_and_is_retried(jira: FakeJira) -> None:
    release = threading.Event()
    jira.fail("POST", "issue", 201, after=True, hold=release)
    sink = JiraSink(JiraApi(settings_for(jira), timeout=(2.0, 0.5)), Renderer(), lag_waits=(0.5,))
    try:
        with pytest.raises(RetryableDeliveryError) as info:
            sink.send(message("scheduled"))
    finally:
        release.set()
    assert f"cannot reach Jira at {jira.url}: timed out" in str(info.value)
    assert info.value.key == "jira.url"
    sink.send(message("scheduled", attempt=1))  # the create had landed: adopted
    assert len(jira.issues) == 1


def test_missing_permission_says_which(jira: FakeJira) -> None:
    jira.fail("POST", "issue", 403)
    with pytest.raises(PermanentDeliveryError) as info:
        make_sink(jira).send(message("scheduled"))
    text = str(info.value)
    assert "the Jira account lacks a permission (403)" in text and "Create issues" in text


def test_deleted_issue_is_a_permanent_error_naming_it(jira: FakeJira) -> None:
    sink = make_sink(jira)
    receipt = sink.send(message("scheduled"))
    assert receipt is not None
    del jira.issues[receipt.external_id]
    with pytest.raises(PermanentDeliveryError) as info:
        sink.send(message("started", receipt))
    assert f"cannot comment on {receipt.external_id}: not found (404)" in str(info.value)
    assert "Issue does not exist" in str(info.value)


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("short", 255, "short"),
        ("x" * 255, 255, "x" * 255),
        ("x" * 256, 255, "x" * 254 + "…"),
        ("😀" * 5, 10, "😀" * 5),  # two UTF-16 code units each: exactly 10
        ("😀" * 6, 10, "😀" * 4 + "…"),  # the pair cut in half goes whole
        ("a" + "😀" * 6, 10, "a" + "😀" * 4 + "…"),
    ],
)
def test_texts_are_fitted_as_jira_counts_them(text: str, limit: int, expected: str) -> None:
    assert fit(text, limit) == expected
    assert len(expected.encode("utf-16-le")) // 2 <= limit


def test_the_issue_names_the_reminders_its_notice_can_never_reach(jira: FakeJira) -> None:
    sink = make_sink(jira)
    missed = (Lead(REMIND, 10**8), Lead(REMIND_AFTER, 10**8))
    first = Transition("scheduled", event(), NOW, unreachable=missed)
    sink.send(Message(first, "vm0", "ask"))
    (issue,) = jira.issues.values()
    assert "\nReminders that can never come (" in issue["description"]
    assert (
        "100000000 s before NotBefore; 100000000 s after it was first announced"
        in issue["description"]
    )

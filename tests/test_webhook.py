"""The signed webhook ([webhook]): Standard Webhooks signatures a receiver verifies, one
webhook-id per transition across retries, the shared status mapping through the store, the
default body (the JSON line's public form, versioned), templates (PagerDuty's Events API v2
and a chat webhook, as deploy/webhook/ ships them), its config, check and --send-test."""

from __future__ import annotations

import contextlib
import io
import json
import re
import urllib.request
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from fakes.webhook import FakeWebhook
from helpers import run_cli, toml_str, write_config
from pages import section as page_section
from rigs.base import assert_displayable, registered, strings
from rigs.webhook import new_key
from sebridge.cli.main import main
from sebridge.config.masked import secret_values
from sebridge.engine.dispatch import Dispatcher
from sebridge.imds.simulator import Simulator
from sebridge.integrations.jsonl.sink import record
from sebridge.integrations.registry import config_from_mapping, context
from sebridge.integrations.render import Renderer
from sebridge.integrations.webhook import Webhook
from sebridge.kernel.errors import ConfigError, PermanentDeliveryError
from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message, Sink, shown
from sebridge.store import Store

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy" / "webhook"
T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
ROUTING_KEY = "R0123456789abcdef0123456789abcde"  # 32 characters, as PagerDuty's are
WEBHOOK = registered(Webhook)


class Clock:
    def __init__(self) -> None:
        self.now = T0

    def __call__(self) -> datetime:
        return self.now


@pytest.fixture
def hook() -> Iterator[FakeWebhook]:
    """A receiver that verifies every delivery with the `key` fixture's key."""
    with FakeWebhook(keys=[KEY]) as fake:
        yield fake


KEY = new_key()


def build(section: dict[str, Any]) -> Sink:
    config = config_from_mapping({"webhook": section}, environ={})
    sink = WEBHOOK.sink(context(WEBHOOK, config, Renderer()))
    assert sink is not None
    return sink


def event(event_id: str = "E1", description: str = "Host maintenance") -> ScheduledEvent:
    return ScheduledEvent(
        event_id,
        "Reboot",
        "Scheduled",
        ("web1", "web2"),
        not_before=T0 + timedelta(minutes=15),
        description=description,
        source="Platform",
    )


def message(kind: str = TransitionKind.SCHEDULED, policy: str = "ask", **more: Any) -> Message:
    t = Transition(kind, more.pop("e", None) or event(), T0, actor=more.pop("actor", None))
    return Message(t, "web1", policy, transition_id=more.pop("tid", 7), **more)


def template(tmp_path: Path, text: str) -> str:
    path = tmp_path / "body.json.j2"
    path.write_text(text, encoding="utf-8")
    return str(path)


# -- signatures ------------------------------------------------------------------------------


def test_every_delivery_verifies_and_a_tampered_one_is_refused(hook: FakeWebhook) -> None:
    build({"url": hook.url, "secret": KEY}).send(message())
    (taken,) = hook.posts
    assert taken.status == 204  # the standardwebhooks verifier accepted it
    assert re.fullmatch(r"msg_[0-9a-f]{32}", taken.headers["webhook-id"])
    assert re.fullmatch(r"v1,[A-Za-z0-9+/]{43}=", taken.headers["webhook-signature"])
    assert taken.headers["content-type"] == "application/json"
    # The same delivery replayed with one byte of its body changed: refused.
    tampered = taken.raw.replace(b'"web1"', b'"web9"', 1)
    assert tampered != taken.raw
    headers = {k: v for k, v in taken.headers.items() if k.startswith("webhook-")}
    request = urllib.request.Request(hook.url, tampered, headers, method="POST")
    with pytest.raises(urllib.error.HTTPError) as refused:
        urllib.request.urlopen(request, timeout=5)
    assert refused.value.code == 401
    assert [p.status for p in hook.posts] == [204, 401]
    assert len(hook.bodies) == 1


def test_a_wrong_key_is_refused_and_fails_saying_what_to_check(hook: FakeWebhook) -> None:
    sink = build({"url": hook.url, "secret": new_key()})
    with pytest.raises(PermanentDeliveryError) as failed:
        sink.send(message())
    said = str(failed.value)
    assert "HTTP 401" in said and "webhook.secret" in said
    assert hook.token not in said and hook.sig not in said
    assert hook.bodies == []


def test_during_a_rotation_every_delivery_carries_one_signature_per_key() -> None:
    new, old = new_key(), new_key()
    for receiver_keys in ([old], [new]):  # a receiver still on the old key, one moved on
        with FakeWebhook(keys=receiver_keys) as fake:
            build({"url": fake.url, "secret": f"{new} {old}"}).send(message())
            (taken,) = fake.posts
            assert taken.status == 204
            assert len(taken.headers["webhook-signature"].split(" ")) == 2


# -- one webhook-id per transition, the status mapping through the store -----------------------


def test_retries_keep_the_webhook_id_and_honour_retry_after(
    store_url: str, hook: FakeWebhook
) -> None:
    store, clock = Store(store_url), Clock()
    try:
        e = event()
        store.documents.apply(
            Document(1, (e,)), [(Transition(TransitionKind.SCHEDULED, e, T0), ["webhook"])], T0
        )
        sink = build({"url": hook.url, "secret": KEY})
        d = Dispatcher(store, {"webhook": sink}, vm_name=lambda: "web1", clock=clock)
        hook.fail_next(503)
        hook.fail_next(429, retry_after=7)
        d.deliver_due("webhook")
        clock.now += timedelta(minutes=5)
        d.deliver_due("webhook")
        assert store.outbox.next_due("webhook") == clock.now + timedelta(seconds=7)
        clock.now += timedelta(seconds=7)
        assert d.deliver_due("webhook") == 1
        clock.now += timedelta(hours=1)
        assert d.deliver_due("webhook") == 0
        record_ = store.events.get("E1")
        assert record_ is not None
        assert [(s.sink, s.state, s.attempts) for s in record_.deliveries] == [
            ("webhook", "delivered", 3)
        ]
    finally:
        store.close()
    assert [p.status for p in hook.posts] == [503, 429, 204]  # each verified first
    assert len({p.headers["webhook-id"] for p in hook.posts}) == 1
    assert len(hook.bodies) == 1


def test_another_transition_has_another_webhook_id(hook: FakeWebhook) -> None:
    sink = build({"url": hook.url, "secret": KEY})
    sink.send(message())
    sink.send(message(attempt=1))  # a retry of the same transition
    sink.send(message(TransitionKind.APPROVED, tid=8))
    ids = [p.headers["webhook-id"] for p in hook.posts]
    assert ids[0] == ids[1] != ids[2]


def test_a_400_fails_for_good_saying_the_status_and_a_scrubbed_excerpt(
    store_url: str, hook: FakeWebhook
) -> None:
    store, clock = Store(store_url), Clock()
    try:
        e = event()
        store.documents.apply(
            Document(1, (e,)), [(Transition(TransitionKind.SCHEDULED, e, T0), ["webhook"])], T0
        )
        sink = build({"url": hook.url, "secret": KEY})
        d = Dispatcher(store, {"webhook": sink}, vm_name=lambda: "web1", clock=clock)
        hook.fail_next(400, body=f"invalid routing_key\n\x1b[31m for {hook.url} " + "x" * 5000)
        d.deliver_due("webhook")
        clock.now += timedelta(hours=1)
        assert d.deliver_due("webhook") == 0
        record_ = store.events.get("E1")
        assert record_ is not None
        (delivery,) = record_.deliveries
    finally:
        store.close()
    assert (delivery.state, delivery.attempts) == ("failed", 1)
    error = delivery.last_error or ""
    assert "HTTP 400" in error and "invalid routing_key" in error
    assert hook.token not in error and hook.sig not in error and "\x1b" not in error
    assert len(error) < 400  # the excerpt is bounded
    assert len(hook.posts) == 1


def test_a_redirect_is_not_followed() -> None:
    with FakeWebhook(keys=[KEY]) as fake:
        fake.fail_next(302)
        with pytest.raises(PermanentDeliveryError, match="HTTP 302, a redirect"):
            build({"url": fake.url, "secret": KEY}).send(message())
        assert len(fake.posts) == 1


# -- the default body ------------------------------------------------------------------------


def test_the_default_body_is_the_json_lines_record_with_its_schema(hook: FakeWebhook) -> None:
    hostile = 'maintenance \u202e\x1b[2J "quoted" é\ud800'
    m = message(e=event(description=hostile), approve_url="https://vm.example.net/approve/a.b")
    build({"url": hook.url, "secret": KEY}).send(m)
    (body,) = hook.bodies
    expected = {"schema": "sebridge.transition/1", **record(shown(m))}
    assert body == json.loads(json.dumps(expected))
    assert list(body)[:4] == ["schema", "ts", "transition_id", "transition"]
    assert hook.posts[0].raw.isascii()
    assert "\x1b" not in body["description"] and "\u202e" not in body["description"]


def test_the_webhook_page_documents_every_field_of_the_body() -> None:
    table = page_section("channels/webhook.md", "The body")
    documented = re.findall(r"^\| `([a-z_]+)` \|", table, re.MULTILINE)
    m = message(approve_url="https://vm.example.net/approve/a.b")
    assert documented == ["schema", *record(shown(m))]


# -- templates -------------------------------------------------------------------------------


def test_a_template_renders_the_body_from_the_record_and_its_vars(
    hook: FakeWebhook, tmp_path: Path
) -> None:
    path = template(
        tmp_path,
        '{"what": {{ record.transition | tojson }}, "desc": {{ record.description | tojson }},'
        ' "key": {{ vars.key | tojson }}, "when": {{ record.not_before | utc | tojson }},'
        ' "schema": {{ schema | tojson }}}',
    )
    hostile = 'a "} , "injected": 1 \\ \u2028'
    sink = build({"url": hook.url, "secret": KEY, "template": path, "vars": {"key": "k1"}})
    sink.send(message(e=event(description=hostile)))
    (body,) = hook.bodies
    assert body == {
        "what": "scheduled",
        "desc": shown(message(e=event(description=hostile))).transition.event.description,
        "key": "k1",
        "when": "2026-11-23 12:15 UTC",
        "schema": "sebridge.transition/1",
    }


def test_a_template_that_renders_nothing_skips_the_transition(
    hook: FakeWebhook, tmp_path: Path
) -> None:
    path = template(
        tmp_path,
        '{% if record.policy == "ask" %}{"id": {{ record.event_id | tojson }}}{% endif %}\n',
    )
    sink = build({"url": hook.url, "secret": KEY, "template": path})
    sink.send(message(policy="inform"))
    sink.send(message(policy="ask"))
    assert hook.bodies == [{"id": "E1"}]


@pytest.mark.parametrize(
    ("text", "said"),
    [
        ('{"a": {{ record.transition }', "is broken: line 1"),
        ('{"a": {{ record.transition }}}', "rendered invalid JSON"),  # no tojson: not JSON
        ('{"a": {{ vars.routing_key | tojson }}}', "UndefinedError"),
    ],
)
def test_a_broken_template_stops_the_sink_when_it_is_built(
    tmp_path: Path, text: str, said: str
) -> None:
    with pytest.raises(PermanentDeliveryError, match=said):
        build(
            {
                "url": "https://hooks.example.net/x",
                "secret": KEY,
                "template": template(tmp_path, text),
            }
        )


def pagerduty(hook: FakeWebhook, name: str) -> Sink:
    return build(
        {
            "url": hook.url,
            "secret": KEY,
            "template": str(DEPLOY / name),
            "vars": {"routing_key": ROUTING_KEY},
        }
    )


def test_the_pagerduty_template_maps_ask_approved_completed_to_its_actions(
    hook: FakeWebhook,
) -> None:
    sink = pagerduty(hook, "pagerduty.json.j2")
    link = "https://vm.example.net/approve/a.b"
    sink.send(message(approve_url=link))
    sink.send(message(TransitionKind.APPROVED, actor="alice", tid=8))
    sink.send(message(TransitionKind.COMPLETED, tid=9))
    sink.send(message(policy="inform", tid=10))  # a change event: the other template's
    trigger, ack, resolve = hook.bodies
    # PagerDuty's Events API v2 (developer.pagerduty.com, "Send an Alert Event").
    assert {b["routing_key"] for b in hook.bodies} == {ROUTING_KEY}
    assert [b["event_action"] for b in hook.bodies] == ["trigger", "acknowledge", "resolve"]
    assert {b["dedup_key"] for b in hook.bodies} == {"E1"}
    payload = trigger["payload"]
    assert payload["summary"] == "Reboot of web1, web2 at 2026-11-23 12:15 UTC: approval asked"
    assert 0 < len(payload["summary"]) <= 1024
    assert payload["source"] == "web1"
    assert payload["severity"] in ("critical", "error", "warning", "info")
    assert datetime.fromisoformat(payload["timestamp"]) == T0
    assert trigger["links"] == [{"href": link, "text": "Approve…"}]
    assert "payload" not in ack and "payload" not in resolve  # not read for these actions


def test_the_pagerduty_change_template_sends_announced_events_only(hook: FakeWebhook) -> None:
    sink = pagerduty(hook, "pagerduty-change.json.j2")
    sink.send(message(policy="ask"))  # paged by the alert template instead
    sink.send(message(policy="inform", tid=8))
    (change,) = hook.bodies
    # "Send a Change Event": routing_key and a payload of summary, source, timestamp.
    assert change["routing_key"] == ROUTING_KEY
    assert "event_action" not in change and "dedup_key" not in change
    assert (
        change["payload"]["summary"] == "Reboot of web1, web2: scheduled for 2026-11-23 12:15 UTC"
    )
    assert change["payload"]["source"] == "web1"
    assert datetime.fromisoformat(change["payload"]["timestamp"]) == T0


def test_the_chat_template_posts_one_line_without_imds_free_text(hook: FakeWebhook) -> None:
    sink = build({"url": hook.url, "secret": KEY, "template": str(DEPLOY / "chat.json.j2")})
    sink.send(message(e=event(description="@channel wake up"), approve_url="https://v/approve/a"))
    (body,) = hook.bodies
    assert list(body) == ["text"]
    assert body["text"].startswith("Reboot of web1, web2 at 2026-11-23 12:15 UTC: scheduled")
    assert "https://v/approve/a" in body["text"] and "@channel" not in body["text"]


@pytest.mark.parametrize("name", ["pagerduty.json.j2", "pagerduty-change.json.j2", "chat.json.j2"])
def test_the_shipped_templates_keep_hostile_text_bounded_and_valid(
    hook: FakeWebhook, name: str
) -> None:
    text = '\x1b[2J\u202e"}{\\ @channel <!here>\ud800' + "é" * 40_000
    e = ScheduledEvent(
        "E1" + text,
        "Reboot" + text,
        "Scheduled",
        tuple(f"vm{i}{text[:300]}" for i in range(200)),
        not_before_text=text,
        description=text,
    )
    sink = pagerduty(hook, name)
    for kind, policy in [("scheduled", "ask"), ("scheduled", "inform"), ("completed", "ask")]:
        sink.send(message(kind, policy, e=e, actor=text))
    assert hook.bodies and all(p.status == 204 for p in hook.posts)
    assert all(p.raw.isascii() for p in hook.posts)
    assert_displayable([s for body in hook.bodies for s in strings(body)])
    for body in hook.bodies:
        if "dedup_key" in body:
            assert len(body["dedup_key"]) <= 255
        if "payload" in body:
            assert len(body["payload"]["summary"]) <= 1024


def test_extra_headers_are_sent_and_content_type_may_be_set(hook: FakeWebhook) -> None:
    headers = {"Authorization": "Bearer t0ken-abcdef", "content-type": "application/json; x=1"}
    build({"url": hook.url, "secret": KEY, "headers": headers}).send(message())
    (taken,) = hook.posts
    assert taken.headers["authorization"] == "Bearer t0ken-abcdef"
    assert taken.headers["content-type"] == "application/json; x=1"


# -- configuration ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("section", "said"),
    [
        ({"url": "http://hooks.example.net/T0KEN-abcdef"}, "webhook.url: must be an https:// URL"),
        ({"secret": ""}, "webhook.secret is empty; it is required to sign"),
        ({"secret": "c2VjcmV0c2VjcmV0c2VjcmV0c2VjcmV0"}, 'does not start with "whsec_"'),
        ({"secret": "whsec_not*base64!!"}, "is not base64"),
        ({"secret": "whsec_c2hvcnQ="}, "must decode to 24 to 64 bytes"),
        ({"secret": f"{KEY} {KEY}"}, "holds the same key twice"),
        ({"headers": {"webhook-id": "x"}}, "webhook.headers.webhook-id: is set by sebridge"),
        ({"headers": {"Content-Length": "1"}}, "webhook.headers.Content-Length: is set by"),
        ({"headers": {"X-A": "a\r\nX-Evil: 1"}}, "holds a line break"),
        ({"headers": {"bad name": "a"}}, "is not a valid HTTP header name"),
        ({"template": "/nonexistent/body.j2"}, "webhook.template: /nonexistent/body.j2 is not"),
        ({"timeout": 0}, "webhook.timeout: must be > 0"),
    ],
)
def test_a_bad_section_is_refused_naming_the_key_never_the_secret(
    section: dict[str, Any], said: str
) -> None:
    full = {"url": "https://hooks.example.net/T0KEN-abcdef", "secret": KEY, **section}
    with pytest.raises(ConfigError) as refused:
        config_from_mapping({"webhook": full}, environ={})
    text = str(refused.value)
    assert said in text
    assert "T0KEN-abcdef" not in text and KEY not in text and KEY[6:20] not in text


def test_a_loopback_http_url_a_duration_and_a_rotation_are_accepted() -> None:
    config = config_from_mapping(
        {
            "webhook": {
                "url": "http://127.0.0.1:9/hook",
                "secret": f"{new_key()} {new_key()}",
                "timeout": "30s",
                "headers": {"Authorization": "Bearer ${HOOK_TOKEN}"},
            }
        },
        environ={"HOOK_TOKEN": "abcdefghijkl"},
    )
    settings = config.section("webhook")
    assert settings.timeout == 30.0
    assert settings.headers["Authorization"].reveal() == "Bearer abcdefghijkl"
    assert config.redacted()["webhook"]["headers"] == {"Authorization": "***"}
    masked = secret_values(config)  # what a hook's output is masked of
    assert "Bearer abcdefghijkl" in masked and "abcdefghijkl" in masked


def test_each_key_of_a_rotation_is_masked_in_a_hook_output() -> None:
    new, old = new_key(), new_key()
    config = config_from_mapping(
        {"webhook": {"url": "https://hooks.example.net/x", "secret": f"{new} {old}"}}, environ={}
    )
    masked = secret_values(config)
    assert new in masked and old in masked


def test_a_command_that_sends_nothing_reads_no_secret_of_the_section() -> None:
    section = {
        "url": "${WEBHOOK_URL}",
        "secret": "${WEBHOOK_SECRET}",
        "headers": {"Authorization": "Bearer ${HOOK_TOKEN}"},
        "vars": {"routing_key": "${PD_ROUTING_KEY}"},
    }
    config = config_from_mapping({"webhook": section}, environ={}, read_secrets=False)
    settings = config.section("webhook")
    assert WEBHOOK.enabled(settings, True)
    assert settings.url.is_unread and settings.headers["Authorization"].is_unread
    assert settings.vars["routing_key"].is_unread


def test_an_unset_variable_in_a_header_is_an_error() -> None:
    with pytest.raises(ConfigError, match=r"webhook\.headers\.Authorization: environment variable"):
        config_from_mapping(
            {
                "webhook": {
                    "url": "https://hooks.example.net/x",
                    "secret": KEY,
                    "headers": {"Authorization": "Bearer ${HOOK_TOKEN}"},
                }
            },
            environ={},
        )


# -- check and --send-test -------------------------------------------------------------------


def check(tmp_path: Path, section: str, *extra: str) -> tuple[int, str]:
    store = toml_str(f"sqlite:///{tmp_path / 'state.db'}")
    path = tmp_path / "sebridge.toml"
    out, err = io.StringIO(), io.StringIO()
    # check asks IMDS always (with vm_name set, for its compute name too): a simulator
    # of this VM answers.
    with Simulator(port=0, vm_name="vm7") as imds:
        endpoint = toml_str(imds.url)
        path.write_text(
            f'[imds]\nendpoint = {endpoint}\nvm_name = "vm7"\n[store]\nurl = {store}\n{section}'
        )
        with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
            code = main(["check", "--config", str(path), *extra])
    return code, out.getvalue() + err.getvalue()


@pytest.mark.usefixtures("hermetic")
def test_check_posts_nothing_and_send_test_posts_one_signed_delivery(
    tmp_path: Path, hook: FakeWebhook
) -> None:
    section = f"[webhook]\nurl = {toml_str(hook.url)}\nsecret = {toml_str(KEY)}\n"
    code, out = check(tmp_path, section)
    assert code == 0, out
    assert (
        f"posts the transition's JSON (sebridge.transition/1) to http://127.0.0.1:{hook.port}"
        in out
    )
    assert "nothing is posted to test it" in out
    assert hook.posts == []
    code, out = check(tmp_path, section, "--send-test")
    assert code == 0, out
    assert "signed test delivery taken (HTTP 204" in out
    (taken,) = hook.posts
    assert taken.status == 204  # verified
    (body,) = hook.bodies
    assert body["transition"] == "test" and body["schema"] == "sebridge.transition/1"
    assert body["note"].startswith("sebridge test message")
    assert hook.token not in out and KEY not in out


@pytest.mark.usefixtures("hermetic")
def test_check_says_a_template_that_fails_and_send_test_says_a_refusal(
    tmp_path: Path, hook: FakeWebhook
) -> None:
    broken = template(tmp_path, '{"a": {{ vars.missing | tojson }}}')
    section = f"[webhook]\nurl = {toml_str(hook.url)}\nsecret = {toml_str(KEY)}\n"
    code, out = check(tmp_path, section + f"template = {toml_str(broken)}\n")
    assert code != 0
    assert "UndefinedError" in out and broken in out
    hook.fail_next(403, body=f"nope {hook.url}")
    code, out = check(tmp_path, section, "--send-test")
    assert code != 0
    assert "test delivery not taken: the webhook refused it (HTTP 403)" in out
    assert hook.token not in out


# -- end to end ------------------------------------------------------------------------------


def test_once_delivers_each_transition_signed_to_the_receiver(
    tmp_path: Path, hook: FakeWebhook
) -> None:
    with Simulator(port=0, vm_name="vm0") as sim:
        event_id = sim.schedule("Reboot")
        config = write_config(
            tmp_path / "c.toml",
            endpoint=sim.url,
            db=tmp_path / "s.db",
            extra=f"[webhook]\nurl = {toml_str(hook.url)}\nsecret = {toml_str(KEY)}\n",
        )
        done = run_cli("once", "--config", str(config))
        assert done.returncode == 0, done.stderr
    (body,) = hook.bodies
    assert (body["event_id"], body["transition"]) == (event_id, "scheduled")
    assert [p.status for p in hook.posts] == [204]
    assert hook.token not in done.stderr + done.stdout

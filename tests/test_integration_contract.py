"""The contract every integration keeps, run by each one (Alertmanager's notify/test/test.go).

Every integration in the registry, and the throwaway JSON webhook a newcomer adds
(tests/throwaway/jsonpost), through its rig (integration_rigs.py): its fake on
127.0.0.1, its sink built from its config section. Hostile text arrives bounded
and escaped its API's way; the one status mapping holds end to end (2xx delivered,
other 4xx permanent, 408/429/5xx and no answer retried, after Retry-After when
given); no secret reaches a log record or an error; its name is its config
section and its outbox key. Host-local sinks skip the HTTP cases, saying why.
"""

from __future__ import annotations

import logging
import re
import traceback
from collections.abc import Iterator
from dataclasses import replace
from datetime import timedelta
from pathlib import Path

import pytest

from helpers import query
from rigs import MARKUP, RIGS, Rig
from sebridge.engine.dispatch import Dispatcher
from sebridge.integrations.registry import REGISTRY, settings_of
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import DeliveryError, PermanentDeliveryError, RetryableDeliveryError
from sebridge.model import Document, ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message
from sebridge.store import Store

NOW = utcnow()
LINK = "https://vm0.example.net/approve/abc.def"
HOSTILE = {
    "controls": "\x1b[2J\x1b[31mred\x07\x00\r\nforged INFO line\x7f\x85",
    "bidi": "\u202eexe.txt\u2066x\u2069\u200b\u2028y",
    "surrogates": "a\ud800b\udfffc",
    "markup": MARKUP,
    "huge": "{" * 60_000 + "é\u202e" * 30_000,
    "astral": "\U0001f600\U0001d54f" * 30_000,  # two UTF-16 code units each
}


def event(text: str = "", resources: tuple[str, ...] = ()) -> ScheduledEvent:
    return ScheduledEvent(
        f"C7061BAC-AFDC-4513-B24B-AA5F13A16123{text}",
        f"Reboot{text}",
        "Scheduled",
        ("vm0", *resources),
        resource_type=text or "VirtualMachine",
        not_before=NOW + timedelta(minutes=15),
        not_before_text=text or None,
        description=f"Host maintenance {text}",
        source=text or "Platform",
        duration_seconds=-1,
    )


def message(e: ScheduledEvent | None = None, text: str = "") -> Message:
    t = Transition(TransitionKind.SCHEDULED, e or event(), NOW, actor=text or None, note=text)
    return Message(t, "vm0", "ask", approve_url=LINK)


@pytest.fixture(params=RIGS, ids=lambda rig: rig.integration.name)
def rig(request: pytest.FixtureRequest) -> Iterator[Rig]:
    with request.param() as r:
        yield r


def remote(rig: Rig) -> None:
    """The HTTP cases: a host-local sink skips them, saying why."""
    if rig.local:
        pytest.skip(rig.local)


def test_every_registered_integration_runs_the_contract() -> None:
    ruled = [rig.integration for rig in RIGS]
    assert all(i in ruled for i in REGISTRY)  # a new integration comes with its rig
    assert len({i.name for i in ruled}) == len(ruled)


# -- hostile text ----------------------------------------------------------------------------


@pytest.mark.parametrize("kind", list(HOSTILE))
def test_hostile_text_arrives_bounded_and_escaped_its_way(rig: Rig, kind: str) -> None:
    """In every string field, on the first post and on an update of the same event."""
    text = HOSTILE[kind]
    many = tuple(f"vm{i}-{text[:400]}" for i in range(1000 if kind == "huge" else 3))
    e = event(text, many)
    first = message(e, text)
    sink = rig.sink()
    receipt = sink.send(first)
    changes = ("not_before", "resources", "description", "duration_seconds", "event_type")
    update = Transition(TransitionKind.CHANGED, e, NOW + timedelta(seconds=1), changes, text, text)
    second = replace(first, transition=update, receipt=receipt)
    sink.send(second)
    rig.check_arrived([first, second])


# -- the one status mapping, end to end ------------------------------------------------------


def test_a_2xx_is_delivered(rig: Rig) -> None:
    remote(rig)
    rig.sink().send(message())
    assert rig.delivered() == 1


@pytest.mark.parametrize("status", [400, 401, 403, 404, 422])
def test_any_other_4xx_fails_for_good(rig: Rig, status: int) -> None:
    remote(rig)
    sink = rig.sink()
    rig.answer(status)
    with pytest.raises(PermanentDeliveryError):
        sink.send(message())
    assert rig.delivered() == 0


@pytest.mark.parametrize("status", [408, 429, 500, 502, 503, 504])
@pytest.mark.parametrize("retry_after", [None, 7])
def test_408_429_and_5xx_are_retried_after_retry_after_when_given(
    rig: Rig, status: int, retry_after: int | None
) -> None:
    remote(rig)
    if retry_after is not None and rig.no_retry_after:
        pytest.skip(rig.no_retry_after)
    sink = rig.sink()
    rig.answer(status, retry_after)
    with pytest.raises(RetryableDeliveryError) as caught:
        sink.send(message())
    expected = rig.throttles.get(status) if retry_after is None else float(retry_after)
    assert caught.value.retry_after == expected


def test_a_request_left_unanswered_is_retried(rig: Rig) -> None:
    remote(rig)
    sink = rig.impatient(0.3)
    rig.hang()
    with pytest.raises(RetryableDeliveryError):
        sink.send(message())


def test_a_refused_connection_is_retried(rig: Rig) -> None:
    remote(rig)
    with pytest.raises(RetryableDeliveryError):
        rig.sink(rig.unreachable()).send(message())


# -- secrets ---------------------------------------------------------------------------------


@pytest.mark.parametrize("answer", ["delivered", "401", "429", "503", "hang", "refused"])
def test_no_secret_in_a_log_record_or_an_error(
    rig: Rig, answer: str, caplog: pytest.LogCaptureFixture
) -> None:
    remote(rig)
    caplog.set_level(logging.DEBUG)
    sink = rig.impatient(0.3) if answer == "hang" else rig.sink()
    if answer == "hang":
        rig.hang()
    elif answer == "refused":
        sink = rig.sink(rig.unreachable())
    elif answer != "delivered":
        rig.answer(int(answer))
    said = []
    try:
        sink.send(message())
    except DeliveryError as exc:
        said += [str(exc), repr(exc), "".join(traceback.format_exception(exc))]
    assert bool(said) == (answer != "delivered")
    said += [caplog.text, *(r.getMessage() for r in caplog.records)]
    for secret in rig.secrets():
        assert not [text for text in said if secret in text], secret


# -- the name rule ---------------------------------------------------------------------------


def test_its_name_is_its_folder_its_config_section_and_its_outbox_key(
    rig: Rig, tmp_path: Path
) -> None:
    """docs/ARCHITECTURE.md, "Adding an integration": one name, nowhere a second one."""
    integration, name = rig.integration, rig.name
    assert re.fullmatch(r"[a-z][a-z0-9_]*", name)  # a TOML bare key, a metric label
    assert type(integration).__module__.rsplit(".", 1)[-1] == name  # integrations/<name>/
    # Registered once under it (the throwaway: in no registry).
    assert [i for i in REGISTRY if i.name == name] in ([integration], [])
    config = rig.config()
    assert name in config.given
    assert isinstance(settings_of(integration, config), type(integration).settings or type(None))
    assert integration.enabled(settings_of(integration, config), True)
    sink = rig.sink()
    assert integration.outbound  # it has a sink: the runtime and `check` count it as one
    assert not hasattr(sink, "name")  # a sink has no name of its own to disagree with
    store = Store(f"sqlite:///{tmp_path / 'state.db'}")
    try:
        e = event()
        transition = Transition(TransitionKind.SCHEDULED, e, NOW)
        store.documents.apply(Document(1, (e,)), [(transition, [name])], NOW)
        dispatcher = Dispatcher(store, {name: sink}, vm_name=lambda: "vm0")
        assert dispatcher.deliver_due(name) == 1
    finally:
        store.close()
    assert query(tmp_path / "state.db", "SELECT sink, state FROM outbox") == [(name, "delivered")]
    assert rig.delivered() == 1

"""Delivery after a crash: an attempt is recorded as begun before the sink is called, so the
attempt after a crash between send and ack looks for what the first one left, and never sends
twice where the sink can be checked (JSON lines file, Slack), nor loses anything.

The crash is the process dying right after (or right before) the sink's call: `Crash` is a
BaseException, which the dispatcher does not catch, so nothing after the call runs (no ack, no
retry), exactly as with kill -9. The "restarted" daemon is a new Store and Dispatcher on the same
file, which releases its earlier claims as `run` does.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from fakes.slack import FakeSlack
from helpers import read_jsonl
from pages import pages, section
from sebridge.engine.dispatch import Dispatcher
from sebridge.integrations.jsonl.sink import TAIL, JsonlSink
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack.sink import SlackSink, build_slack_client
from sebridge.model import Document, Receipt, ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message, Sink
from sebridge.store import Store

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
CHANNEL = "C0123456789"
EVENT = ScheduledEvent(
    "5DD55B64-45AD-49D3-BBC9-6D6A2D3E2A16",
    "Reboot",
    "Scheduled",
    ("vm0",),
    not_before=T0 + timedelta(minutes=15),
    not_before_text="Mon, 23 Nov 2026 12:15:00 GMT",
)
STARTED = ScheduledEvent(EVENT.event_id, "Reboot", "Started", ("vm0",), not_before_text="")


class Crash(BaseException):
    """The process died here."""


class CrashAfter:
    """The real sink, then the process dies before the dispatcher records the outcome."""

    def __init__(self, sink: Sink) -> None:
        self.sink = sink

    def send(self, message: Message) -> Receipt | None:
        self.sink.send(message)
        raise Crash

    def close(self) -> None:
        self.sink.close()


class CrashBefore(CrashAfter):
    """The process dies after the attempt was recorded as begun, before the sink was called."""

    def send(self, message: Message) -> Receipt | None:
        raise Crash


class Daemon:
    """The store and dispatcher of one daemon process's life."""

    def __init__(self, url: str, name: str, sink: Sink) -> None:
        self.store = Store(url, agent="vm0")
        self.store.outbox.release_own_claims()  # as `sebridge run` does after a crash
        self.name = name
        self.dispatcher = Dispatcher(self.store, {name: sink}, vm_name=lambda: "vm0")

    def deliver(self) -> None:
        try:
            self.dispatcher.deliver_due(self.name)
        finally:
            self.store.close()


def crash_then_restart(url: str, crashing: Sink, sink: Sink, name: str = "jsonl") -> None:
    with pytest.raises(Crash):
        Daemon(url, name, crashing).deliver()
    Daemon(url, name, sink).deliver()


def queue(url: str, sink: str, *transitions: Transition) -> None:
    store = Store(url, agent="vm0")
    try:
        for t in transitions:
            store.documents.apply(Document(1, (t.event,)), [(t, [sink])], T0)
    finally:
        store.close()


def delivered(url: str) -> list[tuple[str, int]]:
    store = Store(url)
    try:
        return [
            (e.transition.kind, d.attempts) for e in store.history.entries() for d in e.deliveries
        ]
    finally:
        store.close()


@pytest.fixture
def url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path / 'state.db'}"


# ---------------------------------------------------------------- JSON lines


def test_jsonl_killed_after_the_write_is_not_written_again(url: str, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    queue(url, "jsonl", Transition(TransitionKind.SCHEDULED, EVENT, T0))
    crash_then_restart(url, CrashAfter(JsonlSink(str(path))), JsonlSink(str(path)))
    lines = read_jsonl(path)
    assert [(r["event_id"], r["transition"]) for r in lines] == [(EVENT.event_id, "scheduled")]
    assert delivered(url) == [("scheduled", 1)]


def test_jsonl_killed_before_the_write_loses_nothing(url: str, tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    queue(url, "jsonl", Transition(TransitionKind.SCHEDULED, EVENT, T0))
    crash_then_restart(url, CrashBefore(JsonlSink(str(path))), JsonlSink(str(path)))
    assert [r["transition"] for r in read_jsonl(path)] == ["scheduled"]


def message(transition_id: int, *, maybe_sent: bool, at: datetime = T0) -> Message:
    t = Transition(TransitionKind.SCHEDULED, EVENT, at)
    return Message(t, "vm0", "ask", attempt=int(maybe_sent), transition_id=transition_id)


def test_jsonl_lines_carry_the_transition_id(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    JsonlSink(str(path)).send(message(41, maybe_sent=False))
    assert [r["transition_id"] for r in read_jsonl(path)] == [41]


def test_jsonl_a_line_of_another_store_with_the_same_id_does_not_hide_ours(
    tmp_path: Path,
) -> None:
    # The store was deleted and its ids start again: same id, another event and time.
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(str(path))
    sink.send(message(1, maybe_sent=False, at=T0 - timedelta(days=3)))
    sink.send(message(1, maybe_sent=True))
    assert [r["ts"] for r in read_jsonl(path)] == [
        (T0 - timedelta(days=3)).isoformat(),
        T0.isoformat(),
    ]


def test_jsonl_a_line_cut_short_does_not_swallow_the_next(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    path.write_text('{"transition_id":7,"transition":"sched', encoding="utf-8")  # power lost
    JsonlSink(str(path)).send(message(8, maybe_sent=True))
    last = path.read_text(encoding="utf-8").splitlines()[-1]
    assert json.loads(last)["transition_id"] == 8


def test_jsonl_reads_only_the_tail_of_a_large_file(tmp_path: Path) -> None:
    # What lies before the last TAIL bytes is not read: a line that far back is not
    # the one a crash just left (it would be the file's last).
    path = tmp_path / "events.jsonl"
    sink = JsonlSink(str(path))
    sink.send(message(5, maybe_sent=False))
    with open(path, "a", encoding="utf-8") as out:
        out.write(json.dumps({"filler": "x" * TAIL}) + "\n")
    sink.send(message(5, maybe_sent=True))
    assert [r.get("transition_id") for r in read_jsonl(path)] == [5, None, 5]


# ---------------------------------------------------------------- Slack


@pytest.fixture
def slack() -> Iterator[FakeSlack]:
    with FakeSlack(channels={CHANNEL: "ops"}) as fake:
        yield fake


def slack_sink(slack: FakeSlack) -> SlackSink:
    return SlackSink(build_slack_client(slack.bot_token, slack.url), CHANNEL, Renderer(None))


def test_slack_killed_after_posting_posts_no_second_message(url: str, slack: FakeSlack) -> None:
    queue(url, "slack", Transition(TransitionKind.SCHEDULED, EVENT, T0))
    crash_then_restart(url, CrashAfter(slack_sink(slack)), slack_sink(slack), "slack")
    assert len(slack.messages) == 1
    (parent,) = slack.messages.values()
    assert (parent.metadata or {})["event_payload"]["event_id"] == EVENT.event_id
    # The message found again is the receipt: the next transition updates it.
    store = Store(url)
    try:
        store.documents.apply(
            Document(2, (STARTED,)),
            [(Transition(TransitionKind.STARTED, STARTED, T0), ["slack"])],
            T0,
        )
    finally:
        store.close()
    Daemon(url, "slack", slack_sink(slack)).deliver()
    assert len(slack.messages) == 1
    assert len(slack.replies(parent.channel, parent.ts)) == 1
    assert delivered(url) == [("scheduled", 1), ("started", 1)]


def test_slack_killed_after_the_thread_reply_replies_once(url: str, slack: FakeSlack) -> None:
    queue(url, "slack", Transition(TransitionKind.SCHEDULED, EVENT, T0))
    Daemon(url, "slack", slack_sink(slack)).deliver()
    queue(url, "slack", Transition(TransitionKind.STARTED, STARTED, T0 + timedelta(minutes=1)))
    crash_then_restart(url, CrashAfter(slack_sink(slack)), slack_sink(slack), "slack")
    (parent,) = slack.messages.values()
    assert [
        (m.metadata or {})["event_payload"]["key"] for m in slack.replies(CHANNEL, parent.ts)
    ] == [f"started@{(T0 + timedelta(minutes=1)).isoformat()}"]


def test_slack_killed_before_posting_loses_nothing(url: str, slack: FakeSlack) -> None:
    queue(url, "slack", Transition(TransitionKind.SCHEDULED, EVENT, T0))
    crash_then_restart(url, CrashBefore(slack_sink(slack)), slack_sink(slack), "slack")
    assert len(slack.messages) == 1
    assert delivered(url) == [("scheduled", 1)]


# ------------------------------------------------------------- what the docs promise


def test_the_docs_promise_what_is_built_no_more() -> None:
    # docs/ARCHITECTURE.md "Delivery": at least once; never twice where the sink lets us
    # check; an unchecked sink may repeat one message after a crash. Not "exactly once".
    for path in pages():
        assert "exactly once" not in " ".join(path.read_text().split()), path
    readme = " ".join(section("how-it-works.md", "Delivery guarantees").split())
    for promise in (
        "every transition reaches every sink at least once",
        "an attempt is recorded as begun in the store before the sink is called",
        "JSON lines: the transition's id, `transition_id`, in the file's tail",
        "a crash inside that window may repeat one message",
        "a second `run` or a `once` beside a running daemon refuses to start",
    ):
        assert promise in readme, promise

"""Owned claims (store/claims.py): a claim carries a token, and every later write of the row
(begin, renew, ack, retry, fail; an approval's POST begun and its outcome) succeeds only for
the holder of the live claim. A stale holder's write changes nothing and hears so.

On both dialects: the store's token checks, and an approval whose POST a crash cut short,
announced as sent once its event started (never as "not sent"), and one a timeout left
unanswered likewise. On PostgreSQL: two agents with a sink slower than their lease deliver
each row once. And a send that hangs keeps its claim for five leases only.
"""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest

import pg
from helpers import wait_until
from sebridge.approval.carrier import CLAIM_LEASE, Carrier
from sebridge.engine.dispatch import Dispatcher
from sebridge.engine.leases import LeaseKeeper
from sebridge.engine.metrics import Metrics
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.model import Approval, Document, Receipt, ScheduledEvent, Transition, TransitionKind
from sebridge.model.message import Message
from sebridge.model.records import Delivery
from sebridge.store import Store
from sebridge.web.metrics_export import registry_of

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=2)
ROW = "SELECT state, attempts, begun, begun_by, claimed_by, last_error FROM outbox"


def event(event_id: str = "E1") -> ScheduledEvent:
    return ScheduledEvent(event_id, "Reboot", "Scheduled", ("vm0", "vm1"), "VirtualMachine")


def scheduled(e: ScheduledEvent, sink: str = "slack") -> tuple[Transition, list[str]]:
    return Transition(TransitionKind.SCHEDULED, e, T0), [sink]


@pytest.fixture
def agents(store_url: str) -> Iterator[tuple[Store, Store]]:
    """Two agents on one store, each with the event in its document; daemons holding their
    names on PostgreSQL (on SQLite one would hold the file alone)."""
    daemons = store_url.startswith("postgresql")
    a = Store(store_url, agent="vm0", exclusive=daemons)
    b = Store(store_url, agent="vm1", exclusive=daemons)
    for store in (a, b):
        store.documents.apply(Document(1, (event(),)), [scheduled(event())], T0)
    yield a, b
    a.close()
    b.close()


def test_a_stale_holders_writes_change_nothing_and_say_so(agents: tuple[Store, Store]) -> None:
    a, b = agents
    (stale,) = a.outbox.claim("slack", T0, T0 + LEASE)
    later = T0 + LEASE + timedelta(seconds=1)  # a's lease ran out (a slow sink, a pause)
    (live,) = b.outbox.claim("slack", later, later + LEASE)
    assert live.id == stale.id and live.token != stale.token
    # a comes back: it may neither begin, renew nor finish the row.
    assert not a.outbox.begin(stale, later + LEASE)
    assert not a.outbox.renew(stale, later + LEASE)
    assert not a.outbox.retry(stale, "503", later)
    assert not a.outbox.ack(stale, Receipt("C1:1.1", {"channel": "C1"}), later)
    assert a.db.one(ROW) == ("pending", 0, 0, None, "vm1", None)
    assert b.outbox.begin(live, later + LEASE)
    assert b.outbox.ack(live, Receipt("C1:2.2", {"channel": "C1"}), later)
    # The incident: one agent's fail() overwrote the other's `delivered`. Now it is refused.
    assert not a.outbox.fail(stale, "channel_not_found")
    assert not b.outbox.ack(live, None, later)  # an ended claim is nobody's
    assert a.db.one(ROW) == ("delivered", 1, 1, "vm1", None, None)
    assert a.db.one("SELECT external_id FROM receipts") == ("C1:2.2",)


def test_a_restarted_agents_new_claim_voids_its_old_one(agents: tuple[Store, Store]) -> None:
    a, _ = agents
    (before,) = a.outbox.claim("slack", T0, T0 + LEASE)
    assert a.outbox.begin(before, T0 + LEASE)
    a.outbox.release_own_claims()  # the daemon, at start (its old process may be frozen)
    (after,) = a.outbox.claim("slack", T0, T0 + LEASE)
    assert not a.outbox.ack(before, None, T0)
    assert a.outbox.begin(after, T0 + LEASE) and a.outbox.ack(after, None, T0)
    assert a.db.one(ROW) == ("delivered", 1, 2, "vm0", None, None)


def test_a_stale_approval_claim_neither_posts_nor_records(agents: tuple[Store, Store]) -> None:
    a, b = agents
    a.approvals.record(Approval("E1", "alice", "slack", T0))
    (stale,) = a.approvals.claim(T0, CLAIM_LEASE)
    later = T0 + CLAIM_LEASE + timedelta(seconds=1)
    (live,) = b.approvals.claim(later, CLAIM_LEASE)
    approved = Transition(TransitionKind.APPROVED, event(), later, actor="alice", via="slack")
    assert not a.approvals.begin_post(stale, later + CLAIM_LEASE)  # so a never POSTs it
    assert not a.approvals.finish(stale, "failed", later, error="400", transition=approved)
    assert [h.transition.kind for h in a.history.entries()] == ["scheduled"]
    assert b.approvals.begin_post(live, later + CLAIM_LEASE)
    assert b.approvals.finish(
        live, "posted", later, transition=approved, sinks=["slack"], answered=True
    )
    assert not a.approvals.finish(stale, "abandoned", later)
    record = a.approvals.get("E1")
    assert record is not None and (record.state, record.unanswered) == ("posted", 0)
    assert [h.transition.kind for h in a.history.entries()] == ["scheduled", "approved"]


def test_a_post_begun_is_remembered_across_the_restart(agents: tuple[Store, Store]) -> None:
    a, _ = agents
    a.approvals.record(Approval("E1", "alice", "slack", T0))
    (claim,) = a.approvals.claim(T0, CLAIM_LEASE)
    assert not claim.maybe_sent  # nothing was POSTed yet
    assert a.approvals.begin_post(claim, T0 + CLAIM_LEASE)
    a.approvals.release_own()  # the process died in the POST; the daemon, at start
    (again,) = a.approvals.claim(T0, CLAIM_LEASE)
    assert (again.state, again.maybe_sent) == ("pending", True)
    assert not a.approvals.finish(claim, "posted", T0)  # the dead process's claim is void
    # IMDS answered the next POST (503): that one did not reach it, the first still may have.
    assert a.approvals.begin_post(again, T0 + CLAIM_LEASE)
    assert a.approvals.finish(again, "pending", T0, error="503", answered=True)
    (third,) = a.approvals.claim(T0, CLAIM_LEASE)
    assert (third.attempts, third.maybe_sent) == (1, True)


# -- the carrier after a POST IMDS never answered --------------------------------------------


@pytest.mark.parametrize(
    ("posted_before", "state", "kind", "said", "counted"),
    [
        # The POST went out, then the process died; the event started: sent, and approved.
        (True, "posted", "approved", "StartRequests sent (an earlier attempt may", "approved"),
        # Nothing went out before the event started by itself: honestly not sent.
        (False, "abandoned", "problem", "not sent to Azure: it started first", "refused"),
    ],
)
def test_the_restart_announces_what_an_earlier_attempt_did(
    store_url: str, posted_before: bool, state: str, kind: str, said: str, counted: str
) -> None:
    with Simulator(port=0, vm_name="vm0", approval_delay=3600) as sim:
        event_id = sim.schedule("Reboot")
        imds = ImdsClient(sim.url, timeout=2.0)
        store = Store(store_url, agent="vm0")
        try:
            now = datetime.now(UTC)
            store.documents.apply(imds.get_document(), [], now)
            store.approvals.record(Approval(event_id, "alice", "cli", now))
            (claim,) = store.approvals.claim(now, CLAIM_LEASE)
            if posted_before:
                assert store.approvals.begin_post(claim, now + CLAIM_LEASE)
                imds.start([event_id])  # IMDS took it; the process died before recording it
        finally:
            store.close()
        sim.start_event(event_id)
        restarted = Store(store_url, agent="vm0")
        try:
            restarted.approvals.release_own()  # `sebridge run`, at start
            restarted.documents.apply(imds.get_document(), [], datetime.now(UTC))  # Started
            metrics = Metrics(["list"])
            carrier = Carrier(restarted, imds, lambda policy: ["list"], metrics=metrics)
            assert carrier.run_once() == 1
            record = restarted.approvals.get(event_id)
            assert record is not None and record.state == state
            (news,) = [
                h.transition for h in restarted.history.entries() if h.transition.kind == kind
            ]
            assert said in news.note and news.actor == "alice"
            assert sim.start_requests == ([event_id] if posted_before else [])
            outcome = {"via": "cli", "outcome": counted}
            assert registry_of(metrics).get_sample_value("sebridge_approvals_total", outcome) == 1
        finally:
            restarted.close()
        imds.close()


@pytest.mark.parametrize(
    ("fault", "state", "said"),
    [
        # IMDS took the POST and its answer never came (a timeout); then the event started.
        ("hang_after", "posted", "StartRequests sent (an earlier attempt may have reached IMDS)"),
        # IMDS answered 500: it did not take that POST; the event then started by itself.
        ("500", "abandoned", "not sent to Azure: it started first"),
    ],
)
def test_after_a_post_imds_never_answered_the_approval_counts_as_sent(
    store_url: str, fault: str, state: str, said: str
) -> None:
    with Simulator(port=0, vm_name="vm0", approval_delay=3600) as sim:
        event_id = sim.schedule("Reboot")
        imds = ImdsClient(sim.url, timeout=0.5, retries=0)
        store = Store(store_url, agent="vm0")
        try:
            store.documents.apply(imds.get_document(), [], datetime.now(UTC))
            store.approvals.record(Approval(event_id, "alice", "cli", datetime.now(UTC)))
            carrier = Carrier(store, imds, lambda policy: ["list"])
            sim.inject(fault, seconds=2.0 if fault == "hang_after" else None)
            assert carrier.run_once() == 0  # put back: retried at the next tick
            sim.start_event(event_id)
            store.documents.apply(imds.get_document(), [], datetime.now(UTC))  # Started
            assert carrier.run_once() == 1
            record = store.approvals.get(event_id)
            assert record is not None and (record.state, record.attempts) == (state, 2)
            notes = [h.transition.note for h in store.history.entries()]
            assert len(notes) == 1 and said in notes[0]
        finally:
            store.close()
            imds.close()


# -- two agents, a sink slower than the lease -------------------------------------------------


class SlowSink:
    """Takes `seconds` per message, longer than the dispatchers' lease; keeps what it got."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.got: list[Message] = []
        self.sending = threading.Event()
        self._lock = threading.Lock()

    def send(self, message: Message) -> Receipt | None:
        self.sending.set()
        threading.Event().wait(self.seconds)
        with self._lock:
            self.got.append(message)
        return None

    def close(self) -> None:
        pass


@pytest.mark.pg
@pytest.mark.slow  # real sends slower than a real lease
def test_two_agents_with_a_sink_slower_than_the_lease_deliver_each_row_once(
    pg_url: str,
) -> None:
    lease = timedelta(seconds=1.2)  # renewed every 0.4 s while a send runs
    sink = SlowSink(seconds=2.5)
    a = Store(pg_url, agent="vm0", exclusive=True)
    b = Store(pg_url, agent="vm1", exclusive=True)
    events = [event(f"E{n}") for n in range(4)]
    now = datetime.now(UTC)
    a.documents.apply(
        Document(1, tuple(events)),
        [(Transition(TransitionKind.SCHEDULED, e, now), ["slow"]) for e in events],
        now,
    )
    dispatchers = [
        Dispatcher(a, {"slow": sink}, vm_name=lambda: "vm0", lease=lease),
        Dispatcher(b, {"slow": sink}, vm_name=lambda: "vm1", lease=lease),
    ]
    try:
        dispatchers[0].start()
        dispatchers[0].wake()
        sink.sending.wait(10)  # a holds the whole batch and sends its first row
        dispatchers[1].start()  # b takes over what a's lease no longer covers
        dispatchers[1].wake()
        wait_until(lambda: a.outbox.pending_count() == 0, 30, message="every row delivered")
    finally:
        for dispatcher in dispatchers:
            dispatcher.stop(timeout=5)
    sent = Counter(m.transition.event_id for m in sink.got)
    assert sent == Counter({e.event_id: 1 for e in events})
    assert {m.vm_name for m in sink.got} == {"vm0", "vm1"}  # b took some over
    rows = pg.query(pg_url, "SELECT state, attempts, begun FROM outbox")
    assert sorted(rows) == [("delivered", 1, 1)] * len(events)
    a.close()
    b.close()


@pytest.mark.slow  # five real leases go by
def test_a_hung_send_keeps_its_claim_for_five_leases_then_lets_go(
    caplog: pytest.LogCaptureFixture,
) -> None:
    renewed: list[int] = []

    def renew(delivery: Delivery) -> bool:
        renewed.append(delivery.id)
        return True

    keeper = LeaseKeeper(renew, timedelta(seconds=0.3))
    delivery = Delivery(7, "slow", scheduled(event())[0], 0, None, "ask", None)
    keeper.start()
    caplog.set_level(logging.WARNING, logger="sebridge.dispatch")
    try:
        with keeper.hold(delivery):  # the sink hangs
            wait_until(lambda: "no longer renewed" in caplog.text, 10, message="the cap")
            count = len(renewed)
            # Another send held from now: its second renewal proves the keeper went on
            # renewing for more than a lease, and it never renewed the first one again.
            other = Delivery(8, "slow", scheduled(event())[0], 0, None, "ask", None)
            with keeper.hold(other):
                wait_until(lambda: renewed.count(8) >= 2, 10, message="two renewals of 8")
            assert 7 not in renewed[count:]
    finally:
        keeper.stop(timeout=2)
    assert count >= 1 and set(renewed[:count]) == {7}

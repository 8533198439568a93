"""Several agents on one store (schema v3): each agent's sightings are its own, a transition
derived by several agents is recorded and queued once, claims pass from a dead agent to a
live one, and (PostgreSQL) a row another agent holds is skipped rather than waited for.

On both dialects: a SQLite file in tmp_path, a PostgreSQL database of this module's own.
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

import pg
from helpers import wait_until
from sebridge.cli.assembly import compose_daemon
from sebridge.engine.runner import Runner
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.store import Store
from sebridge.store.store import STALE

T0 = datetime(2026, 11, 23, 12, 0, tzinfo=UTC)
LEASE = timedelta(minutes=2)


def event(event_id: str = "E1", **kw: object) -> ScheduledEvent:
    return ScheduledEvent(
        event_id=event_id,
        event_type="Reboot",
        status="Scheduled",
        resources=("vm0", "vm1"),
        not_before=T0 + timedelta(minutes=int(kw.get("minutes", 15))),  # type: ignore[call-overload]
        not_before_text="x",
    )


def scheduled(e: ScheduledEvent) -> Transition:
    return Transition(TransitionKind.SCHEDULED, e, T0)


@pytest.fixture
def agents(store_url: str) -> Iterator[tuple[Store, Store]]:
    # Daemons (each holding its name) on PostgreSQL; on SQLite one holds the file alone.
    daemons = store_url.startswith("postgresql")
    a, b = (
        Store(store_url, agent="vm0", exclusive=daemons),
        Store(store_url, agent="vm1", exclusive=daemons),
    )
    yield a, b
    a.close()
    b.close()


def test_one_agents_empty_document_never_marks_anothers_events_gone(
    agents: tuple[Store, Store],
) -> None:
    a, b = agents
    e = event()
    a.documents.apply(Document(1, (e,)), [], T0)
    b.documents.apply(Document(5, (e,)), [], T0)
    a.documents.apply(Document(2, ()), [], T0 + timedelta(minutes=1))
    assert a.documents.last() == Document(2, ())
    assert b.documents.last() == Document(5, (e,))
    record = b.events.get("E1")
    assert record is not None and record.present and record.gone_at is None
    b.documents.apply(Document(6, ()), [], T0 + timedelta(minutes=2))
    record = a.events.get("E1")
    assert record is not None and not record.present
    assert record.gone_at == T0 + timedelta(minutes=2)  # when the last agent lost sight of it


def test_a_transition_derived_by_several_agents_is_recorded_and_queued_once(
    agents: tuple[Store, Store],
) -> None:
    a, b = agents
    e = event()
    a.documents.apply(Document(1, (e,)), [(scheduled(e), ["slack", "jira"])], T0)
    b.documents.apply(
        Document(1, (e,)), [(scheduled(e), ["slack", "jira"])], T0 + timedelta(seconds=1)
    )
    moved = event(minutes=30)
    change = Transition(TransitionKind.CHANGED, moved, T0, changes=("not_before",))
    a.documents.apply(Document(2, (moved,)), [(change, ["slack"])], T0)
    b.documents.apply(Document(2, (moved,)), [(change, ["slack"])], T0)
    assert [h.transition.kind for h in a.history.entries()] == ["scheduled", "changed"]
    assert a.outbox.pending_count() == 3
    # A note says who: two people taking the event are two notes, one person clicking twice one.
    for actor in ("alice", "bob", "alice"):
        taken = Transition(TransitionKind.TAKEN, moved, T0, actor=actor, via="slack")
        a.transitions.record(taken, ["slack"], T0)
    assert [h.transition.actor for h in b.history.entries()][-2:] == ["alice", "bob"]


def test_claims_pass_from_a_dead_agent_to_a_live_one(agents: tuple[Store, Store]) -> None:
    a, b = agents
    e = event()
    a.documents.apply(
        Document(1, (e,)),
        [(scheduled(e), ["slack"])],
        T0,
        approvals=[Approval("E1", "policy", "policy", T0)],
    )
    b.documents.apply(Document(1, (e,)), [(scheduled(e), ["slack"])], T0)
    (delivery,) = a.outbox.claim("slack", T0, T0 + LEASE)
    assert b.outbox.claim("slack", T0, T0 + LEASE) == []  # a holds it
    assert len(a.approvals.claim(T0, LEASE)) == 1
    assert b.approvals.claim(T0, LEASE) == []
    # a dies holding both; once the leases end, b takes them up.
    later = T0 + LEASE + timedelta(seconds=1)
    (again,) = b.outbox.claim("slack", later, later + LEASE)
    assert again.id == delivery.id
    assert [r.event_id for r in b.approvals.claim(later, LEASE)] == ["E1"]


def test_a_change_back_is_said_again_and_a_change_already_said_is_not(
    agents: tuple[Store, Store],
) -> None:
    a, b = agents
    t1, t2 = event(minutes=15), event(minutes=30)
    for store in (a, b):
        store.documents.apply(Document(1, (t1,)), [(scheduled(t1), ["slack"])], T0)

    def change(e: ScheduledEvent, *what: str) -> Transition:
        return Transition(TransitionKind.CHANGED, e, T0, changes=what)

    # a sees every step: NotBefore T1 -> T2 -> T1 -> T2; each one is news.
    for n, e in enumerate((t2, t1, t2), start=2):
        a.documents.apply(Document(n, (e,)), [(change(e, "not_before"), ["slack"])], T0)
    # b polled less often: T1, then T2, which is what was said last: nothing new (its
    # own list of what changed differs from a's, the content does not).
    b.documents.apply(
        Document(4, (t2,)), [(change(t2, "not_before", "description"), ["slack"])], T0
    )
    said = [
        (h.transition.kind, h.transition.event.not_before, h.transition.changes)
        for h in a.history.entries()
    ]
    assert said == [
        ("scheduled", t1.not_before, ()),
        ("changed", t2.not_before, ("not_before",)),
        ("changed", t1.not_before, ("not_before",)),
        ("changed", t2.not_before, ("not_before",)),  # a's, said once: b's adds nothing
    ]
    assert a.outbox.pending_count() == 4


def test_a_dead_agents_claimed_rows_pass_at_once_and_the_heartbeat_says_so(
    pg_database: str,
) -> None:
    url = pg.reset(pg_database)
    a, b = Store(url, agent="vm0", exclusive=True), Store(url, agent="vm1", exclusive=True)
    try:
        e = event()
        for store in (a, b):
            store.documents.apply(Document(1, (e,)), [(scheduled(e), ["slack"])], T0)
        assert b.agents.heartbeat(T0)  # a row due that nobody claims (a missed NOTIFY, say)
        (delivery,) = a.outbox.claim("slack", T0, T0 + LEASE)
        assert b.outbox.claim("slack", T0, T0 + LEASE) == []  # a lives: its lease holds
        assert not b.agents.heartbeat(T0)
        # b waits for the lease, not looking again and again while a sends; so does a (no
        # claim can take the row before), though its flush at shutdown waits for the send.
        assert (b.outbox.next_due("slack"), a.outbox.next_due("slack")) == (T0 + LEASE,) * 2
        assert (b.outbox.busy("slack", T0), a.outbox.busy("slack", T0)) == (False, True)
    finally:
        a.close()  # kill -9 ends the session the same way: the server lets go of a's name
    try:
        # Nothing else tells b that a is gone; the server ends a's session just after close.
        wait_until(lambda: b.agents.heartbeat(T0), message="the server to let go of a's name")
        assert b.outbox.next_due("slack") == T0
        (again,) = b.outbox.claim("slack", T0, T0 + LEASE)  # the lease still runs
        assert (again.id, again.begun) == (delivery.id, 0)
        assert not b.agents.heartbeat(T0)  # b holds it now, and b lives
    finally:
        b.close()


def test_a_dead_agents_claims_pass_at_once_though_its_namesake_lives_on_another_database(
    pg_database: str,
) -> None:
    """Advisory locks belong to one database, pg_locks lists the whole server's: a `vm0`
    of another fleet (another database on the server) says nothing of this fleet's vm0."""
    url = pg.reset(pg_database)
    with pg.temporary_database() as elsewhere:
        namesake = Store(elsewhere, agent="vm0", exclusive=True)
        a, b = Store(url, agent="vm0", exclusive=True), Store(url, agent="vm1", exclusive=True)
        try:
            e = event()
            a.documents.apply(Document(1, (e,)), [(scheduled(e), ["slack"])], T0)
            a.approvals.record(Approval("E1", "alice", "slack", T0))
            (delivery,) = a.outbox.claim("slack", T0, T0 + LEASE)
            assert len(a.approvals.claim(T0, timedelta(seconds=60))) == 1
            a.close()  # as kill -9 would: its session, and its name lock, end
            b.documents.apply(Document(1, (e,)), [], T0)
            wait_until(lambda: b.agents.heartbeat(T0), message="the server to let go of a's name")
            (again,) = b.outbox.claim("slack", T0, T0 + LEASE)  # a's lease still runs
            assert again.id == delivery.id
            assert [c.event_id for c in b.approvals.claim(T0, timedelta(seconds=60))] == ["E1"]
        finally:
            for store in (a, b, namesake):
                store.close()


def test_the_heartbeat_says_when_an_approval_waits_for_someone(
    agents: tuple[Store, Store],
) -> None:
    a, b = agents
    e = event()
    a.documents.apply(Document(1, (e,)), [], T0)
    b.documents.apply(Document(1, ()), [], T0)  # b's first poll (its row the heartbeat updates)
    assert not b.agents.heartbeat(T0)
    a.approvals.record(Approval("E1", "alice", "slack", T0))
    assert b.agents.heartbeat(T0)  # pending
    (claimed,) = a.approvals.claim(T0, timedelta(seconds=60))
    assert not b.agents.heartbeat(T0)  # a is posting it, under its lease
    assert b.agents.heartbeat(T0 + timedelta(seconds=61))  # a's lease ended: a died posting it
    a.approvals.finish(claimed, "posted", T0)
    assert not b.agents.heartbeat(T0 + timedelta(seconds=61))


def test_only_an_agent_that_sees_the_event_claims_its_approval(
    agents: tuple[Store, Store],
) -> None:
    a, b = agents
    e = event()
    a.documents.apply(Document(1, (e,)), [(scheduled(e), ["slack"])], T0)
    b.documents.apply(Document(1, ()), [], T0)
    # Recorded by b (a click b received), carried out by a, whose IMDS lists the event.
    assert b.approvals.record(Approval("E1", "alice", "slack", T0))
    assert not b.approvals.has_pending(T0)
    assert b.approvals.claim(T0, LEASE) == []
    assert a.approvals.has_pending(T0)
    (claimed,) = a.approvals.claim(T0, LEASE)
    assert claimed.event_id == "E1"
    # Once no agent sees the event, any agent may claim the approval to close it.
    a.approvals.finish(claimed, "pending", T0)
    a.documents.apply(Document(2, ()), [], T0 + timedelta(seconds=1))
    assert [r.event_id for r in b.approvals.claim(T0, LEASE)] == ["E1"]


def test_a_row_another_agent_holds_is_skipped_not_waited_for(pg_database: str) -> None:
    # PostgreSQL only: SQLite has no row locks, its write transaction holds the whole file.
    url = pg.reset(pg_database)
    # Were the claim to wait for the lock, it would fail after 5 s instead of skipping.
    waiting = Store(f"{url}&options=-c%20lock_timeout%3D5000", agent="vm1")
    holding = Store(url, agent="vm0")
    try:
        first, second = event("E1"), event("E2")
        holding.documents.apply(
            Document(1, (first, second)),
            [(scheduled(first), ["slack"]), (scheduled(second), ["slack"])],
            T0,
        )
        waiting.documents.apply(Document(1, (first, second)), [], T0)  # its IMDS lists both
        for e in (first, second):
            holding.approvals.record(Approval(e.event_id, "alice", "cli", T0))
        with psycopg.connect(url, autocommit=False) as other:
            # Another agent is in the middle of claiming E1's outbox row and approval.
            other.execute("SELECT id FROM outbox WHERE event_id = 'E1' FOR UPDATE")
            other.execute("SELECT 1 FROM approvals WHERE event_id = 'E1' FOR UPDATE")
            claimed = waiting.outbox.claim("slack", T0, T0 + LEASE)
            assert [d.transition.event_id for d in claimed] == ["E2"]
            assert [r.event_id for r in waiting.approvals.claim(T0, LEASE)] == ["E2"]
            other.rollback()
    finally:
        waiting.close()
        holding.close()


def test_agents_losing_sight_of_an_event_at_once_take_turns(pg_database: str) -> None:
    url = pg.reset(pg_database)
    a, b = Store(url, agent="vm0"), Store(url, agent="vm1")
    try:
        e = event()
        a.documents.apply(Document(1, (e,)), [], T0)
        b.documents.apply(Document(1, (e,)), [], T0)
        errors: list[BaseException] = []

        def b_loses_it() -> None:
            try:
                b.documents.apply(Document(2, ()), [], T0 + timedelta(minutes=1))
            except BaseException as exc:
                errors.append(exc)

        with a.db.transaction():
            a.documents.apply(Document(2, ()), [], T0 + timedelta(minutes=1))  # not committed yet
            thread = threading.Thread(target=b_loses_it)
            thread.start()
            # b waits for the event's row instead of deciding on what a has not committed.
            wait_until(
                lambda: pg.query(
                    url,
                    "SELECT 1 FROM pg_stat_activity WHERE datname = current_database() "
                    "AND wait_event_type = 'Lock'",
                ),
                message="b to wait for a's lock on the event",
            )
        thread.join()
        assert errors == []
        record = a.events.get("E1")
        assert record is not None and not record.present
    finally:
        a.close()
        b.close()


def test_a_dead_agents_sightings_stop_counting_a_beating_ones_do_not(store_url: str) -> None:
    a, b, c = (Store(store_url, agent=name) for name in ("vm0", "vm1", "vm2"))
    try:
        first, second = event("E1"), event("E2")
        for agent in (a, b, c):
            agent.documents.apply(Document(1, (first, second)), [], T0)
        # c dies. a and b live on: a only beats (its document is unchanged), b polls.
        later = T0 + STALE + timedelta(seconds=1)
        a.agents.heartbeat(later - timedelta(seconds=1))
        b.documents.apply(Document(2, (second,)), [], later)  # b: E1 is gone
        record = b.events.get("E1")
        assert record is not None and record.present  # a, alive, still sees it
        a.documents.apply(Document(2, (second,)), [], later)
        record = b.events.get("E1")
        assert record is not None and not record.present  # c's sighting of it no longer counts
        assert [r.event.event_id for r in b.events.current()] == ["E2"]
    finally:
        for agent in (a, b, c):
            agent.close()


def test_the_daemon_beats_while_it_runs(store_url: str) -> None:
    with Simulator(vm_name="vm0") as sim:
        store = Store(store_url, agent="vm0")
        d = compose_daemon(ImdsClient(sim.url, timeout=2.0), store, {}, vm_name="vm0")
        stop = threading.Event()
        runner = threading.Thread(
            target=Runner(d, d.parts, poll_interval=0.2, heartbeat=timedelta(seconds=0.2)).run,
            args=(stop,),
        )
        runner.start()
        try:
            first = wait_until(lambda: seen_at_of_vm0(store_url), message="the first document")
            wait_until(lambda: seen_at_of_vm0(store_url) > first, message="a heartbeat after it")
        finally:
            stop.set()
            runner.join()


def seen_at_of_vm0(url: str) -> str:
    """documents.seen_at of vm0, read through a store of its own (either dialect)."""
    reader = Store(url, agent="reader")
    try:
        row = reader.db.one("SELECT seen_at FROM documents WHERE agent = 'vm0'")
        return str(row[0]) if row else ""
    finally:
        reader.close()

"""What a commit tells the process: `Database.on_commit` hands every callback the tables a
committed transaction (or a lone statement) wrote, on each dialect; a rollback, a read or a
write that changed nothing tells nobody. And on PostgreSQL, closing a daemon's store lets
its name and duties go at once: a daemon of the same name started right after is never
refused (docs/ARCHITECTURE.md, "Fleet mode")."""

from __future__ import annotations

from datetime import UTC, datetime

import psycopg
import pytest

from helpers import wait_until
from sebridge.kernel.errors import StoreError
from sebridge.model import Approval, Document, ScheduledEvent, Transition, TransitionKind
from sebridge.store import Store
from sebridge.store.pg_name import agent_key

NOW = datetime(2026, 1, 1, tzinfo=UTC)


def heard(store: Store) -> list[frozenset[str]]:
    tables: list[frozenset[str]] = []
    store.db.on_commit(tables.append)
    return tables


def test_a_transaction_tells_the_tables_it_wrote_once_committed(store_url: str) -> None:
    store = Store(store_url, agent="vm0")
    try:
        told = heard(store)
        e = ScheduledEvent("E1", "Reboot", "Scheduled", ("vm0",))
        store.documents.apply(
            Document(1, (e,)), [(Transition(TransitionKind.SCHEDULED, e, NOW), ["x"])], NOW
        )
        assert told == [frozenset({"documents", "events", "sightings", "transitions", "outbox"})]
        told.clear()
        with pytest.raises(StoreError), store.db.transaction():
            store.approvals.record(Approval("E1", "alice", "cli", NOW))
            raise StoreError("rolled back")
        assert told == []  # never committed: nobody hears of it
        store.approvals.record(Approval("E1", "alice", "cli", NOW))  # a lone statement
        store.approvals.record(Approval("E1", "bob", "cli", NOW))  # changes nothing
        store.events.current()  # a read
        assert told == [frozenset({"approvals"})]
    finally:
        store.close()


def test_a_callback_that_fails_does_not_undo_the_commit(store_url: str) -> None:
    store = Store(store_url, agent="vm0")
    try:
        told = heard(store)

        def broken(tables: frozenset[str]) -> None:
            raise RuntimeError("a subscriber's bug")

        store.db.on_commit(broken)
        store.settings.remember("k", "v")
        assert store.settings.get("k") == "v" and told == [frozenset({"meta"})]
    finally:
        store.close()


def test_the_name_is_free_the_moment_the_store_is_closed(pg_url: str) -> None:
    """Not when the server's backend has exited, some moments later: a daemon started again
    at once takes its name on its first try."""
    with psycopg.connect(pg_url, autocommit=True) as restarted:
        for _ in range(10):
            store = Store(pg_url, agent="vm0", exclusive=True)
            store.agents.heartbeat(NOW)
            store.close()
            taken = restarted.execute("SELECT pg_try_advisory_lock(%s)", (agent_key("vm0"),))
            assert taken.fetchone() == (True,)
            restarted.execute("SELECT pg_advisory_unlock_all()")
        Store(pg_url, agent="vm0", exclusive=True).close()  # and a daemon's start is welcome


@pytest.mark.slow  # a duty board's stop waits up to a second for its round
def test_a_daemon_holding_duties_started_again_at_once_is_never_refused(pg_url: str) -> None:
    for _ in range(3):
        store = Store(pg_url, agent="vm0", exclusive=True)
        duties = store.db.duties()
        duty = duties.duty("prune")
        duties.start()
        wait_until(duty.held, message="the duty (nobody else holds it)")
        duties.stop()
        store.close()

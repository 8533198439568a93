"""Wake-ups by table (kernel/subscriptions.py) and what publishes them: the store's
after-commit hook (Database.on_commit) names the tables a commit wrote, after the commit,
never for one rolled back; a part is not woken by its own writes; a batch wakes once.

Every store test on both dialects: a SQLite file and a PostgreSQL database (tests/pg.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import pytest

from sebridge.kernel.subscriptions import Subscriptions
from sebridge.model import Approval, Document, ScheduledEvent
from sebridge.store import Store
from sebridge.store.database import written_table

NOW = datetime(2026, 11, 29, 9, 0, tzinfo=UTC)


@pytest.fixture
def store(store_url: str) -> Iterator[Store]:
    s = Store(store_url, agent="vm0")
    yield s
    s.close()


def test_a_commit_names_the_tables_it_wrote_once_committed(store: Store) -> None:
    heard: list[frozenset[str]] = []
    store.db.on_commit(heard.append)
    event = ScheduledEvent("E1", "Reboot", "Scheduled", ("vm0",))
    store.documents.apply(Document(1, (event,)), [], NOW)
    assert len(heard) == 1 and {"events", "documents"} <= heard[0]
    heard.clear()
    assert store.approvals.record(Approval("E1", "alice", "cli", NOW))
    assert heard and all("approvals" in tables for tables in heard)


def test_a_rolled_back_transaction_and_a_statement_that_changed_nothing_name_none(
    store: Store,
) -> None:
    heard: list[frozenset[str]] = []
    store.db.on_commit(heard.append)
    with pytest.raises(RuntimeError), store.db.transaction():
        store.db.execute("INSERT INTO meta (key, value) VALUES ('probe-test', 'x')")
        raise RuntimeError("rolled back")
    store.db.execute("UPDATE meta SET value = 'y' WHERE key = 'no such key'")
    assert heard == []
    store.db.execute("INSERT INTO meta (key, value) VALUES ('probe-test', 'x')")
    assert heard == [frozenset({"meta"})]


@pytest.mark.parametrize(
    ("sql", "table"),
    [
        ("INSERT INTO outbox (a) VALUES (1) ON CONFLICT (a) DO UPDATE SET a = 2", "outbox"),
        ("  update approvals SET state = ?", "approvals"),
        ("DELETE FROM hook_runs WHERE 1 = 0", "hook_runs"),
        (
            "WITH o AS (SELECT id FROM outbox FOR UPDATE OF outbox) UPDATE outbox SET x = 1",
            "outbox",
        ),
        ("SELECT * FROM outbox FOR UPDATE", None),
    ],
)
def test_the_written_table_is_the_statements_target(sql: str, table: str | None) -> None:
    assert written_table(sql) == table


def test_a_part_is_woken_by_its_tables_and_not_by_its_own_writes() -> None:
    subscriptions = Subscriptions()
    woken: list[str] = []
    own = threading.local()
    subscriptions.subscribe(
        ("approvals", "hook_runs"),
        lambda: woken.append("carrier"),
        own=lambda: getattr(own, "carrier", False),
    )
    subscriptions.subscribe(("outbox",), lambda: woken.append("dispatcher"))
    subscriptions.publish(frozenset({"events"}))
    assert woken == []
    subscriptions.publish(frozenset({"approvals", "outbox"}))
    assert woken == ["carrier", "dispatcher"]
    own.carrier = True  # the carrier's own commit
    subscriptions.publish(frozenset({"approvals", "outbox"}))
    assert woken == ["carrier", "dispatcher", "dispatcher"]
    subscriptions.publish_all()
    assert woken == ["carrier", "dispatcher", "dispatcher", "dispatcher"]


def test_a_batch_wakes_each_subscriber_once_at_its_end() -> None:
    subscriptions = Subscriptions()
    woken: list[str] = []
    subscriptions.subscribe(("approvals",), lambda: woken.append("hooks"))
    with subscriptions.batch():
        subscriptions.publish(frozenset({"approvals"}))  # a claim
        subscriptions.publish(frozenset({"approvals", "outbox"}))  # its outcome
        assert woken == []
    assert woken == ["hooks"]

"""What only PostgreSQL does: agents migrating at once, several daemons on one database (fleet),
noticing other processes' writes through LISTEN/NOTIFY without a query per tick, round trips
per tick counted on the wire, a dropped connection, and no password in any error.

The machine's server on 127.0.0.1:5432, a database of this module's own (see tests/pg.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime

import psycopg
import pytest

import pg
from helpers import free_port, wait_until
from sebridge.daemon import Daemon
from sebridge.errors import StoreError
from sebridge.imds import ImdsClient
from sebridge.model import Approval, Document, Receipt, ScheduledEvent
from sebridge.simulator import Simulator
from sebridge.sink import Message
from sebridge.store import Store
from sebridge.store.schema import MIGRATIONS

SECRET = "S3CRET-pw-4711"


@pytest.fixture(scope="module")
def pg_database() -> Iterator[str]:
    with pg.temporary_database() as url:
        yield url


@pytest.fixture
def url(pg_database: str) -> str:
    return pg.reset(pg_database)


@pytest.fixture
def tap() -> Iterator[pg.RoundTripTap]:
    t = pg.RoundTripTap()
    yield t
    t.close()


@pytest.fixture
def sim() -> Iterator[Simulator]:
    with Simulator(vm_name="vm0", approval_delay=3600) as s:
        yield s


class ListSink:
    name = "list"

    def __init__(self) -> None:
        self.sent: list[Message] = []

    def send(self, message: Message) -> Receipt | None:
        self.sent.append(message)
        return None

    def close(self) -> None:
        pass


def daemon(sim: Simulator, url: str, sink: ListSink) -> Daemon:
    imds = ImdsClient(sim.url, timeout=2.0, sleep=lambda s: None)
    return Daemon(imds, Store(url, agent="vm0", exclusive=True), [sink], vm_name="vm0")


def test_agents_starting_at_once_migrate_once(url: str) -> None:
    stores: list[Store] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def open_store() -> None:
        start.wait()
        try:
            stores.append(Store(url))
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=open_store) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for s in stores:
        s.close()
    assert errors == [] and len(stores) == 8
    assert pg.query(url, "SELECT value FROM meta WHERE key = 'schema_version'") == [
        (str(len(MIGRATIONS)),)
    ]


def test_several_daemons_share_the_database(url: str) -> None:
    # Fleet mode: nothing holds the database alone (claims make deliveries exclusive).
    first = Store(url, agent="vm0", exclusive=True)
    second = Store(url, agent="vm1", exclusive=True)
    try:
        second.remember("k", "v")
        assert first.setting("k") == "v"
    finally:
        first.close()
        second.close()


def test_committed_writes_change_the_marker_reads_do_not(url: str) -> None:
    mine, other = Store(url, agent="vm0"), Store(url, agent="cli")
    try:
        marker = mine.db.write_marker()
        other.remember("vm_name", "x")  # meta: nothing anyone waits for
        other.audit_entries()  # a read
        seen = Document(2, (ScheduledEvent("E1", "Reboot", "Scheduled", ("vm0",)),))
        with pytest.raises(StoreError), other.db.transaction():
            other.apply(seen, [], datetime.now(UTC))
            raise StoreError("rolled back")  # never committed: never heard
        other.heartbeat(datetime.now(UTC))  # every 30 s per agent: wakes no one
        mine.events()
        other.apply(seen, [], datetime.now(UTC))
        # Notifications arrive in commit order: once this one is here, no other is coming.
        later = wait_until(
            lambda: mine.db.write_marker() != marker and mine.db.write_marker(),
            message="the NOTIFY of another process's commit",
        )
        # One for the commit; none for meta, the heartbeat, reads, the rollback.
        assert later == (marker[0] + 1,)
        marker = later
        mine.apply(Document(3, seen.events), [], datetime.now(UTC))  # as on SQLite: ours count too
        wait_until(lambda: mine.db.write_marker() != marker, message="the NOTIFY of our commit")
    finally:
        mine.close()
        other.close()


def test_an_unchanged_document_costs_no_round_trip_and_an_approval_elsewhere_wakes_the_daemon(
    url: str, sim: Simulator, tap: pg.RoundTripTap
) -> None:
    sink = ListSink()
    d = daemon(sim, tap.url(url), sink)
    try:
        event_id = sim.schedule("Reboot")
        d.tick()
        d.dispatcher.deliver_due(sink)
        for _ in range(3):  # settles: the ticks that hear our own commits
            d.tick()
        before = tap.round_trips
        for _ in range(20):
            result = d.tick()
            assert result.polled and not result.changed
        assert tap.round_trips == before, tap.sql[-10:]
        # `sebridge approve` elsewhere, whose POST did not reach IMDS: the approval is stored ...
        cli = Store(url, agent="cli")
        cli.record_approval(Approval(event_id, "alice", "cli", datetime.now(UTC)))
        cli.close()
        assert sim.start_requests == []
        # ... and the daemon, told by NOTIFY, carries it out at its next tick.
        wait_until(lambda: d.tick().approvals_done, message="the daemon to POST the approval")
        assert sim.start_requests == [event_id]
    finally:
        d.imds.close()
        d.store.close()


def test_a_dropped_connection_is_opened_again(url: str) -> None:
    store = Store(url, exclusive=True)
    try:
        pid = store.db.one("SELECT pg_backend_pid()")
        assert pid is not None
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid[0],))
        with pytest.raises(StoreError):
            store.events()  # the statement that finds the connection gone
        assert store.events() == []  # the next one reconnects
    finally:
        store.close()


def test_passwords_never_appear_in_errors(url: str) -> None:
    no_server = f"postgresql://sebridge:{SECRET}@127.0.0.1:{free_port()}/sebridge"
    database = url.rpartition("/")[2]
    no_role = f"postgresql://nobody-here:{SECRET}@127.0.0.1:5432/{database}"
    in_query = f"postgresql://127.0.0.1:{free_port()}/db?user=u&password={SECRET}"
    for bad in (no_server, no_role, in_query):
        with pytest.raises(StoreError) as failed:
            Store(bad)
        assert SECRET not in str(failed.value)
        assert "cannot connect" in str(failed.value)


def test_what_imds_showed_while_the_database_was_away_is_recorded_when_it_returns(
    url: str, sim: Simulator
) -> None:
    sink = ListSink()
    d = daemon(sim, url, sink)
    try:
        d.tick()
        event_id = sim.schedule("Reboot")
        pid = d.store.db.one("SELECT pg_backend_pid()")
        assert pid is not None
        with psycopg.connect(url, autocommit=True) as admin:
            admin.execute("SELECT pg_terminate_backend(%s)", (pid[0],))
        with pytest.raises(StoreError):
            d.tick()  # the document changed; the store cannot take it
        d.tick()  # the same document, unchanged at IMDS: recorded now
        d.dispatcher.deliver_due(sink)
        assert [(m.transition.kind, m.transition.event_id) for m in sink.sent] == [
            ("scheduled", event_id)
        ]
    finally:
        d.imds.close()
        d.store.close()

"""What only PostgreSQL does: agents migrating at once, several daemons on one database (fleet),
hearing other processes' writes through LISTEN/NOTIFY as they are committed, round trips
per tick counted on the wire, a dropped connection, and no password in any error.

The machine's server on 127.0.0.1:5432, a database of this module's own (see tests/pg.py).
"""

from __future__ import annotations

import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import psycopg
import pytest

import pg
from helpers import ListSink, free_port, wait_until
from sebridge.cli.assembly import compose_daemon
from sebridge.engine.daemon import Daemon
from sebridge.imds import ImdsClient
from sebridge.imds.simulator import Simulator
from sebridge.kernel.errors import StoreError
from sebridge.model import Approval, Document, ScheduledEvent, Transition
from sebridge.store import Store
from sebridge.store.schema import VERSION

SECRET = "S3CRET-pw-4711"


@pytest.fixture
def tap() -> Iterator[pg.RoundTripTap]:
    t = pg.RoundTripTap()
    yield t
    t.close()


def cut_off(url: str) -> None:
    """End every session of the test's database on the server's side, as a server restart
    does (the store's pooled connections, its name's, its listener's)."""
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
            "WHERE datname = current_database() AND pid <> pg_backend_pid()"
        )


def answers(store: Store) -> bool:
    try:
        return store.events.current() == []
    except StoreError:
        return False


def beats(store: Store) -> bool:
    try:
        store.agents.heartbeat(datetime.now(UTC))
    except StoreError:
        return False
    return True


def failure(d: Daemon) -> str:
    """What a tick that fails says ("": it did not fail)."""
    try:
        d.tick()
    except StoreError as exc:
        return str(exc)
    return ""


def ticks(d: Daemon) -> bool:
    try:
        d.tick()
    except StoreError:
        return False
    return True


def delivered(d: Daemon, sink: ListSink) -> list[tuple[str, str]]:
    """Deliver what is due; (kind, event id) of everything the sink got."""
    d.parts.dispatcher.deliver_due(sink.name)
    return sink.pairs()


def scheduled(e: ScheduledEvent) -> Transition:
    return Transition("scheduled", e, datetime.now(UTC))


def daemon(sim: Simulator, url: str, sink: ListSink) -> Daemon:
    imds = ImdsClient(sim.url, timeout=2.0, sleep=lambda s: None)
    return compose_daemon(
        imds, Store(url, agent="vm0", exclusive=True), {sink.name: sink}, vm_name="vm0"
    )


def test_agents_starting_at_once_migrate_once(pg_url: str) -> None:
    stores: list[Store] = []
    errors: list[BaseException] = []
    start = threading.Barrier(8)

    def open_store() -> None:
        start.wait()
        try:
            stores.append(Store(pg_url))
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
    assert pg.query(pg_url, "SELECT value FROM meta WHERE key = 'schema_version'") == [
        (str(VERSION),)
    ]


def test_a_second_daemon_of_the_same_name_is_refused_naming_the_first(pg_url: str) -> None:
    first = Store(pg_url, agent="vm0", exclusive=True)
    try:
        with pytest.raises(StoreError) as refused:
            Store(pg_url, agent="vm0", exclusive=True)
        assert str(refused.value).startswith(
            f"another sebridge daemon named 'vm0' is running on the store at {first.db.location} "
            "(connected from 127.0.0.1 since "
        )
        assert str(refused.value).endswith(" UTC): give each VM's agent its own imds.vm_name")
        Store(pg_url, agent="vm0").close()  # the CLI (events, approve) is no daemon: welcome
    finally:
        first.close()
    Store(pg_url, agent="vm0", exclusive=True).close()  # the name is free again


def test_a_reopened_connection_holds_the_name_again(pg_url: str) -> None:
    first = Store(pg_url, agent="vm0", exclusive=True)
    try:
        cut_off(pg_url)  # as a server restart or a network cut does
        with pytest.raises(StoreError):
            first.agents.heartbeat(datetime.now(UTC))  # the beat runs on the name's connection
        assert wait_until(lambda: beats(first), message="the store to answer again")
        with pytest.raises(StoreError, match="another sebridge daemon named 'vm0'"):
            Store(pg_url, agent="vm0", exclusive=True)
    finally:
        first.close()


def test_several_daemons_share_the_database(pg_url: str) -> None:
    # Fleet mode: nothing holds the database alone (claims make deliveries exclusive).
    first = Store(pg_url, agent="vm0", exclusive=True)
    second = Store(pg_url, agent="vm1", exclusive=True)
    try:
        second.settings.remember("k", "v")
        assert first.settings.get("k") == "v"
    finally:
        first.close()
        second.close()


def test_commits_to_the_outbox_and_approvals_are_heard_by_name_nothing_else_is(pg_url: str) -> None:
    mine, other = Store(pg_url, agent="vm0"), Store(pg_url, agent="cli")
    heard: list[frozenset[str]] = []
    try:
        assert mine.db.watch(heard.append)
        marker = mine.write_marker()
        e = ScheduledEvent("E1", "Reboot", "Scheduled", ("vm0",))
        seen = Document(2, (e,))
        other.settings.remember("vm_name", "x")  # meta: nothing anyone waits for
        other.history.audit_entries()  # a read
        with pytest.raises(StoreError), other.db.transaction():
            other.documents.apply(seen, [(scheduled(e), ["list"])], datetime.now(UTC))
            raise StoreError("rolled back")  # never committed: never heard
        other.agents.heartbeat(datetime.now(UTC))  # every 30 s per agent: wakes no one
        other.documents.apply(
            seen, [], datetime.now(UTC)
        )  # events and sightings: nobody waits on them
        mine.events.current()
        other.documents.apply(
            Document(3, seen.events), [(scheduled(e), ["list"])], datetime.now(UTC)
        )
        # Notifications arrive in commit order: once this one is here, no other is coming.
        wait_until(lambda: heard, message="the NOTIFY of another process's commit")
        assert heard == [frozenset({"outbox"})]
        assert mine.write_marker() == (marker[0] + 1,)
        # Claiming, marking an attempt begun and acking give no one else anything to do:
        # silent. A row released for anyone (a retry) is heard.
        now = datetime.now(UTC)
        (delivery,) = mine.outbox.claim("list", now, now + timedelta(minutes=2))
        mine.outbox.begin(delivery, now + timedelta(minutes=2))
        mine.outbox.retry(delivery, "503", now)
        # Each one heard is waited for before the next commit: the listener hands what
        # arrives together to one wake (store/pg_listen.py), so a silent step's NOTIFY would
        # join the next one's batch, never pass unseen; without the wait two heard commits
        # could share a batch on a busy machine.
        wait_until(lambda: len(heard) == 2, message=lambda: f"the retry's NOTIFY; heard {heard}")
        (delivery,) = mine.outbox.claim("list", now, now + timedelta(minutes=2))
        mine.outbox.ack(delivery, None, now)
        # A new approval is heard (ours too); one put back after a failed POST is not (its
        # agent retries at the next poll: woken by it, it would retry at once, again and again).
        mine.approvals.record(Approval("E1", "alice", "cli", now))
        wait_until(lambda: len(heard) == 3, message=lambda: f"the approval's NOTIFY; heard {heard}")
        (approval,) = other.approvals.claim(now, timedelta(seconds=60))  # other sees E1
        other.approvals.finish(approval, "pending", now, error="IMDS down")
        e2 = ScheduledEvent("E2", "Reboot", "Scheduled", ("vm0",))
        other.documents.apply(
            Document(4, (e, e2)), [(scheduled(e2), ["list"])], now
        )  # the last one
        wait_until(lambda: len(heard) == 4, message=lambda: f"the last NOTIFY; heard {heard}")
        assert heard == [frozenset({t}) for t in ("outbox", "outbox", "approvals", "outbox")]
    finally:
        mine.close()
        other.close()


@pytest.mark.slow
def test_a_lost_listen_connection_comes_back_and_counts_every_table_as_written(pg_url: str) -> None:
    store = Store(pg_url, agent="vm0")
    heard: list[frozenset[str]] = []
    try:
        store.db.watch(heard.append)
        with psycopg.connect(pg_url, autocommit=True) as admin:
            # Only this test's own database: the server's other LISTEN sessions belong to
            # other test modules, or to other people's daemons.
            admin.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE datname = current_database() AND query LIKE 'LISTEN%'"
            )
        # Whatever was committed while nobody listened may need acting on: all of it is.
        wait_until(lambda: heard, 10, message="the listener to reconnect")
        assert heard == [frozenset({"outbox", "approvals", "hook_runs", "hook_retries"})]
        other = Store(pg_url, agent="cli")
        e = ScheduledEvent("E9", "Reboot", "Scheduled", ("vm0",))
        other.documents.apply(Document(1, (e,)), [], datetime.now(UTC))
        other.approvals.record(Approval("E9", "alice", "cli", datetime.now(UTC)))
        other.close()
        wait_until(lambda: len(heard) == 2, message="a NOTIFY on the new connection")
        assert heard[1] == frozenset({"approvals"})
    finally:
        store.close()


def test_an_unchanged_document_costs_no_round_trip_and_an_approval_elsewhere_wakes_the_daemon(
    pg_url: str, sim: Simulator, tap: pg.RoundTripTap
) -> None:
    sink = ListSink()
    d = daemon(sim, tap.url(pg_url), sink)
    try:
        event_id = sim.schedule("Reboot")
        d.tick()
        d.parts.dispatcher.deliver_due(sink.name)
        for _ in range(3):  # settles: the ticks that hear our own commits
            d.tick()
        before = tap.round_trips
        for _ in range(20):  # as the daemon's recorder acts on a poll (no part's round)
            result = d.act(d.poll())
            assert result.polled and not result.changed
        assert tap.round_trips == before, tap.sql[-10:]
        # `sebridge approve` elsewhere, whose POST did not reach IMDS: the approval is stored ...
        cli = Store(pg_url, agent="cli")
        cli.approvals.record(Approval(event_id, "alice", "cli", datetime.now(UTC)))
        cli.close()
        assert sim.start_requests == []
        # ... and the daemon, told by NOTIFY, carries it out at its next tick.
        wait_until(lambda: d.tick().approvals_done, message="the daemon to POST the approval")
        assert sim.start_requests == [event_id]
    finally:
        d.imds.close()
        d.store.close()


def test_a_watching_daemon_posts_an_approval_stored_elsewhere_without_waiting_for_a_tick(
    pg_url: str, sim: Simulator
) -> None:
    sink = ListSink()
    d = daemon(sim, pg_url, sink)
    try:
        event_id = sim.schedule("Reboot")
        d.tick()
        d.carrier.start()  # as `sebridge run` does; no tick from here on
        d.watch_store()
        cli = Store(pg_url, agent="cli")  # a Slack click on another agent, say
        cli.approvals.record(Approval(event_id, "alice", "slack", datetime.now(UTC)))
        cli.close()
        wait_until(lambda: sim.start_requests, message="the StartRequests POST")
        assert sim.start_requests == [event_id]
        assert d.store.approvals.get(event_id).state == "posted"  # type: ignore[union-attr]
    finally:
        d.carrier.stop(5.0)
        d.imds.close()
        d.store.close()


def test_one_commit_of_outbox_rows_and_an_approval_wakes_the_dispatcher_too(
    pg_url: str, sim: Simulator
) -> None:
    """Another agent records an event its policy approves: the outbox rows and the approval
    are one commit, heard as one batch. This agent's carrier has nothing to carry out (its
    IMDS does not list the event), so it wakes nobody: the batch must wake the dispatcher
    itself, not leave the rows to the hour's idle check."""
    sink = ListSink()
    d = daemon(sim, pg_url, sink)
    other = Store(pg_url, agent="vm1")
    try:
        d.tick()
        # As `sebridge run` does; no tick from here on.
        d.parts.dispatcher.start()
        d.carrier.start()
        d.parts.hook_worker.start()
        d.watch_store()
        e = ScheduledEvent("E7", "Reboot", "Scheduled", ("vm1",))
        now = datetime.now(UTC)
        other.documents.apply(
            Document(1, (e,)),
            [(scheduled(e), [sink.name])],
            now,
            approvals=[Approval("E7", "policy", "policy", now)],
        )
        wait_until(lambda: sink.sent, message="the other agent's rows to be delivered")
        assert [(m.transition.kind, m.transition.event_id) for m in sink.sent] == [
            ("scheduled", "E7")
        ]
    finally:
        d.carrier.stop(5.0)
        d.parts.hook_worker.stop(1.0)
        d.parts.dispatcher.stop(5.0)
        d.imds.close()
        d.store.close()
        other.close()


def test_a_dropped_connection_is_opened_again(pg_url: str) -> None:
    store = Store(pg_url, exclusive=True)
    try:
        cut_off(pg_url)  # as a server restart or a network cut does
        with pytest.raises(StoreError):
            store.events.current()  # the statement that finds the connection gone
        # Connecting again happens on a thread of its own; meanwhile statements fail at once.
        assert wait_until(lambda: answers(store), message="the store to answer again")
    finally:
        store.close()


@pytest.mark.slow
def test_while_connecting_again_hangs_ticks_fail_at_once_and_nothing_waits_for_it(
    pg_url: str, sim: Simulator
) -> None:
    # A host that drops packets: each connection attempt waits connect_timeout (30 s here).
    relay = pg.Relay()
    sink = ListSink()
    d = daemon(sim, relay.url(pg_url) + "&connect_timeout=30", sink)
    try:
        d.tick()
        event_id = sim.schedule("Reboot")
        relay.hang()
        # Each pooled connection the hang closed is found gone by a tick of its own; then
        # the pool has none, and its worker connects in the background.
        wait_until(
            lambda: "connecting again in the background" in failure(d),
            message="the pool to be connecting again",
        )
        # Two attempts, each on a thread of its own: the pool worker's and the listener's.
        wait_until(lambda: relay.held() == 2, message="the background connection attempts")
        attempts, polls = relay.held(), len(sim.requests)
        for _ in range(5):
            with pytest.raises(StoreError, match="connecting again in the background"):
                d.tick()
        # Every tick returned while the attempts still wait for an answer: none waited for
        # one (it would have timed out first), and no tick started another.
        assert relay.held() == attempts and relay.given_up == 0
        assert len(sim.requests) == polls + 5  # and each one polled IMDS
        relay.restore()  # the host answers again: what IMDS shows is recorded
        wait_until(lambda: ticks(d), message="a tick that reaches the store")
        assert delivered(d, sink) == [("scheduled", event_id)]
    finally:
        d.imds.close()
        d.store.close()
        relay.close()


def test_passwords_never_appear_in_errors(pg_url: str) -> None:
    no_server = f"postgresql://sebridge:{SECRET}@127.0.0.1:{free_port()}/sebridge"
    database = pg_url.rpartition("/")[2]
    no_role = f"postgresql://nobody-here:{SECRET}@127.0.0.1:5432/{database}"
    in_query = f"postgresql://127.0.0.1:{free_port()}/db?user=u&password={SECRET}"
    for bad in (no_server, no_role, in_query):
        with pytest.raises(StoreError) as failed:
            Store(bad)
        assert SECRET not in str(failed.value)
        assert "cannot connect" in str(failed.value)


def test_what_imds_showed_while_the_database_was_away_is_recorded_when_it_returns(
    pg_url: str, sim: Simulator
) -> None:
    sink = ListSink()
    d = daemon(sim, pg_url, sink)
    try:
        d.tick()
        event_id = sim.schedule("Reboot")
        cut_off(pg_url)  # as a server restart or a network cut does
        with pytest.raises(StoreError):
            d.tick()  # the document changed; the store cannot take it
        # The same document, unchanged at IMDS, recorded once the store is back.
        wait_until(lambda: ticks(d), message="a tick that reaches the store")
        assert delivered(d, sink) == [("scheduled", event_id)]
    finally:
        d.imds.close()
        d.store.close()

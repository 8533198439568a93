"""Single-holder duties: on SQLite every duty is held; on PostgreSQL at most `slots` agents hold
one, and when a holder's session ends (its process killed, the server restarted) another agent
takes it over; a service bound to a duty runs only on its holders.

Boards of several "agents" in this process, each with its own duty connection, on a database
of this module's own (tests/pg.py).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

import pg
from helpers import wait_until
from sebridge.model.services import SingleHolder
from sebridge.store import Store
from sebridge.store.duties import Duties
from sebridge.store.pg_duties import AdvisoryDuties


@pytest.fixture
def boards(pg_database: str) -> Iterator[list[Duties]]:
    url = pg.reset(pg_database)
    made: list[Duties] = []
    store = Store(url)
    made_from = store.db

    def board() -> Duties:
        b = made_from.duties()
        made.append(b)
        return b

    yield [board() for _ in range(3)]
    for b in made:
        b.stop()
    store.close()


def holders(boards: list[Duties], name: str) -> list[int]:
    return [i for i, b in enumerate(boards) if b.duty(name).held()]


def duty_backends(url: str) -> list[int]:
    rows = pg.query(
        url,
        "SELECT DISTINCT pid FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 1 "
        "AND database = (SELECT oid FROM pg_database WHERE datname = current_database())",
    )
    return [int(str(r[0])) for r in rows]


class Recorder:
    """A service that says whether it runs, as a Socket Mode connection would."""

    def __init__(self, log: list[str], name: str) -> None:
        self.log, self.name = log, name

    def start(self) -> None:
        self.log.append(f"start {self.name}")

    def stop(self) -> None:
        self.log.append(f"stop {self.name}")


def test_on_sqlite_every_duty_is_held(tmp_path: Path) -> None:
    store = Store(f"sqlite:///{tmp_path}/state.db")
    board = store.db.duties()
    log: list[str] = []
    service = SingleHolder("socket", 2, lambda: Recorder(log, "a"))
    service.bind(board)
    service.start()
    board.start()
    assert board.duty("socket").held() and service.running()
    service.stop()
    board.stop()
    assert log == ["start a", "stop a"]
    store.close()


def test_one_slot_one_holder_and_a_dead_holders_duty_is_taken_over(
    boards: list[Duties], pg_database: str
) -> None:
    assert all(isinstance(b, AdvisoryDuties) for b in boards)
    for b in boards:
        b.duty("prune")
        b.start()
    wait_until(lambda: len(holders(boards, "prune")) == 1, message="one holder of prune")
    (old,) = duty_backends(pg_database)
    # The holder's session ends (as with kill -9 of its process): the server frees its lock.
    pg.query(pg_database, f"SELECT pg_terminate_backend({old})")
    wait_until(
        lambda: len(duty_backends(pg_database)) == 1 and old not in duty_backends(pg_database),
        message="another session to take prune over",
    )
    wait_until(lambda: len(holders(boards, "prune")) == 1, message="the board to say who holds it")


def test_at_most_slots_agents_run_a_service_and_a_standby_takes_a_dead_ones_place(
    boards: list[Duties], pg_database: str
) -> None:
    log: list[str] = []
    services = [SingleHolder("socket", 2, lambda i=i: Recorder(log, str(i))) for i in range(3)]
    for board, service in zip(boards, services, strict=True):
        service.bind(board)
        service.start()
        board.start()
    wait_until(lambda: len(holders(boards, "socket")) == 2, message="two holders")
    running = [i for i, s in enumerate(services) if s.running()]
    assert running == holders(boards, "socket")
    (standby,) = set(range(3)) - set(running)
    boards[running[0]].stop()  # the agent stops: its session ends, its service with it
    wait_until(services[standby].running, message="the standby to take over")
    assert f"stop {running[0]}" in log and f"start {standby}" in log
    assert sorted(i for i, s in enumerate(services) if s.running()) == sorted([standby, running[1]])


@pytest.mark.slow
def test_a_waiting_agent_sends_one_statement_per_wait_and_nothing_once_it_holds(
    pg_database: str,
) -> None:
    url = pg.reset(pg_database)
    tap = pg.RoundTripTap()
    holder = AdvisoryDuties(url, "db")
    waiter = AdvisoryDuties(tap.url(url), "db")
    try:
        holder.duty("prune")
        holder.start()
        wait_until(lambda: holder.duty("prune").held(), message="the first holder")
        waiter.duty("prune")
        waiter.start()
        wait_until(lambda: tap.round_trips == 1, message="the waiter's wait statement")
        holder.stop()  # its session ends: the waiter takes the duty within half a second
        wait_until(lambda: waiter.duty("prune").held(), message="the waiter to take over")
        # The wait that ended holding the lock, and the look at what it holds: one round trip.
        assert tap.round_trips == 1, tap.sql
    finally:
        holder.stop()
        waiter.stop()
        tap.close()

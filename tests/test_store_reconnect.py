"""Opening a lost PostgreSQL connection again (store/pg_reconnect.py), with a stand-in for
psycopg's connect: at most one attempt at a time and one a second, a request that came too
soon is carried out later (not dropped), and what an attempt opens after the store closed is
closed too. Against the real server: test_store_postgres.py."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from typing import Any

import pytest

from helpers import wait_until
from sebridge.kernel.errors import StoreError
from sebridge.store.pg_reconnect import Reconnect

BOUND = 10.0


class Connection:
    """What the store does with a connection here: take it, close it."""

    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


class Server:
    """Answers connection attempts as told: refuse, or wait for `release`, then connect."""

    def __init__(self) -> None:
        self.attempts = 0
        self.refuse = True
        self.release = threading.Event()
        self.release.set()
        self.opened: list[Connection] = []

    def connect(self) -> Any:
        self.attempts += 1
        self.release.wait(BOUND)
        if self.refuse:
            raise StoreError("cannot connect to the store at db: connection refused")
        conn = Connection()
        self.opened.append(conn)
        return conn


@pytest.fixture
def server() -> Iterator[Server]:
    s = Server()
    yield s
    s.release.set()


def test_a_request_that_came_too_soon_after_a_failed_attempt_is_tried_when_its_time_comes(
    server: Server,
) -> None:
    reconnect = Reconnect(server.connect)
    try:
        reconnect.start()
        wait_until(lambda: reconnect.error, BOUND, message="the first attempt's failure")
        server.refuse = False
        for _ in range(5):  # every statement of the tick asks again: one attempt answers
            reconnect.start()
        wait_until(reconnect.take, BOUND, message="the second attempt's connection")
        assert server.attempts == 2 and reconnect.error is None
    finally:
        reconnect.discard()


def test_what_an_attempt_opens_after_the_store_closed_is_closed(server: Server) -> None:
    server.refuse = False
    server.release.clear()
    reconnect = Reconnect(server.connect)
    reconnect.start()
    wait_until(lambda: server.attempts == 1, BOUND, message="the attempt")
    reconnect.discard()  # the store closes while the attempt waits for the server
    server.release.set()
    wait_until(lambda: server.opened, BOUND, message="the attempt to connect")
    wait_until(lambda: server.opened[0].closed, BOUND, message="the connection to be closed")
    assert reconnect.take() is None

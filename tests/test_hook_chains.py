"""The hook worker's chains (hooks/chains.py): one thread per event at a time, and stopping
them all, whenever the stop comes.

A SIGTERM right after the hook worker scheduled a chain reached Chains.stop() while the
chain's thread was registered but not started yet: stop() joined it, Python refused
("cannot join thread before it is started") and the daemon exited 1.
"""

from __future__ import annotations

import sys
import threading
import time
from collections.abc import Iterator
from types import FrameType
from typing import Any

import pytest

from sebridge.hooks.chains import Chains

BOUND = 10.0


@pytest.fixture
def chains() -> Iterator[Chains]:
    c = Chains(on_done=lambda: None)
    yield c
    c.stop(time.monotonic() + BOUND)


def stop_when_the_chain_thread_starts(chains: Chains, errors: list[BaseException]) -> Any:
    """A trace function: the moment this thread starts a `hook-chain` thread, stop the chains
    on another thread (as the daemon's SIGTERM would) and let it run for a moment first."""

    def stop() -> None:
        try:
            chains.stop(time.monotonic() + BOUND)
        except BaseException as exc:
            errors.append(exc)

    def trace(frame: FrameType, event: str, arg: object) -> None:
        started = frame.f_code is threading.Thread.start.__code__
        if event == "call" and started and frame.f_locals["self"].name == "hook-chain":
            stopper = threading.Thread(target=stop, name="test-stopper")
            stopper.start()
            stopper.join(0.5)  # done at once, unless stop() must wait for begin() to finish

    return trace


def test_a_stop_as_a_chain_is_being_started_does_not_raise(chains: Chains) -> None:
    errors: list[BaseException] = []
    ran = threading.Event()
    sys.settrace(stop_when_the_chain_thread_starts(chains, errors))
    try:
        began = chains.begin("E1", ran.set)
    finally:
        sys.settrace(None)
    chains.stop(time.monotonic() + BOUND)  # and again, as the daemon's stop may
    assert errors == []
    assert began and ran.is_set()  # begun before the stop: it ran, and was waited for


def test_no_chain_begins_after_a_stop(chains: Chains) -> None:
    chains.stop(time.monotonic() + BOUND)
    ran = threading.Event()
    assert not chains.begin("E1", ran.set)
    assert not ran.wait(0.1)


def test_one_chain_per_event_at_a_time(chains: Chains) -> None:
    release = threading.Event()
    assert chains.begin("E1", lambda: release.wait(BOUND))
    assert not chains.begin("E1", lambda: None)  # E1's chain still runs
    done = threading.Event()
    assert chains.begin("E2", done.set)  # another event's runs beside it
    assert done.wait(BOUND)
    release.set()

"""The recorder: what the poll found is recorded on a thread of its own, in the order seen.

The poll thread polls IMDS (Daemon.poll) and hands each poll here at
once; this thread runs the rest of the tick (Daemon.act: record, wake), which
may wait on the store. So polling never waits on the database: while it does
not answer (a statement's deadline is 12 s on PostgreSQL), polls go on at
their pace, /healthz stays truthful about IMDS, and every new document is
kept, in order, to be recorded as of when it was read once the store is
back, so no transition between them is lost. See docs/ARCHITECTURE.md, "Poll".
"""

from __future__ import annotations

import logging
import threading
import time
from collections import deque
from collections.abc import Callable
from datetime import datetime

from sebridge.engine.poll import Polled
from sebridge.kernel.errors import StoreError
from sebridge.kernel.outage import StoreOutage
from sebridge.kernel.worker import AT_ONCE, Worker
from sebridge.model import Document

__all__ = ["MAX_WAITING", "Recorder"]

log = logging.getLogger("sebridge.daemon")

MAX_WAITING = 1000  # new documents kept while the store is away (a few a day is usual)
RETRY_SECONDS = 1.0  # how soon a poll the store failed is tried again (with jitter)


class Recorder:
    """Acts on polls in order on a worker of its own (`recorder`, kernel/worker.py).

    Args:
        act: the tick's second half (Daemon.act); StoreError means "try again".
        outage: told whether the store answered.
    """

    def __init__(self, act: Callable[[Polled], object], outage: StoreOutage) -> None:
        self._act = act
        self._outage = outage
        self._lock = threading.Lock()
        self._waiting: deque[tuple[Polled, bool]] = deque()  # (poll, brought a new document)
        self._last: Document | None = None
        self._stopping = False
        self._failing = False  # the last round's poll was refused by the store
        self._full_said = False
        # A wake (each poll) does not cut a failed round's back-off short: tried again
        # after RETRY_SECONDS, not at every poll.
        self._worker = Worker(
            "recorder",
            self._round,
            idle=None,
            backoff_base=RETRY_SECONDS,
            backoff_cap=RETRY_SECONDS,
            expected=(StoreError,),
            logger=log,
        )

    def start(self) -> None:
        """Act on polls from now on."""
        self._worker.start()

    @property
    def running(self) -> bool:
        """Whether its thread acts on polls (for /livez)."""
        return self._worker.running

    def offer(self, polled: Polled) -> None:
        """Hand a poll over (the poll thread); never waits on the store.

        A poll with a new document is kept until it is recorded; one without (unchanged,
        or IMDS failed) replaces a waiting one like it: its work is the same."""
        new = polled.document is not None and polled.document is not self._last
        if new:
            self._last = polled.document
        with self._lock:
            if not new and self._waiting and not self._waiting[-1][1]:
                self._waiting[-1] = (polled, False)
            elif len(self._waiting) >= MAX_WAITING:
                if not self._full_said:
                    log.warning(
                        "%d IMDS documents wait for the store; only the latest is kept beyond them",
                        MAX_WAITING,
                    )
                    self._full_said = True
                self._waiting[-1] = (polled, new or self._waiting[-1][1])
            else:
                self._waiting.append((polled, new))
        self._worker.wake()

    def stop(self, timeout: float) -> bool:
        """Act on the polls still waiting, then stop (up to `timeout` s; a poll the store
        fails is not tried again); True when stopped. What is left is dropped: IMDS shows
        its events again at the next start."""
        deadline = time.monotonic() + max(0.0, timeout)
        with self._lock:
            self._stopping = True
        while self._worker.started and (left := deadline - time.monotonic()) > 0:
            with self._lock:
                if self._failing or not self._waiting:
                    break  # a failed round backs off: what waits is dropped, not retried
            after = self._worker.rounds
            self._worker.wake()
            if not self._worker.wait_round(after, left):
                break
        return self._worker.stop(max(0.0, deadline - time.monotonic()))

    def waiting(self) -> int:
        """Polls not acted on yet."""
        with self._lock:
            return len(self._waiting)

    def _round(self) -> datetime | None:
        """Act on the first poll waiting; returns at once while more wait (None: none)."""
        with self._lock:
            if not self._waiting:
                return None
            polled, new = self._waiting[0]
        try:
            self._act(polled)
        except StoreError as exc:
            self._outage.failed(exc)
            with self._lock:
                if self._stopping:  # not tried again: the daemon is going
                    self._waiting.clear()
                    return None
                self._failing = True  # kept first in line; the worker backs off
            raise
        except Exception:
            log.exception("tick failed; polling goes on")
        else:
            if new:  # recorded: the store answered (an unchanged poll may not ask it)
                self._outage.answered()
        with self._lock:
            self._failing = False
            if self._waiting and self._waiting[0][0] is polled:
                self._waiting.popleft()
            # A poll with nothing new that came while this one was acted on is skipped,
            # as the scheduler skips a tick while the last runs: the next comes within an
            # interval. (Acted on at once, it saw this act's own write as another's and
            # woke the dispatcher before the carrier had carried the policy's approval
            # out: a first message with an Approve button for an approved event.)
            if self._waiting and not self._waiting[0][1]:
                self._waiting.popleft()
            return AT_ONCE if self._waiting else None

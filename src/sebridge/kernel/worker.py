"""One shape for every long-running loop: a named thread that runs rounds.

A daemon's loops fail in the same few ways: a wake-up that comes while the
loop works and is lost, a loop that spins on a due time it cannot act on, a
stop that joins a thread not started yet, an error that ends the thread or
retries in a tight loop. So the loop is written once, here, and each part of
the daemon gives it only a round:

    round() -> datetime | None    one pass over the work; returns when the next
                                  pass is due (None: when woken; AT_ONCE: now)

and the worker runs it on a thread named for the part:

- the first round runs at start; another follows when its due time comes,
  when `wake()` is called, or after `idle` seconds at most (a safety net);
- a wake during a round is never lost: another round follows that one;
- a due time in the past runs the next round at once; a round must only
  return one for work it can take (it would spin otherwise);
- a round that raises is logged (its `describe`d text: no secrets, and for an
  unexpected error its stack without the message) and tried again after an
  exponential back-off (kernel/backoff.py) that a wake does not cut short;
- `stop()` is safe before start (the worker never starts), during a round
  (it ends after that round) and twice;
- `run_once()` runs one round on the caller's thread (`sebridge once`, tests),
  never at the same time as a round of the worker's thread.

`Supervisor` starts a set of them in order and stops them in reverse, each
waited for before the next is told, against one deadline; its `run_once()`
runs each part's round once on the caller's thread, in the order they stop: a
part started later feeds the ones started before it (the poll records what the
carrier carries out, and the dispatcher, first to start, delivers last).
"""

from __future__ import annotations

import logging
import random
import threading
import time
import traceback
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from typing import Protocol

from sebridge.kernel.backoff import backoff_delay
from sebridge.kernel.clock import Clock, utcnow

__all__ = ["AT_ONCE", "Pause", "Supervised", "Supervisor", "Worker", "one_line"]

log = logging.getLogger(__name__)

# A due time that has always passed: "run the next round now".
AT_ONCE = datetime.min.replace(tzinfo=UTC)

Pause = Callable[[threading.Event, float | None], object]
"""How the worker waits: until the event is set or the seconds (None: no limit) passed."""


def one_line(exc: BaseException) -> str:
    """An error as one log line: its type and its text, line breaks folded."""
    text = " ".join(str(exc).split())
    return f"{type(exc).__name__}: {text}" if text else type(exc).__name__


def _pause(event: threading.Event, seconds: float | None) -> None:
    event.wait(seconds)


class Worker:
    """Runs `round` on a thread of its own until stopped.

    Args:
        name: the thread's name (docs/ARCHITECTURE.md, "Threads").
        round: one pass over the work; returns when the next is due (None: when woken).
        idle: the longest wait between rounds, woken or not (None: no limit).
        backoff_base, backoff_cap: the wait after the first failed round, and the
            longest; it doubles with each failure in a row (with jitter).
        expected: errors that are part of the job (the store away): logged at DEBUG,
            since whoever tells the outage tells it once.
        describe: an error as a log line, without secrets (e.g. kernel/redact.scrub).
        logger: where its lines go (the part's own logger).
        clock, pause, jitter: time, waiting and randomness, for tests.
    """

    def __init__(
        self,
        name: str,
        round: Callable[[], datetime | None],
        *,
        idle: float | None = None,
        backoff_base: float = 1.0,
        backoff_cap: float = 30.0,
        expected: tuple[type[BaseException], ...] = (),
        describe: Callable[[BaseException], str] = one_line,
        logger: logging.Logger = log,
        clock: Clock = utcnow,
        pause: Pause = _pause,
        jitter: Callable[[], float] = random.random,
    ) -> None:
        self.name = name
        self._round = round
        self._idle = idle
        self._base = backoff_base
        self._cap = backoff_cap
        self._expected = expected
        self._describe = describe
        self._log = logger
        self._clock = clock
        self._pause = pause
        self._jitter = jitter
        self._woken = threading.Event()
        self._stopping = threading.Event()
        self._life = threading.Lock()  # start() against stop(): never a thread half started
        self._thread: threading.Thread | None = None
        self._rounds = 0
        self._round_done = threading.Condition()
        # One round at a time, the thread's or a caller's (run_once).
        self._turn = threading.Lock()

    # -- life ----------------------------------------------------------------------------------

    def start(self) -> None:
        """Run rounds on the thread from now on, the first at once; a no-op once started or
        stopped."""
        with self._life:
            if self._thread is not None or self._stopping.is_set():
                return
            thread = threading.Thread(target=self._run, name=self.name, daemon=True)
            thread.start()  # under the lock: stop() never joins a thread not started yet
            self._thread = thread

    def wake(self) -> None:
        """Run a round soon: now if waiting, else right after the one running."""
        self._woken.set()

    def stop(self, timeout: float = 0.0) -> bool:
        """No round after the one running; wait up to `timeout` seconds for it to end. True
        when the thread has ended (or never started)."""
        with self._life:
            self._stopping.set()
        self._woken.set()  # out of an idle wait at once
        return self.join(timeout)

    def join(self, timeout: float) -> bool:
        """Wait up to `timeout` seconds for the thread to end; True when it has (or never
        started). From the worker's own thread, returns at once."""
        with self._life:
            thread = self._thread
        if thread is None:
            return True
        if thread is not threading.current_thread():
            thread.join(max(0.0, timeout))
        return not thread.is_alive()

    def run_once(self) -> datetime | None:
        """One round on the caller's thread, after any round under way on the worker's;
        returns its due time. Its errors are the caller's."""
        try:
            with self._turn:
                return self._round()
        finally:
            self._ended()

    def on_own_thread(self) -> bool:
        """Whether the caller is the worker's thread (a round's own writes wake nobody
        of its part: kernel/subscriptions.py)."""
        thread = self._thread
        return thread is not None and thread is threading.current_thread()

    @property
    def started(self) -> bool:
        """Whether start() started the thread (it may have ended since)."""
        return self._thread is not None

    @property
    def running(self) -> bool:
        """Whether the thread runs rounds: started, not told to stop, not ended."""
        thread = self._thread
        return thread is not None and thread.is_alive() and not self._stopping.is_set()

    @property
    def stopping(self) -> bool:
        """Whether stop() was called: a long round should end early."""
        return self._stopping.is_set()

    def sleep(self, seconds: float) -> bool:
        """For a round: wait `seconds`, less if stop() comes first; True when stopping."""
        return self._stopping.wait(max(0.0, seconds))

    # -- rounds --------------------------------------------------------------------------------

    @property
    def rounds(self) -> int:
        """How many rounds have ended, failed ones included (read it, then wait_round)."""
        with self._round_done:
            return self._rounds

    def wait_round(self, after: int, timeout: float) -> bool:
        """Wait until a round later than number `after` has ended, at most `timeout` s."""
        with self._round_done:
            return self._round_done.wait_for(lambda: self._rounds > after, max(0.0, timeout))

    def _run(self) -> None:
        failures = 0
        while not self._stopping.is_set():
            # Cleared before the round looks at its work: a wake from now on is for work the
            # round may not have seen, and makes the wait below return at once.
            self._woken.clear()
            try:
                with self._turn:
                    due = self._round()
            except Exception as exc:  # a bug or an outage must not end the thread
                delay = backoff_delay(
                    failures, base=self._base, cap=self._cap, jitter=self._jitter()
                )
                failures += 1
                self._failed(exc, delay)
                self._ended()
                # Not cut short by a wake: a part woken at every commit would retry at that pace.
                self._pause(self._stopping, delay)
                continue
            failures = 0
            self._ended()
            wait = self._wait(due)
            if (wait is None or wait > 0) and not self._stopping.is_set():
                self._pause(self._woken, wait)

    def _wait(self, due: datetime | None) -> float | None:
        """Seconds until the next round (None: until woken)."""
        if due is None:
            return self._idle
        seconds = (due - self._clock()).total_seconds()
        return seconds if self._idle is None else min(self._idle, seconds)

    def _ended(self) -> None:
        with self._round_done:
            self._rounds += 1
            self._round_done.notify_all()

    def _failed(self, exc: Exception, delay: float) -> None:
        what = self._describe(exc)
        if isinstance(exc, self._expected):
            self._log.debug("%s: %s; trying again in %.1fs", self.name, what, delay)
            return
        # The stack without the error's text, which the description already gave cleaned.
        stack = "".join(traceback.format_tb(exc.__traceback__)).rstrip()
        self._log.error(
            "%s: a round failed (%s); trying again in %.1fs\n%s", self.name, what, delay, stack
        )


class Supervised(Protocol):
    """What the supervisor runs: a Worker, or a part made of some."""

    def start(self) -> None:
        """Start its threads."""
        ...

    def run_once(self) -> object:
        """One round of its work on the caller's thread (`sebridge once`, tests)."""
        ...

    def stop(self, timeout: float = 0.0) -> bool:
        """Tell its threads to end; wait up to `timeout` s; True when they have."""
        ...


class Supervisor:
    """Starts parts in order; stops them in reverse, each waited for before the next is
    told, all against one deadline.

    In reverse, one at a time: a part started later may use an earlier one until it ends
    (the carrier wakes the dispatcher with what it carried out last)."""

    def __init__(self, parts: Iterable[tuple[str, Supervised]] = ()) -> None:
        self._parts: list[tuple[str, Supervised]] = list(parts)

    def add(self, name: str, part: Supervised) -> None:
        """Run `part` too; it starts after, and stops before, the others."""
        self._parts.append((name, part))

    @property
    def names(self) -> Sequence[str]:
        """The parts' names, in start order."""
        return [name for name, _ in self._parts]

    def start(self) -> None:
        """Start every part, in order."""
        for _, part in self._parts:
            part.start()

    def run_once(self) -> None:
        """Each part's round once on the caller's thread, last started first (the order
        they stop in): what `sebridge once` and the tests run instead of the threads."""
        for _, part in reversed(self._parts):
            part.run_once()

    def stop(self, timeout: float) -> list[str]:
        """Stop every part, last started first, all within `timeout` seconds (a part met
        after the deadline is still told); returns the names of those still running (left
        behind: their threads are daemon threads)."""
        deadline = time.monotonic() + max(0.0, timeout)
        return [
            name
            for name, part in reversed(self._parts)
            if not part.stop(max(0.0, deadline - time.monotonic()))
        ]

"""`sebridge check`'s network checks, run side by side under one deadline.

Each check runs on a thread of its own and says what it finds as it goes;
at the deadline, whatever a check has said is kept and a check still
running is said to have had no answer. Results come back in the order the
checks were added, never in the order they finished, so the report reads
the same on every run. The threads are daemon threads: one stuck in a
hanging connection never holds the process at its exit (concurrent.futures'
workers would: they are joined at exit). See docs/ARCHITECTURE.md, "Check".
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Generic, TypeVar

__all__ = ["Outcome", "SideBySide"]

T = TypeVar("T")

Say = Callable[[T], None]


@dataclass
class Outcome(Generic[T]):
    """What one check said by the deadline; `finished` False: it was still running."""

    key: str
    said: list[T]
    finished: bool


@dataclass
class _Slot(Generic[T]):
    key: str
    work: Callable[[Say[T]], None]
    failed: Callable[[str, BaseException], T]
    said: list[T] = field(default_factory=list)
    done: threading.Event = field(default_factory=threading.Event)
    closed: bool = False  # past the deadline: what it says now is not heard
    lock: threading.Lock = field(default_factory=threading.Lock)

    def say(self, item: T) -> None:
        with self.lock:
            if not self.closed:
                self.said.append(item)

    def run(self) -> None:
        try:
            self.work(self.say)
        except Exception as exc:  # a bug in a check: said as its problem, never lost
            self.say(self.failed(self.key, exc))
        finally:
            self.done.set()

    def close(self) -> Outcome[T]:
        with self.lock:
            self.closed = True
            return Outcome(self.key, list(self.said), self.done.is_set())


class SideBySide(Generic[T]):
    """Checks to run at once; `run(timeout)` waits for them all, `timeout` seconds at most."""

    def __init__(self) -> None:
        self._slots: list[_Slot[T]] = []

    def add(
        self, key: str, work: Callable[[Say[T]], None], failed: Callable[[str, BaseException], T]
    ) -> None:
        """A check named by `key` (the configuration key it reaches out through);
        `failed(key, exc)` turns an exception it raised into what it says."""
        self._slots.append(_Slot(key, work, failed))

    def run(self, timeout: float) -> list[Outcome[T]]:
        """Start every check, wait until all finished or `timeout` seconds passed; each
        check's outcome, in the order added."""
        for slot in self._slots:
            threading.Thread(target=slot.run, name=f"check {slot.key}", daemon=True).start()
        deadline = time.monotonic() + timeout
        for slot in self._slots:
            slot.done.wait(max(0.0, deadline - time.monotonic()))
        return [slot.close() for slot in self._slots]

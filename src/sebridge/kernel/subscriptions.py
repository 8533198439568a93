"""Wake-ups by table: each part says which tables' writes wake it; whoever hears a
commit publishes the tables it wrote.

Two publishers: the store's after-commit hook (this process's own commits,
store/database.py `on_commit`) and the PostgreSQL listener (every process's,
store/pg_listen.py). So no switchboard has to know every part: a part added
subscribes itself. A part's round is never woken by its own writes (it says
when its next round is due), else a round that writes would wake itself for
ever. See docs/ARCHITECTURE.md, "Threads".
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass

__all__ = ["Subscriptions"]


@dataclass(frozen=True)
class _Subscription:
    tables: frozenset[str]
    wake: Callable[[], object]
    # True on the subscriber's own thread: its own writes do not wake it.
    own: Callable[[], bool]


def _nobody() -> bool:
    return False


class Subscriptions:
    """Who is woken by writes to which tables."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._subscribers: tuple[_Subscription, ...] = ()
        self._local = threading.local()  # .tables: what a batch() on this thread collected

    def subscribe(
        self,
        tables: Iterable[str],
        wake: Callable[[], object],
        *,
        own: Callable[[], bool] = _nobody,
    ) -> None:
        """Call `wake()` after each commit that wrote one of `tables`, unless `own()` says
        the commit is the subscriber's own (made on its thread)."""
        with self._lock:
            self._subscribers += (_Subscription(frozenset(tables), wake, own),)

    @property
    def tables(self) -> frozenset[str]:
        """Every table someone waits for."""
        return frozenset().union(*(s.tables for s in self._subscribers))

    @contextmanager
    def batch(self) -> Iterator[None]:
        """What is published on this thread meanwhile goes out once, together, at the end:
        a round's many commits (a claim, then its outcome) wake each subscriber once."""
        if getattr(self._local, "tables", None) is not None:  # within one already
            yield
            return
        self._local.tables = set()
        try:
            yield
        finally:
            tables, self._local.tables = self._local.tables, None
            if tables:
                self.publish(frozenset(tables))

    def publish(self, tables: frozenset[str]) -> None:
        """Commits wrote `tables`: wake each subscriber of one of them (on the caller's
        thread; a wake only sets a flag), or at the end of this thread's batch()."""
        collected = getattr(self._local, "tables", None)
        if collected is not None:
            collected.update(tables)
            return
        for subscriber in self._subscribers:  # a tuple, replaced whole: read without the lock
            if subscriber.tables & tables and not subscriber.own():
                subscriber.wake()

    def publish_all(self) -> None:
        """Work may wait that no commit announced (the first poll, the heartbeat, another
        process's write seen only as a changed file): every subscriber looks."""
        self.publish(self.tables)

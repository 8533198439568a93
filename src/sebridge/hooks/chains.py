"""The hook worker's running chains: one thread per event at a time, and the process groups
of the hooks running now (so stopping the daemon ends them all). See docs/ARCHITECTURE.md,
"Readiness hooks".
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable

from sebridge.kernel.errors import StoreError

__all__ = ["Chains"]

log = logging.getLogger("sebridge.hooks")


class Chains:
    """Threads running hook chains, keyed by event, and the process groups they started."""

    def __init__(self, on_done: Callable[[], None]) -> None:
        self._on_done = on_done  # a chain ended: what came due meanwhile may run now
        self._lock = threading.Lock()
        self._threads: dict[str, threading.Thread] = {}
        self._groups: dict[int, int] = {}  # thread ident -> the process group it runs now
        self._stopping = False

    def begin(self, event_id: str, chain: Callable[[], object]) -> threading.Thread | None:
        """Run `chain` on a thread of its own unless this event's chain runs already; its
        thread (None: not begun)."""
        with self._lock:
            running = self._threads.get(event_id)
            if self._stopping or (running is not None and running.is_alive()):
                return None
            thread = threading.Thread(
                target=self._run, args=(event_id, chain), name="hook-chain", daemon=True
            )
            # Started under the lock: stop() never sees (and joins) a thread not started yet.
            # The thread's own end waits for the lock, so it finds itself registered.
            thread.start()
            self._threads[event_id] = thread
        return thread

    def started(self, pgid: int) -> None:
        """The calling thread's hook began its process group (ended at once if stopping
        came first)."""
        with self._lock:
            self._groups[threading.get_ident()] = pgid
            stopping = self._stopping
        if stopping:  # its process began as stop() ended the others: said the same way
            log.warning("stopping: hook in progress ended; it runs again at the next start")
            _end_group(pgid)

    def ended(self) -> None:
        """The calling thread's hook ended."""
        with self._lock:
            self._groups.pop(threading.get_ident(), None)

    def running(self) -> int:
        """How many hooks run now (their process groups)."""
        with self._lock:
            return len(self._groups)

    def stop(self, deadline: float) -> None:
        """End every hook in progress (its process group) and wait for the chains until
        `deadline` (time.monotonic())."""
        with self._lock:
            self._stopping = True
            groups, threads = set(self._groups.values()), list(self._threads.values())
        for group in groups:
            log.warning("stopping: hook in progress ended; it runs again at the next start")
            _end_group(group)
        for thread in threads:
            thread.join(max(0.0, deadline - time.monotonic()))

    def _run(self, event_id: str, chain: Callable[[], object]) -> None:
        ended = False
        try:
            chain()
            ended = True
        except StoreError as exc:  # looked at again later (a wake, the heartbeat), not now
            log.debug("hooks of %s not run: %s", event_id, exc)
        except Exception:  # a bug must not end the hooks
            log.exception("running hooks of %s failed; looking again later", event_id)
        finally:
            with self._lock:
                if self._threads.get(event_id) is threading.current_thread():
                    del self._threads[event_id]
        if ended:  # what came due meanwhile may run now; a failed chain must not spin
            self._on_done()


def _end_group(pgid: int) -> None:
    # Imported here: a group exists only once a hook ran, and hooks/process.py (subprocess,
    # signals) is not loaded by a daemon without hooks (tests/test_run_imports.py).
    from sebridge.hooks.process import end_group

    end_group(pgid)

"""How `sebridge run` hears SIGTERM and SIGINT: while the daemon is built (the process
ends at once) and while it runs (the runner's wait returns, and the parts are stopped).
See docs/ARCHITECTURE.md, "Threads" (MainThread).
"""

from __future__ import annotations

import os
import select
import signal
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager

__all__ = ["STOP_SIGNALS", "stop_signals_exit", "stop_waiter"]

STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)
# How often a main thread given a `stop` Event looks at it (stop_waiter); the CLI's waits
# for a signal alone, asleep until one comes.
STOP_LOOK = 0.25


@contextmanager
def stop_signals_exit() -> Iterator[None]:
    """While the daemon is being built (it may wait for IMDS to say the VM's name): SIGTERM
    and SIGINT end the process at once with exit 0, as they end a running daemon. Main
    thread only (Python delivers signals there); elsewhere a no-op."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return

    def stop(signum: int, frame: object) -> None:
        raise SystemExit(0)  # unwinds through what was being opened; each part closes

    previous = {signum: signal.signal(signum, stop) for signum in STOP_SIGNALS}
    try:
        yield
    finally:
        for signum, handler in previous.items():
            signal.signal(signum, handler)


def stop_waiter(stop: threading.Event | None) -> Callable[[], object]:
    """The runner's wait: it returns once `stop` is set or, in the main thread, once
    SIGTERM or SIGINT came (their handlers are installed here).

    The kernel gives a process's signal to whichever thread takes it first, not always
    the main one (under load, e.g. a thread starting a hook's pipe threads before the
    woken main thread runs). Python runs the handler in the main thread only, once it
    runs Python code again, which a main thread blocked in an untimed Event.wait never
    did: the daemon did not stop. Python's C-level handler, though, writes the signal's
    number to the wake-up file (signal.set_wakeup_fd) in whichever thread took it, so the
    main thread waits on that file: woken at once, by either way, and asleep otherwise."""
    if threading.current_thread() is not threading.main_thread():
        return (stop or threading.Event()).wait  # handlers are the main thread's only
    wake_read, wake_write = os.pipe()
    os.set_blocking(wake_read, False)
    os.set_blocking(wake_write, False)
    before = signal.set_wakeup_fd(wake_write, warn_on_full_buffer=False)
    for signum in STOP_SIGNALS:
        signal.signal(signum, _told)
    # A `stop` set by another thread cannot wake a select(): then it is looked at in slices.
    slice_ = None if stop is None else STOP_LOOK

    def wait() -> None:
        try:
            while not (stop is not None and stop.is_set()):
                if select.select([wake_read], [], [], slice_)[0] and _stops(wake_read):
                    return
        finally:
            signal.set_wakeup_fd(before)
            os.close(wake_read)
            os.close(wake_write)

    return wait


def _told(signum: int, frame: object) -> None:
    """SIGTERM/SIGINT's handler: nothing to do here, the wake-up file tells the runner."""


def _stops(wake_read: int) -> bool:
    """Whether the wake-up file holds SIGTERM or SIGINT (one byte per signal)."""
    try:
        taken = os.read(wake_read, 512)
    except BlockingIOError:
        return False
    return any(signum in taken for signum in STOP_SIGNALS)

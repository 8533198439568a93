"""A running hook's two pipes, each on a thread of its own: the tail of what it prints,
and the event written to its stdin while its timeout runs (hooks/process.py runs it).

Both threads are named in docs/ARCHITECTURE.md's Threads table (`hook-output`,
`hook-input`).
"""

from __future__ import annotations

import contextlib
import os
import select
import threading
from typing import IO

from sebridge.kernel.redact import Masker

__all__ = ["InputFeed", "OutputTail"]


class OutputTail(threading.Thread):
    """Reads a pipe to its end on its own thread, keeping the last `keep` bytes, and
    as many more as the longest secret is long: masked, a secret the cut went through
    leaves nothing behind (kernel/redact.py: Masker.tail)."""

    def __init__(self, pipe: IO[bytes], mask: Masker, *, keep: int) -> None:
        super().__init__(name="hook-output", daemon=True)
        self._pipe = pipe
        self._mask = mask
        self._keep = keep + mask.margin
        self._kept = bytearray()
        self._cut = False  # whether output was dropped from the front
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            while chunk := self._pipe.read1(65536):  # type: ignore[attr-defined]
                with self._lock:
                    self._kept += chunk
                    if len(self._kept) > self._keep:
                        self._cut = True
                        del self._kept[: -self._keep]
        except (OSError, ValueError):
            pass  # closed under us after the drain time
        finally:
            with contextlib.suppress(OSError):
                self._pipe.close()  # at the output's end, whenever the last writer let go

    def text(self) -> str:
        with self._lock:
            kept, cut = bytes(self._kept), self._cut
        text = kept.decode("utf-8", "replace")
        if not self._mask:
            return text
        return self._mask.tail(text, cut=cut)


class InputFeed(threading.Thread):
    """Writes the event to a hook's stdin on its own thread, then closes it (the hook sees
    its end). A hook that exits without reading is fine (EPIPE ends the write); one that
    neither reads nor exits is not waited for: the writes never block (the pipe is
    non-blocking), so stop() ends the thread at once, whoever else holds the pipe open."""

    # How often a write waiting for room in the pipe looks whether it should stop.
    _LOOK = 0.05

    def __init__(self, pipe: IO[bytes], data: bytes) -> None:
        super().__init__(name="hook-input", daemon=True)
        self._pipe = pipe
        self._data = data
        self._stopping = threading.Event()
        os.set_blocking(pipe.fileno(), False)

    def run(self) -> None:
        fd = self._pipe.fileno()
        left = memoryview(self._data)
        try:
            while left and not self._stopping.is_set():
                try:
                    left = left[os.write(fd, left[:65536]) :]
                except BlockingIOError:  # the pipe is full: wait for room, or for stop()
                    select.select([], [fd], [], self._LOOK)
        except OSError:  # EPIPE: the hook exited (or closed stdin) without reading it all
            pass
        finally:
            with contextlib.suppress(OSError):
                self._pipe.close()

    def stop(self) -> None:
        """Write no more (the hook ended or timed out) and wait for the thread's end."""
        self._stopping.set()
        self.join()

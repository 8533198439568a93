"""What hooks leave behind comes back to sebridge, is reaped, and ends with its attempt.

A hook's children may outlive it: a drain script that backgrounds a `kubectl`
or a logger, a child that moves to a session of its own (`setsid`), and the
members of a group its timeout killed. An orphan is re-parented to the nearest
"child subreaper" above it, else to PID 1, and whoever it lands on must collect
its exit status, or it stays a zombie holding a PID for good. In a container
sebridge is often PID 1 itself (the image runs tini in front of it; a pod or a
`podman run` without an init does not). So `run` makes itself a child
subreaper (prctl PR_SET_CHILD_SUBREAPER, Linux): every orphan of its hooks
comes back to it, wherever it went, and:
- `Reaper.reap` collects the dead ones (after each hook run, and on a timer);
- `Reaper.strays` names the live ones, so an attempt's end can end them too
  (hooks/attempt.py), even one that left its group and cleared its environment.
A process sebridge started itself (a hook, or a library's own subprocess) is
never reaped here: its Popen waits for it, and a status taken from it would
turn its exit code into 0. So a hook is started under the reaper's lock and
named (`starting`), and a child in sebridge's own process group (what a library
starts) is left to its starter. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
import threading
from collections.abc import Callable, Iterator

__all__ = ["REAPER", "REAP_EVERY", "Reaper", "become_subreaper", "stat_of"]

log = logging.getLogger("sebridge.hooks")

_PR_SET_CHILD_SUBREAPER = 36  # <linux/prctl.h>
# Seconds between reaping rounds: a zombie holds only its PID meanwhile, and each round
# reads a file per thread (about twenty).
REAP_EVERY = 5.0


def become_subreaper() -> bool:
    """Make this process the child subreaper of what it starts (Linux); False elsewhere or
    when the kernel refuses."""
    if not sys.platform.startswith("linux"):
        return False
    import ctypes  # here: only `run` asks, once

    libc = ctypes.CDLL(None, use_errno=True)
    if libc.prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0) != 0:
        log.warning("could not become a child subreaper: %s", os.strerror(ctypes.get_errno()))
        return False
    REAPER.adopting = True
    return True


def _stat_fields(pid: int) -> list[bytes]:
    """/proc/<pid>/stat from field 3 (the state) on; [] when the process is gone."""
    try:
        with open(f"/proc/{pid}/stat", "rb") as fh:
            text = fh.read()
    except OSError:
        return []
    # Field 2 is the program's name in parentheses, which may hold spaces and ")".
    return text[text.rfind(b")") + 2 :].split()


def stat_of(pid: int) -> tuple[int, int] | None:
    """(process group, start time in clock ticks since boot) of a process; None: gone."""
    rest = _stat_fields(pid)
    try:
        return int(rest[2]), int(rest[19])  # fields 5 (pgrp) and 22 (starttime)
    except (IndexError, ValueError):
        return None


def _children() -> list[int]:
    """This process's children, over all its threads (/proc/self/task/*/children: an
    orphan is re-parented to one of the subreaper's threads)."""
    found: list[int] = []
    with contextlib.suppress(OSError):
        for task in os.scandir("/proc/self/task"):
            with contextlib.suppress(OSError), open(f"{task.path}/children", "rb") as fh:
                found += [int(pid) for pid in fh.read().split()]
    return found


class Reaper:
    """Collects the exit status of the orphans this process adopted, never of its own."""

    def __init__(self, children: Callable[[], list[int]] = _children) -> None:
        self._children = children
        self._lock = threading.Lock()
        self._own: set[int] = set()
        # Orphans come to this process (a subreaper, or PID 1): only then is a child in a
        # session of its own a hook's stray, never one a library started.
        self.adopting = os.getpid() == 1

    @contextlib.contextmanager
    def starting(self) -> Iterator[Callable[[int], None]]:
        """Around starting a child of ours: the yielded callable names it (its Popen waits
        for it), and nothing is reaped until it is named."""
        with self._lock:
            yield self._own.add

    def waited(self, pid: int) -> None:
        """Our child `pid` was waited for: its number may be an orphan's next."""
        with self._lock:
            self._own.discard(pid)

    def reap(self) -> int:
        """Collect every adopted child that has exited; returns how many."""
        reaped = 0
        with self._lock:
            for pid, _, _ in self._adopted():
                with contextlib.suppress(ChildProcessError):
                    done, _ = os.waitpid(pid, os.WNOHANG)
                    reaped += done == pid
        if reaped:
            log.debug("reaped %d processes hooks left behind", reaped)
        return reaped

    def strays(self) -> list[tuple[int, int]]:
        """The adopted children still running (what hooks left behind): (pid, group); none
        while this process adopts no orphans."""
        if not self.adopting:
            return []
        with self._lock:
            return [(pid, group) for pid, group, state in self._adopted() if state != b"Z"]

    def _adopted(self) -> list[tuple[int, int, bytes]]:
        """(pid, process group, state) of each child not ours: not named by `starting`,
        and not in our own process group (a library's child)."""
        ours = os.getpgrp()
        found = []
        for pid in self._children():
            rest = [] if pid in self._own else _stat_fields(pid)
            with contextlib.suppress(IndexError, ValueError):
                if int(rest[2]) != ours:
                    found.append((pid, int(rest[2]), rest[0]))
        return found


# One per process: the children are the process's, whichever thread started them.
REAPER = Reaper()

"""glibc's malloc arenas, capped: a long-running daemon with many threads keeps less.

glibc gives a thread that finds the existing arenas busy an arena of its own, up to
eight per core, and each keeps freed memory up to its own trim threshold and fragments
on its own. The daemon runs some twenty threads that allocate now and then (each sink's
worker, Slack's socket, the HTTP server's), so with five sinks 0.7 MiB of its VmRSS
was arenas' (MALLOC_ARENA_MAX=2 in its environment: 50.1 -> 49.3 MiB after 20 events,
bench/compare_release.py's scenario), and one arena kept 0.6 MiB less than two (49.9 ->
49.3 MiB, issue 26). Python's own allocator serves the small objects and the arena only
the larger ones; the threads take turns at the GIL anyway, so they seldom wait for the
arena's lock (idle and per-poll CPU did not move). Capped from `sebridge run` before its
threads start (cli/commands.py). A MALLOC_ARENA_MAX in the environment is the
operator's and is left alone; on a C library without mallopt, this does nothing.
"""

from __future__ import annotations

import os

__all__ = ["ARENAS", "cap_malloc_arenas"]

ARENAS = 1
_M_ARENA_MAX = -8  # glibc's malloc.h


def cap_malloc_arenas() -> bool:
    """Cap glibc's malloc arenas at ARENAS; True when capped here."""
    if "MALLOC_ARENA_MAX" in os.environ:
        return False
    import ctypes  # here only: about 0.5 MiB, less than the arenas it saves

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    return bool(mallopt(_M_ARENA_MAX, ARENAS) == 1)

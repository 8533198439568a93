"""What an attempt of a hook cut short left running: found and ended before the next.

A daemon killed -9 mid-hook leaves the hook's process group behind (unless
systemd ends the unit's cgroup), and two attempts must never run at once. Each
attempt's process group is recorded in the store as it starts (its id and its
leader's identity: this boot's id and the leader's start time, /proc/<pid>/stat
field 22), so the restart ends exactly that group, whatever environment its
processes keep (`env -i`, sudo's env_reset, `su -`); a pid given since to
another process has another start time and is left alone. The leader may have
exited while its children run on: they are still the group (Linux gives its id
to no new process while one of them lives). The SEBRIDGE_* variables in
/proc/*/environ stay a second net, for the instant between the hook's start
and its record (a crash there) and for a child that left the group but kept
its environment. Linux /proc; elsewhere nothing is found. See
docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

import functools
import logging
import os

from sebridge.hooks.process import end_group
from sebridge.hooks.reaper import stat_of

__all__ = ["end_environ_leftovers", "end_recorded_group", "group_identity"]

log = logging.getLogger("sebridge.hooks")

_BOOT_ID = "/proc/sys/kernel/random/boot_id"


def group_identity(pid: int) -> str:
    """ "<boot id>:<start time>" of a running process (the group's leader, just started);
    "" where /proc cannot say (nothing is then recorded, nor ended by it)."""
    start = stat_of(pid)
    boot = _boot_id()
    return f"{boot}:{start[1]}" if start is not None and boot else ""


def end_recorded_group(pgid: int, identity: str, *, what: str) -> bool:
    """End the recorded group if it still runs: its leader with the recorded start time,
    or, the leader gone, the processes left in its group (none started before it).
    True when something was ended."""
    boot, _, started = identity.partition(":")
    if not started.isdigit() or boot != _boot_id() or pgid == os.getpgrp():
        return False  # another boot's: nothing of it runs (and never our own group)
    members = _group_members(pgid)
    leader = members.get(pgid)
    if leader is not None and leader != int(started):
        return False  # the id is another process's now: ours is gone
    if not members or min(members.values()) < int(started):
        return False
    log.warning("%s: ended process group %d, left by an attempt cut short", what, pgid)
    end_group(pgid)
    return True


def end_environ_leftovers(
    event_id: str, *, hook: str, stage: str, vm_name: str, left_by: str = "an attempt cut short"
) -> int:
    """The second net: end the groups of processes whose environment names this attempt
    (every SEBRIDGE_* variable the hook was given, inherited unless a hook clears it).
    Returns the groups ended."""
    wanted = {
        os.fsencode(f"{name}={value}")
        for name, value in (
            ("SEBRIDGE_EVENT_ID", event_id),
            ("SEBRIDGE_HOOK", hook),
            ("SEBRIDGE_STAGE", stage),
            ("SEBRIDGE_VM_NAME", vm_name),
        )
    }
    groups: set[int] = set()
    for pid in _pids():
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if wanted <= set(fh.read().split(b"\0")):
                    groups.add(os.getpgid(pid))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    groups.discard(os.getpgrp())
    for group in groups:
        log.warning("%s hook %s: ended process group %d, left by %s", stage, hook, group, left_by)
        end_group(group)
    return len(groups)


def _pids() -> list[int]:
    try:
        return [int(e.name) for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return []


def _group_members(pgid: int) -> dict[int, int]:
    """The processes in group `pgid`: pid -> start time."""
    members = {}
    for pid in _pids():
        stat = stat_of(pid)
        if stat is not None and stat[0] == pgid:
            members[pid] = stat[1]
    return members


@functools.cache  # one per boot: read once
def _boot_id() -> str:
    try:
        with open(_BOOT_ID, encoding="ascii") as fh:
            return fh.read().strip()
    except OSError:
        return ""

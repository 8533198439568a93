"""Running one hook: an argv without a shell, the event in its environment and on stdin.

A hook is a program the operator wrote (drain a load balancer, cordon a
Kubernetes node). It runs in a process group of its own, so a timeout kills
everything it started, not only the first process; and so does its end:
children left behind by a hook that exited (a `sleep &` holding our pipe)
are killed too, because nothing waits for them and they would keep the
output pipe open. Output (stdout and stderr together) is kept bounded: the
tail is what people need when a drain fails. The event goes to its stdin
from a thread of its own, while the timeout runs: a hook that never reads
stdin (a pipe holds 64 KiB; an event's Description may be longer) still ends
at its timeout. See docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import select
import signal
import subprocess
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import IO, Protocol

from sebridge.imds.echo import as_imds
from sebridge.model import ScheduledEvent

__all__ = [
    "HookCommand",
    "HookOutcome",
    "HookSpec",
    "end_group",
    "end_leftovers",
    "hook_environment",
    "run_hook",
]

log = logging.getLogger("sebridge.hooks")

# Bytes of output kept (the tail); a hook that prints megabytes costs this much.
OUTPUT_LIMIT = 16 * 1024
# After the hook's own process exits, how long its output may still trickle in.
_DRAIN_AFTER_EXIT = 0.5
# After SIGTERM to a timed-out group, how long before SIGKILL.
_TERM_GRACE = 2.0


class HookCommand(Protocol):
    """A configured hook ([hooks.<name>]: config_policy.HookSettings is one)."""

    @property
    def name(self) -> str: ...

    @property
    def command(self) -> tuple[str, ...]: ...

    @property
    def timeout(self) -> float: ...

    @property
    def retries(self) -> int: ...

    @property
    def retry_delay(self) -> float: ...


@dataclass(frozen=True)
class HookSpec:
    """A hook given in code (tests, benchmarks): what [hooks.<name>] configures."""

    name: str
    command: tuple[str, ...]
    timeout: float = 300.0
    retries: int = 0
    retry_delay: float = 30.0


@dataclass(frozen=True)
class HookOutcome:
    """How one run of a hook ended.

    Args:
        exit_code: the process's exit code; negative: killed by that signal; None: it
            never started (`error` says why) or was killed at its timeout.
        output: the tail of stdout and stderr (decoded leniently, at most OUTPUT_LIMIT).
    """

    succeeded: bool
    exit_code: int | None
    timed_out: bool
    seconds: float
    output: str
    error: str = ""

    def why(self) -> str:
        """How it failed, for people: "exit 1", "timed out after 300 s", "could not start"."""
        if self.error:
            return self.error
        if self.timed_out:
            return f"timed out after {self.seconds:.0f} s"
        if self.exit_code is not None and self.exit_code < 0:
            return f"killed by signal {-self.exit_code}"
        return f"exit {self.exit_code}"


def hook_environment(
    event: ScheduledEvent, *, hook: str, stage: str, vm_name: str
) -> dict[str, str]:
    """The SEBRIDGE_* variables a hook receives (beside the daemon's own environment)."""
    not_before = event.not_before.strftime("%Y-%m-%dT%H:%M:%SZ") if event.not_before else ""
    duration = event.duration_seconds
    return {
        "SEBRIDGE_EVENT_ID": event.event_id,
        "SEBRIDGE_EVENT_TYPE": event.event_type,
        "SEBRIDGE_EVENT_SOURCE": event.source or "",
        "SEBRIDGE_NOT_BEFORE": not_before,
        "SEBRIDGE_DURATION_SECONDS": "" if duration is None else str(duration),
        "SEBRIDGE_RESOURCES": ",".join(event.resources),
        "SEBRIDGE_VM_NAME": vm_name,
        "SEBRIDGE_HOOK": hook,
        "SEBRIDGE_STAGE": stage,
    }


def run_hook(
    spec: HookCommand,
    event: ScheduledEvent,
    *,
    stage: str,
    vm_name: str,
    base_env: Mapping[str, str] | None = None,
    started: Callable[[int], None] = lambda pgid: None,
) -> HookOutcome:
    """Run `spec` for `event` to its end (or its timeout); never raises for the hook's faults.
    `started` gets the hook's process group id (to end it early: `end_group`)."""
    env = dict(os.environ if base_env is None else base_env)
    env.update(hook_environment(event, hook=spec.name, stage=stage, vm_name=vm_name))
    stdin = json.dumps(as_imds(event)).encode("utf-8", "backslashreplace")
    began = time.monotonic()
    try:
        # The operator's own argv from the config, never a shell: S603 is what we want.
        process = subprocess.Popen(  # noqa: S603
            list(spec.command),
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            env=env,
            start_new_session=True,  # its own process group: killed as a whole
            close_fds=True,
        )
    except OSError as exc:
        why = f"could not start {spec.command[0]!r}: {exc.strerror or exc}"
        return HookOutcome(False, None, False, time.monotonic() - began, "", error=why)
    assert process.stdin is not None and process.stdout is not None
    started(process.pid)
    tail = _Tail(process.stdout)
    tail.start()
    feed = _Feed(process.stdin, stdin)  # written while the timeout runs, never before it
    feed.start()
    timed_out = False
    try:
        process.wait(timeout=spec.timeout)
    except subprocess.TimeoutExpired:
        timed_out = True
        _end_group(process, grace=_TERM_GRACE)
    seconds = time.monotonic() - began
    feed.stop()  # what the hook did not read is not written
    # Whatever the hook left behind goes with it (see the module's docstring).
    tail.join(_DRAIN_AFTER_EXIT)
    _kill_group(process.pid, signal.SIGKILL)
    tail.join(_DRAIN_AFTER_EXIT)
    process.stdout.close()
    code = None if timed_out else process.returncode
    return HookOutcome(code == 0, code, timed_out, seconds, tail.text())


def _end_group(process: subprocess.Popen[bytes], *, grace: float) -> None:
    """SIGTERM to the whole group, then SIGKILL after `grace`."""
    _kill_group(process.pid, signal.SIGTERM)
    try:
        process.wait(timeout=grace)
    except subprocess.TimeoutExpired:
        _kill_group(process.pid, signal.SIGKILL)
        process.wait()


def end_group(pgid: int, grace: float = 0.5) -> None:
    """End a running hook's whole process group now (the daemon stops): SIGTERM, then
    SIGKILL after `grace` for what is left."""
    _kill_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(pgid):
        time.sleep(0.02)
    _kill_group(pgid, signal.SIGKILL)


def end_leftovers(event_id: str, *, hook: str, stage: str, vm_name: str) -> int:
    """End what an earlier attempt of this hook left running: a daemon killed -9 mid-hook
    leaves the hook's own process group behind (unless systemd ends the unit's cgroup), and
    two attempts must never run at once. Found by the SEBRIDGE_* variables every process of
    the hook inherits (Linux /proc; elsewhere nothing is found). Returns the groups ended."""
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
    try:
        entries = [e.name for e in os.scandir("/proc") if e.name.isdigit()]
    except OSError:
        return 0
    for pid in entries:
        try:
            with open(f"/proc/{pid}/environ", "rb") as fh:
                if wanted <= set(fh.read().split(b"\0")):
                    groups.add(os.getpgid(int(pid)))
        except OSError:  # gone meanwhile, or not ours to read
            continue
    groups.discard(os.getpgrp())
    for group in groups:
        log.warning(
            "%s hook %s: ended process group %d, left by an attempt cut short", stage, hook, group
        )
        end_group(group)
    return len(groups)


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(pgid, sig)


class _Tail(threading.Thread):
    """Reads a pipe to its end on its own thread, keeping the last OUTPUT_LIMIT bytes."""

    def __init__(self, pipe: IO[bytes]) -> None:
        super().__init__(name="hook-output", daemon=True)
        self._pipe = pipe
        self._kept = bytearray()
        self._lock = threading.Lock()

    def run(self) -> None:
        try:
            while chunk := self._pipe.read1(65536):  # type: ignore[attr-defined]
                with self._lock:
                    self._kept += chunk
                    del self._kept[:-OUTPUT_LIMIT]
        except (OSError, ValueError):
            pass  # closed under us after the drain time

    def text(self) -> str:
        with self._lock:
            return bytes(self._kept).decode("utf-8", "replace")


class _Feed(threading.Thread):
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

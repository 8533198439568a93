"""Running one hook: an argv without a shell, the event in its environment and on stdin.

A hook is a program the operator wrote (drain a load balancer, cordon a
Kubernetes node). Its environment is clean (hooks/environment.py); stdin has
the whole event always. What it prints is masked of every secret the config
holds (a Masker, config/masked.py) before anything keeps it.

It runs in a process group of its own, so a timeout kills everything it
started, not only the first process; and so does its end: children left
behind by a hook that exited (a `sleep &` holding our pipe) are killed too,
because nothing waits for them and they would keep the output pipe open.
Output (stdout and stderr together) is kept bounded: the tail is what people
need when a drain fails. The event goes to its stdin from a thread of its
own, while the timeout runs (hooks/pipes.py): a hook that never reads stdin (a
pipe holds 64 KiB; an event's Description may be longer) still ends at its
timeout. An
attempt a crash cut short is ended by hooks/leftovers.py. See
docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import subprocess
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Protocol

from sebridge.hooks.environment import ENV_VALUE_LIMIT, clean_environment, hook_environment, spilled
from sebridge.hooks.pipes import InputFeed, OutputTail
from sebridge.hooks.reaper import REAPER
from sebridge.imds.echo import as_imds
from sebridge.kernel.redact import Masker
from sebridge.model import ScheduledEvent

__all__ = [
    "ENV_VALUE_LIMIT",
    "HookCommand",
    "HookOutcome",
    "HookSpec",
    "end_group",
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

    @property
    def env(self) -> Mapping[str, str]: ...

    @property
    def inherit_env(self) -> tuple[str, ...]: ...


@dataclass(frozen=True)
class HookSpec:
    """A hook given in code (tests, benchmarks): what [hooks.<name>] configures."""

    name: str
    command: tuple[str, ...]
    timeout: float = 300.0
    retries: int = 0
    retry_delay: float = 30.0
    env: Mapping[str, str] = field(default_factory=dict)
    inherit_env: tuple[str, ...] = ()


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


def run_hook(
    spec: HookCommand,
    event: ScheduledEvent,
    *,
    stage: str,
    vm_name: str,
    base_env: Mapping[str, str] | None = None,
    mask: Masker | None = None,
    started: Callable[[int], None] = lambda pgid: None,
    strays: Callable[[], None] = lambda: None,
) -> HookOutcome:
    """Run `spec` for `event` to its end (or its timeout); never raises for the hook's faults.
    `base_env`: the daemon's environment (default os.environ), of which the hook gets only
    what clean_environment() takes. `mask`: the secrets its output must not show.
    `started` gets the hook's process group id (to end it early: `end_group`); `strays`
    is called once its group is ended, to end what left the group (hooks/attempt.py)."""
    env = clean_environment(
        spec.inherit_env, spec.env, os.environ if base_env is None else base_env
    )
    variables = hook_environment(event, hook=spec.name, stage=stage, vm_name=vm_name)
    try:
        with spilled(variables) as passed:
            env.update(passed)
            return _run(spec, env, event, mask or Masker(), started=started, strays=strays)
    except OSError as exc:  # a long value's file could not be written (a full /tmp)
        why = f"could not write its long SEBRIDGE_* values to a file: {exc.strerror or exc}"
        return HookOutcome(False, None, False, 0.0, "", error=why)


def _run(
    spec: HookCommand,
    env: dict[str, str],
    event: ScheduledEvent,
    mask: Masker,
    *,
    started: Callable[[int], None],
    strays: Callable[[], None],
) -> HookOutcome:
    stdin = json.dumps(as_imds(event)).encode("utf-8", "backslashreplace")
    began = time.monotonic()
    try:
        with REAPER.starting() as ours:  # its status is its Popen's, never the reaper's
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
            ours(process.pid)
    except OSError as exc:
        why = f"could not start {spec.command[0]!r}: {exc.strerror or exc}"
        return HookOutcome(False, None, False, time.monotonic() - began, "", error=why)
    assert process.stdin is not None and process.stdout is not None
    tail = OutputTail(process.stdout, mask, keep=OUTPUT_LIMIT)
    tail.start()
    feed = InputFeed(process.stdin, stdin)  # written while the timeout runs, never before it
    feed.start()
    started(process.pid)  # (its record in the store overlaps the hook's run)
    timed_out = False
    try:
        # From its start: time `started` took (its record in the store) is the hook's too.
        process.wait(timeout=max(0.0, spec.timeout - (time.monotonic() - began)))
    except subprocess.TimeoutExpired:
        timed_out = True
        _end_group(process, grace=_TERM_GRACE)
    seconds = time.monotonic() - began
    feed.stop()  # what the hook did not read is not written
    # Whatever the hook left behind goes with it (see the module's docstring).
    tail.join(_DRAIN_AFTER_EXIT)
    _kill_group(process.pid, signal.SIGKILL)
    REAPER.waited(process.pid)
    strays()  # what left the group may hold the output pipe open too
    REAPER.reap()  # what the group's end left dead (hooks/reaper.py)
    tail.join(_DRAIN_AFTER_EXIT)
    # A process still holding the pipe (one no subreaper brought back) must not hold the
    # attempt: closing it waits for the reader, which waits for that process. The reader
    # closes it at the end of the output instead.
    if not tail.is_alive():
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


def _group_alive(pgid: int) -> bool:
    try:
        os.killpg(pgid, 0)
    except (ProcessLookupError, PermissionError):
        return False
    return True


def _kill_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):  # the group is gone already
        os.killpg(pgid, sig)

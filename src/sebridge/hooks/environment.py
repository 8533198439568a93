"""What a hook's process is given besides its argv: a clean environment and the event.

A hook gets PATH, HOME and LANG, the SEBRIDGE_* variables, and what its `env`
and `inherit_env` name; never the daemon's own tokens unless named. A SEBRIDGE_*
value too long for an environment (an EventId or Resources of megabytes) is in a
file instead, SEBRIDGE_<NAME>_FILE, in a private directory removed after the run
(hooks/process.py gives the hook the whole event on stdin always). See
docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

import contextlib
import os
import shutil
import tempfile
from collections.abc import Iterator, Mapping, Sequence

from sebridge.model import ScheduledEvent

__all__ = ["ENV_VALUE_LIMIT", "clean_environment", "hook_environment", "spilled"]

# A SEBRIDGE_* value longer than this (UTF-8 bytes) goes in a file: Linux takes no one
# variable over 128 KiB ("Argument list too long"), and all share the argv's room.
ENV_VALUE_LIMIT = 32 * 1024
# The daemon's variables every hook gets (when set): finding programs, home, language.
_PASSED = ("PATH", "HOME", "LANG")
# PATH for a daemon started without one (as execvp would search).
_DEFAULT_PATH = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"


def clean_environment(
    inherit_env: Sequence[str], extra: Mapping[str, str], environ: Mapping[str, str]
) -> dict[str, str]:
    """A hook's environment but for the SEBRIDGE_* variables: PATH, HOME and LANG from
    the daemon's `environ`, the variables its `inherit_env` names that are set there, and
    its `env` (`extra`: the values read when the config was)."""
    env = {name: environ[name] for name in (*_PASSED, *inherit_env) if name in environ}
    env.setdefault("PATH", _DEFAULT_PATH)
    env.update(extra)
    return env


def hook_environment(
    event: ScheduledEvent, *, hook: str, stage: str, vm_name: str
) -> dict[str, str]:
    """The SEBRIDGE_* variables a hook receives (run_hook puts a long one in a file)."""
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


@contextlib.contextmanager
def spilled(variables: Mapping[str, str]) -> Iterator[dict[str, str]]:
    """`variables`, each too long for an environment replaced by NAME_FILE naming a file
    that holds it (in a directory of its own, only ours to read), removed afterwards."""
    long = {
        k: v for k, v in variables.items() if len(v.encode("utf-8", "replace")) > ENV_VALUE_LIMIT
    }
    if not long:
        yield dict(variables)
        return
    folder = tempfile.mkdtemp(prefix="sebridge-hook-")  # mode 0700
    try:
        passed = {k: v for k, v in variables.items() if k not in long}
        for name, value in long.items():
            path = os.path.join(folder, name.lower())
            fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
            with os.fdopen(fd, "wb") as fh:
                fh.write(value.encode("utf-8", "backslashreplace"))
            passed[f"{name}_FILE"] = path
        yield passed
    finally:
        shutil.rmtree(folder, ignore_errors=True)

"""`sebridge run` as PID 1 of its own PID namespace, as a container without an init starts it
(issue 37, item 1): what its hooks leave behind comes back to it and is reaped, and SIGTERM
still stops it within its grace. See hooks/reaper.py."""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from helpers import cli_env, wait_until, write_config
from sebridge.imds.simulator import Simulator

pytestmark = pytest.mark.slow

UNSHARE = ["unshare", "--pid", "--fork", "--mount-proc"]


def _unshare_works() -> bool:
    if os.geteuid() != 0 or shutil.which("unshare") is None:
        return False
    done = subprocess.run([*UNSHARE, "true"], capture_output=True, check=False, timeout=10)
    return done.returncode == 0


needs_unshare = pytest.mark.skipif(
    not _unshare_works(), reason="needs root and unshare --pid (util-linux)"
)


def children(pid: int) -> list[int]:
    found: list[int] = []
    for task in Path(f"/proc/{pid}/task").iterdir():
        found += [int(p) for p in (task / "children").read_text().split()]
    return found


def state(pid: int) -> str:
    text = Path(f"/proc/{pid}/stat").read_text()
    return text[text.rfind(")") + 2]


def descendants(pid: int) -> list[int]:
    out, todo = [], children(pid)
    while todo:
        child = todo.pop()
        out.append(child)
        try:
            todo += children(child)
        except FileNotFoundError:
            continue
    return out


@needs_unshare
def test_pid_1_reaps_what_its_hooks_leave_and_stops_on_sigterm(
    sim: Simulator, tmp_path: Path
) -> None:
    """The drain backgrounds a child in its group and one in a session of its own (setsid),
    each outliving the hook by a second; three events later no zombie is left under
    sebridge, nor any of those children."""
    drain = tmp_path / "drain.sh"
    drain.write_text(
        "#!/bin/sh\n(sleep 1; echo done) >/dev/null &\nsetsid sleep 1 >/dev/null 2>&1 &\nexit 0\n"
    )
    drain.chmod(0o755)
    config = write_config(
        tmp_path / "sebridge.toml",
        endpoint=sim.url,
        db=tmp_path / "state.db",
        vm_name="vm0",
        extra=(
            '[[policy.rules]]\nname = "drain first"\naction = "approve"\nprepare = ["drain"]\n'
            f"[hooks.drain]\ncommand = {json.dumps([str(drain)])}\ntimeout = 30\n"
        ),
    )
    log = tmp_path / "daemon.log"
    with open(log, "ab") as err:
        outer = subprocess.Popen(
            [*UNSHARE, sys.executable, "-m", "sebridge", "run", "--config", str(config)],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=cli_env(),
        )
    try:
        wait_until(lambda: children(outer.pid) != [], 10, message="unshare's child")
        (sebridge,) = children(outer.pid)  # PID 1 inside its namespace
        ids = []
        for _ in range(3):
            ids.append(sim.schedule("Reboot"))
            wait_until(lambda: sim.start_requests == ids, 30, message=log.read_text())
        # The children outlive the hook by a second; the reaper's timer runs every 5 s.
        wait_until(
            lambda: descendants(sebridge) == [],
            15,
            message=lambda: (
                "left under sebridge: "
                + str([(p, _cmd(p), state(p)) for p in descendants(sebridge)])
            ),
        )
        zombies = [p for p in descendants(sebridge) if state(p) == "Z"]
        assert zombies == []
        os.kill(sebridge, signal.SIGTERM)
        began = time.monotonic()
        outer.wait(timeout=15)
        assert time.monotonic() - began < 2.0 + 5.0  # shutdown_grace_seconds and a margin
        assert outer.returncode == 0, log.read_text()
    finally:
        if outer.poll() is None:
            outer.kill()
            outer.wait()


def _cmd(pid: int) -> str:
    try:
        return Path(f"/proc/{pid}/cmdline").read_bytes().replace(b"\0", b" ").decode()
    except OSError:
        return ""

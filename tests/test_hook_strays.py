"""A hook's child that leaves both its process group and its environment (`setsid env -i`)
comes back to the running daemon, a child subreaper, and ends with its attempt: the next
attempt never runs beside it (issue 37, item 7). See hooks/reaper.py."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path

import pytest

from helpers import DaemonProcess, wait_until, write_config
from sebridge.imds.simulator import Simulator

pytestmark = pytest.mark.slow


def alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return state[state.rfind(")") + 2] != "Z"


def test_an_escaped_child_ends_with_its_attempt_before_the_retry(
    sim: Simulator, tmp_path: Path, start_daemon: Callable[..., DaemonProcess]
) -> None:
    strays, overlap = tmp_path / "strays", tmp_path / "overlap"
    drain = tmp_path / "drain.sh"
    drain.write_text(
        "#!/bin/sh\n"
        # Is an earlier attempt's child still running? Then two attempts run at once.
        f'[ -f {strays} ] && while read p; do [ -d /proc/$p ] && grep -qv "^[0-9]* ([^)]*) Z" '
        f"/proc/$p/stat && echo $p >> {overlap}; done < {strays}\n"
        f"setsid env -i /bin/sh -c 'echo $$ >> {strays}; exec sleep 60' &\n"
        "sleep 0.3\nexit 1\n"
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
            'retries = 1\nretry_delay = "1s"\n'
        ),
    )
    daemon = start_daemon(config, sim)
    sim.schedule("Reboot", notice=900)
    wait_until(
        lambda: strays.exists() and len(strays.read_text().split()) == 2,
        30,
        message=daemon.log_text,
    )
    pids = [int(p) for p in strays.read_text().split()]
    wait_until(lambda: not any(alive(p) for p in pids), 10, message=f"strays alive: {pids}")
    assert not overlap.exists(), overlap.read_text()
    assert os.getpid() not in pids
    assert sim.start_requests == []  # held: both attempts failed

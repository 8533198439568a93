"""How long `sebridge run` takes to exit after SIGTERM, whatever IMDS does.

Issue 10, item 5: SIGTERM while the first IMDS call waited out its 120 s
timeout took 116 s. The target is dispatch.shutdown_grace_seconds plus a
second. Each case runs a real `sebridge run` against the built-in simulator
(or, for the compute-name call, a stand-in that never answers it), waits
until the daemon is inside the IMDS call, sends SIGTERM and times the exit
on the monotonic clock. The same run's idle daemon is the baseline.

    .venv/bin/python bench/stop_time.py [--rounds 3] [--grace 2]
"""

from __future__ import annotations

import argparse
import os
import signal
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

from sebridge.imds.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "tests"))  # the stand-in IMDS lives in tests/fakes
from fakes.imds_fixture import FixtureImds  # noqa: E402


def _config(folder: Path, endpoint: str, grace: float, vm_name: str = "") -> Path:
    """vm_name "" makes the first tick ask IMDS for the compute name."""
    path = folder / "sebridge.toml"
    path.write_text(
        f'[imds]\nendpoint = "{endpoint}"\npoll_interval = 0.2\ntimeout = 120\n'
        f'vm_name = "{vm_name}"\n'
        f'[store]\nurl = "sqlite:///{folder / "state.db"}"\n'
        f"[dispatch]\nshutdown_grace_seconds = {grace}\n[console]\nenabled = false\n"
    )
    return path


def _wait(predicate: Callable[[], bool], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise SystemExit(f"timed out waiting for {what}")
        time.sleep(0.02)


def _stop_seconds(config: Path, inside: Callable[[], bool]) -> float:
    env = {k: v for k, v in os.environ.items() if k != "SEBRIDGE_CONFIG"}
    proc = subprocess.Popen(
        [sys.executable, "-m", "sebridge", "run", "--config", str(config)],
        stdin=subprocess.DEVNULL,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
        env=env,
    )
    try:
        _wait(lambda: inside() or proc.poll() is not None, 60, "the daemon inside its IMDS call")
        time.sleep(0.3)  # well inside: signal handlers installed, the call blocked
        start = time.monotonic()
        proc.send_signal(signal.SIGTERM)
        proc.wait(300)
        return time.monotonic() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


def _case(name: str, grace: float) -> float:
    with tempfile.TemporaryDirectory(prefix="sebridge-stop-") as tmp:
        folder = Path(tmp)
        if name == "compute name hangs":
            with FixtureImds({"DocumentIncarnation": 1, "Events": []}, hang_compute=True) as imds:
                return _stop_seconds(_config(folder, imds.url, grace), imds.hanging.is_set)
        with Simulator(port=0) as sim:
            config = _config(folder, sim.url, grace, vm_name=sim.vm_name)
            if name == "idle (baseline)":
                gets = lambda: any(r.path == "/metadata/scheduledevents" for r in sim.requests)  # noqa: E731
                return _stop_seconds(config, gets)
            if name == "first call hangs":
                sim.inject("hang", seconds=600)
                return _stop_seconds(config, lambda: not sim.faults)
            sim.inject("slow_first", seconds=0.01)  # a later poll: the first one answered
            sim.inject("hang", seconds=600)
            return _stop_seconds(config, lambda: not sim.faults)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--grace", type=float, default=2.0)
    parser.add_argument("--skip-compute", action="store_true", help="leave out the last case")
    args = parser.parse_args()
    cases = ["idle (baseline)", "first call hangs", "later poll hangs", "compute name hangs"]
    cases = cases[:-1] if args.skip_compute else cases
    print(f"SIGTERM -> exit, shutdown_grace_seconds = {args.grace:g}, imds.timeout = 120")
    print(f"target: <= {args.grace + 1:g} s in every case\n")
    baseline = 0.0
    for name in cases:
        times = [_case(name, args.grace) for _ in range(args.rounds)]
        worst = max(times)
        baseline = baseline or worst
        print(
            f"{name:<20} max {worst:6.2f} s  (runs: {', '.join(f'{t:.2f}' for t in times)})  "
            f"{worst / baseline:5.1f}x baseline  {'ok' if worst <= args.grace + 1 else 'MISSED'}"
        )


if __name__ == "__main__":
    main()

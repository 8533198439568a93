"""`serve()`: the blocking entry point behind `sebridge simulate`.

Prints where it listens, then one line per lifecycle change, approval and
fault served, until SIGINT/SIGTERM (or `stop` is set), then shuts down cleanly.
"""

from __future__ import annotations

import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path
from types import FrameType
from typing import Any, TextIO

from sebridge.imds.simulator.scenario import DEMO, Scenario, demo_scenario, read_scenario
from sebridge.imds.simulator.service import Simulator

__all__ = ["serve"]

# How often lifecycle changes are noticed when nobody polls (the state is lazy).
_REFRESH_SECONDS = 0.25


class _ConsoleLog:
    """Thread-safe line writer with a local HH:MM:SS prefix from the simulator's clock."""

    def __init__(self, out: TextIO, clock: Callable[[], float]) -> None:
        self._out = out
        self._clock = clock
        self._lock = threading.Lock()

    def __call__(self, line: str) -> None:
        stamp = time.strftime("%H:%M:%S", time.localtime(self._clock()))
        self.write(f"{stamp} {line}")

    def write(self, line: str) -> None:
        with self._lock:
            try:
                self._out.write(line + "\n")
                self._out.flush()
            except (BrokenPipeError, ValueError):
                # The reader went away (`| head`): serving matters more than telling.
                pass


def _load(scenario_path: str | os.PathLike[str] | None) -> Scenario | None:
    if scenario_path is None:
        return None
    # "demo" names the shipped scenario unless a file of that name exists.
    if os.fspath(scenario_path) == DEMO and not Path(DEMO).exists():
        return demo_scenario()
    return read_scenario(scenario_path)


def _install_signals(stop: threading.Event) -> dict[int, Any]:
    """Route SIGINT/SIGTERM to `stop`; only possible from the main thread."""
    if threading.current_thread() is not threading.main_thread():
        return {}

    def handler(signum: int, frame: FrameType | None) -> None:
        stop.set()

    return {sig: signal.signal(sig, handler) for sig in (signal.SIGINT, signal.SIGTERM)}


def serve(
    host: str = "127.0.0.1",
    port: int = 8080,
    scenario_path: str | os.PathLike[str] | None = None,
    *,
    time_scale: float | None = None,
    vm_name: str | None = None,
    terminate_notice: float | None = None,
    approval_delay: float | None = None,
    tags: dict[str, str] | None = None,
    rate_limit: int | None = None,
    out: TextIO | None = None,
    err: TextIO | None = None,
    clock: Callable[[], float] = time.time,
    stop: threading.Event | None = None,
) -> int:
    """Run the simulator until SIGINT/SIGTERM or `stop` is set; returns the exit status.

    Settings given here win over the scenario file's, which win over the defaults.

    Args:
        scenario_path: a TOML/JSON scenario file, or "demo" for the shipped one.
        out: where the listening line and event lines go (default stdout).
        err: where errors go (default stderr).
        stop: set it to stop (tests, embedding); signals also set it.

    Returns:
        0 after a clean shutdown, 2 for a bad scenario or setting, 1 if it cannot listen.
    """
    out = out if out is not None else sys.stdout
    err = err if err is not None else sys.stderr
    try:
        scenario = _load(scenario_path)
    except ValueError as exc:
        print(f"sebridge simulate: {exc}", file=err, flush=True)
        return 2
    explicit = {
        "time_scale": time_scale,
        "vm_name": vm_name,
        "terminate_notice": terminate_notice,
        "approval_delay": approval_delay,
        "tags": tags,
    }
    settings = (scenario.settings() if scenario else {}) | {
        key: value for key, value in explicit.items() if value is not None
    }
    console = _ConsoleLog(out, clock)
    try:
        sim = Simulator(host, port, clock=clock, rate_limit=rate_limit, log=console, **settings)
    except ValueError as exc:
        print(f"sebridge simulate: {exc}", file=err, flush=True)
        return 2
    try:
        sim.start()
    except OSError as exc:
        print(f"sebridge simulate: cannot listen on {host}:{port}: {exc}", file=err, flush=True)
        return 1
    stop = stop if stop is not None else threading.Event()
    previous = _install_signals(stop)
    try:
        console.write(f"sebridge simulator listening on {sim.url} (time scale {sim.time_scale:g})")
        if scenario is not None:
            try:
                ids = sim.load_scenario(scenario)
            except ValueError as exc:
                print(f"sebridge simulate: {exc}", file=err, flush=True)
                return 2
            console(f"loaded scenario {scenario.source}: {len(ids)} event(s)")
        while not stop.wait(_REFRESH_SECONDS):
            sim.refresh()
    finally:
        sim.stop()
        for sig, old in previous.items():
            signal.signal(sig, old)
    console("sebridge simulator stopped")
    return 0

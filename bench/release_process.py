"""One release's daemon as a process, for bench/compare_release.py: CPU, memory, start-up.

Each figure runs `python -m sebridge run` from the side's copy of its `src/` (Side) against
an IMDS simulator of this process; bench/release_http.py takes the HTTP figures the same way.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import ExitStack, contextmanager
from dataclasses import dataclass, field
from pathlib import Path

from all_sinks_rss import Fakes, warm_up
from harness import (
    BenchError,
    Children,
    check_alive,
    daemon_sections,
    event_gets,
    sample,
    simulator,
    wait_for,
    write_sections,
)
from poll_cost import cpu_per_call, start_simulator
from sebridge.imds.simulator import Simulator

EVENTS = 20  # the Reboots of the seven sinks' warm-up (all_sinks_rss.py's default)


@dataclass
class Side:
    """One release: its name, the copy of its src/ it runs from."""

    name: str
    src: Path

    def env(self, *, bytecode: bool = True) -> dict[str, str]:
        env = dict(os.environ, PYTHONPATH=str(self.src))  # one malloc arena: Children.start
        env.pop("PYTHONDONTWRITEBYTECODE", None)
        if not bytecode:
            env["PYTHONDONTWRITEBYTECODE"] = "1"
        return env

    def drop_bytecode(self) -> None:
        for cache in self.src.rglob("__pycache__"):
            shutil.rmtree(cache)


@dataclass
class Taken:
    """One side's figures of a round: the values, why a figure could not be taken, how a
    figure was measured another way (no new/old then), and what to say beneath a line."""

    values: dict[str, float] = field(default_factory=dict)
    missing: dict[str, str] = field(default_factory=dict)
    other_way: dict[str, str] = field(default_factory=dict)
    notes: dict[str, str] = field(default_factory=dict)

    def take(self, side: str, keys: Sequence[str], measure: Callable[[], None]) -> None:
        """Runs `measure`; when it cannot take its figures, those of `keys` it did not fill
        say why (the whole message goes to stderr), and the round goes on."""
        try:
            measure()
        except BenchError as exc:
            print(f"{side}: {', '.join(keys)} not taken: {exc}", file=sys.stderr, flush=True)
            lines = [line for line in str(exc).splitlines() if line.strip()] or ["(no message)"]
            why = lines[0] if len(lines) == 1 else f"{lines[0]} ... {lines[-1].strip()}"
            for key in keys:
                if key not in self.values:
                    self.missing[key] = why[:160]


@contextmanager
def daemon(
    children: Children, side: Side, config: Path, *, bytecode: bool = True
) -> Iterator[subprocess.Popen[bytes]]:
    """`python -m sebridge run --config CONFIG` of `side`, stderr to daemon.log beside it."""
    log = config.parent / "daemon.log"
    with open(log, "wb") as err:
        proc = children.start(
            [sys.executable, "-m", "sebridge", "run", "--config", str(config)],
            stdout=subprocess.DEVNULL,
            stderr=err,
            env=side.env(bytecode=bytecode),
        )
    try:
        yield proc
    finally:
        children.stop(proc)


def console_config(directory: Path, sim: Simulator, interval: float) -> Path:
    directory.mkdir(parents=True)
    return write_sections(directory, daemon_sections(directory, sim, interval, console=True))


def polling(proc: subprocess.Popen[bytes], sim: Simulator, log: Path, polls: int) -> None:
    wait_for(
        lambda: len(event_gets(sim)) >= polls,
        30,
        "the daemon's first polls",
        lambda: check_alive(proc, log),
    )


def cpu_per_poll(children: Children, side: Side, work: Path, seconds: float) -> float:
    """µs of CPU per unchanged poll at 0.2 s."""
    with simulator() as sim:
        sim.schedule("Reboot")  # a document with an event, unchanged from then on
        config = console_config(work / f"{side.name}-poll", sim, 0.2)
        with daemon(children, side, config) as proc:
            polling(proc, sim, config.parent / "daemon.log", 15)  # past the first writes
            time.sleep(2.5)  # past the write marker's settling (FILE_TICK_NS) and warm-up
            first, gets0 = sample(proc.pid), len(event_gets(sim))
            time.sleep(seconds)
            last, gets1 = sample(proc.pid), len(event_gets(sim))
            check_alive(proc, config.parent / "daemon.log")
    if gets1 <= gets0:
        raise BenchError(f"{side.name}: no poll in the window")
    return (last.run_ns - first.run_ns) / 1000 / (gets1 - gets0)


def idle(children: Children, side: Side, work: Path, seconds: float) -> tuple[float, float]:
    """(ms of CPU per s, VmRSS MiB) of the console-only daemon at poll 1 s."""
    with simulator() as sim:
        config = console_config(work / f"{side.name}-idle", sim, 1.0)
        with daemon(children, side, config) as proc:
            polling(proc, sim, config.parent / "daemon.log", 2)
            time.sleep(3.0)
            first = sample(proc.pid)
            time.sleep(seconds)
            last = sample(proc.pid)
            check_alive(proc, config.parent / "daemon.log")
    cpu = (last.run_ns - first.run_ns) / 1e6 / (last.wall - first.wall)
    return cpu, last.rss_kib / 1024


def seven_sinks(children: Children, side: Side, work: Path, settle: float) -> float:
    """VmRSS MiB with all seven sinks (bench/all_sinks_rss.py's, against the fakes of
    tests/fakes) after its warm-up: EVENTS Reboots asked about and a Redeploy the built-in
    policy approves, each delivered by every sink; then `settle` idle seconds."""
    directory = work / f"{side.name}-seven"
    directory.mkdir(parents=True)
    with ExitStack() as stack:
        sim = stack.enter_context(simulator())
        fakes = Fakes(stack)
        sections = daemon_sections(directory, sim, 1.0, console=True)
        sections.update(fakes.sections(directory))
        config = write_sections(directory, sections)
        log = directory / "daemon.log"
        proc = stack.enter_context(daemon(children, side, config))  # stopped before the fakes

        def alive() -> None:
            check_alive(proc, log)

        polling(proc, sim, log, 2)
        warm_up(sim, EVENTS, alive)
        wait_for(lambda: fakes.took(EVENTS + 1, 1), 60, "every sink's messages", alive)
        time.sleep(settle)
        alive()
        return sample(proc.pid).rss_kib / 1024


def start_to_get(children: Children, side: Side, work: Path, *, bytecode: bool) -> float:
    """Seconds from just before Popen to the first scheduled-events GET (a new store)."""
    with simulator() as sim:
        config = console_config(work / f"{side.name}-start-{bytecode}-{time.time_ns()}", sim, 1.0)
        if not bytecode:
            side.drop_bytecode()
        started = time.time()
        with daemon(children, side, config, bytecode=bytecode) as proc:
            polling(proc, sim, config.parent / "daemon.log", 1)
            return event_gets(sim)[0] - started


def documented_sample(paced_calls: int) -> tuple[float, float]:
    """µs of CPU per call of the documentation's sample: as bench/poll_cost.py measures it
    (call after call), and called every 0.2 s (`paced_calls` calls), as a poller would."""
    import requests

    proc, url = start_simulator()
    try:

        def call() -> object:
            resp = requests.get(
                url + "/metadata/scheduledevents",
                headers={"Metadata": "true"},
                params={"api-version": "2020-07-01"},
            )
            return resp.json()

        hot = cpu_per_call(call, 500)
        spent = 0.0
        for _ in range(paced_calls):
            time.sleep(0.2)
            started = time.process_time()
            call()
            spent += time.process_time() - started
        return hot * 1e6, spent / paced_calls * 1e6
    finally:
        proc.terminate()
        proc.wait(timeout=10)

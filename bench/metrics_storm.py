"""A storm of /metrics scrapes against a running daemon: what it costs, who it starves.

`sebridge run` (JSON lines sink, [http] listen, polling the IMDS simulator every 0.2 s)
takes `--scrapes` concurrent GET /metrics (default 1,000: each on its own connection,
all sent at once from one thread) on the traffic port, while GET /livez is asked every
50 ms on a fresh connection on the probe port ([http] probe_listen) and the simulator
counts the daemon's polls. Printed: /metrics p50/p99 of 200 scrapes one at a time before
the storm (idle; target: p99 under 10 ms), the scrapes' answers (200, 503 with
Retry-After, none), the daemon's CPU seconds from the first scrape sent to the last
answered, /livez p50/p99/max while they were under way (target: p99 under 100 ms), and
polls per second during the storm against the seconds before it.

The storm is sent `--rounds` times (default 10, half a second apart: a single one is over
in a quarter of a second, too short for a percentile), from a process of its own so that
its work does not delay the prober; `--seconds S` keeps each storm's scrapes in flight for
S seconds instead (each answered one asks again at once: thousands a second, far beyond
any Prometheus).

Two daemons, one after the other, in the same run: sebridge as it is (web/metrics_page.py:
one collection a second shared by every scrape, at most two scrapes waiting; the probes
on a listener of their own) and, as the baseline, the same daemon serving /metrics
through prometheus_client's make_wsgi_app (every scrape collects and renders
everything).

    python bench/metrics_storm.py [--scrapes 1000] [--rounds 10] [--seconds 0]
                                  [--parts sebridge,baseline]
"""

from __future__ import annotations

import argparse
import http.client
import multiprocessing
import selectors
import socket
import sys
import threading
import time
from collections import Counter
from dataclasses import dataclass, field
from multiprocessing.connection import Connection
from pathlib import Path

from harness import (
    BenchError,
    Children,
    Report,
    daemon_sections,
    event_gets,
    free_port,
    launch,
    percentile,
    run_parts,
    sample,
    simulator,
    wait_first_polls,
    wait_for,
    write_sections,
)
from sebridge.imds.simulator import Simulator

INTERVAL = 0.2  # the daemon's poll interval
PROBE_EVERY = 0.05
HEALTH_TARGET = 0.100
METRICS_TARGET = 0.010
IDLE_SCRAPES = 200
BEFORE = 3.0  # seconds of polls counted before the storm
STORM_TIMEOUT = 120.0
PAUSE = 0.5  # seconds between two rounds

# Both daemons start through this launcher; the baseline serves /metrics as the daemon
# did before web/metrics_page.py.
LAUNCHER = """
import sys
from sebridge.cli import main as cli
if sys.argv[1] == "baseline":
    from prometheus_client import make_wsgi_app
    import sebridge.web.metrics_page as page

    page.MetricsPage = lambda registry: make_wsgi_app(registry)
sys.exit(cli.main(["run", "--config", sys.argv[2]]))
"""


@dataclass
class Storm:
    """What the scrapes got: a count per status (0: no answer), and the wall times."""

    statuses: Counter[int] = field(default_factory=Counter)
    began: float = 0.0
    ended: float = 0.0


def storm(port: int, count: int, seconds: float) -> Storm:
    """`count` GET /metrics at once, each on its own connection and read to its end; for
    `seconds`, each answered one is asked again at once (so `count` stay in flight)."""
    request = (
        f"GET /metrics HTTP/1.1\r\nHost: 127.0.0.1:{port}\r\n"
        "Accept-Encoding: gzip\r\nConnection: close\r\n\r\n"
    ).encode()
    sel = selectors.DefaultSelector()
    got: dict[socket.socket, bytearray] = {}
    found = Storm(began=time.monotonic())

    def ask() -> None:
        sock = socket.socket()
        sock.setblocking(False)
        sock.connect_ex(("127.0.0.1", port))
        sel.register(sock, selectors.EVENT_WRITE)
        got[sock] = bytearray()

    def done(sock: socket.socket) -> None:
        head = bytes(got.pop(sock)[:32]).split(b" ", 2)
        found.statuses[int(head[1]) if len(head) > 1 and head[1].isdigit() else 0] += 1
        sel.unregister(sock)
        sock.close()
        if time.monotonic() < found.began + seconds:
            ask()

    for _ in range(count):
        ask()
    deadline = found.began + seconds + STORM_TIMEOUT
    while got and time.monotonic() < deadline:
        for key, events in sel.select(timeout=0.5):
            sock = key.fileobj
            assert isinstance(sock, socket.socket)
            if events & selectors.EVENT_WRITE:
                try:
                    sock.send(request)
                    sel.modify(sock, selectors.EVENT_READ)
                except OSError:
                    done(sock)
                continue
            try:
                chunk = sock.recv(65536)
            except OSError:
                chunk = b""
            if chunk:
                got[sock] += chunk
            else:
                done(sock)
    seconds = 0.0  # no more asking
    for sock in list(got):
        done(sock)
    found.ended = time.monotonic()
    return found


def storm_apart(port: int, count: int, seconds: float) -> Storm:
    """storm() in a process of its own: its work does not delay the prober's thread."""
    context = multiprocessing.get_context("fork")
    parent, child = context.Pipe(duplex=False)
    process = context.Process(target=_storm_child, args=(child, port, count, seconds))
    process.start()
    child.close()
    if not parent.poll(seconds + STORM_TIMEOUT + 10):
        process.kill()
        raise BenchError("the storm's process did not finish")
    statuses, began, ended = parent.recv()
    process.join(10)
    # Its clock is this one's: CLOCK_MONOTONIC is system-wide.
    return Storm(Counter(statuses), began, ended)


def _storm_child(pipe: Connection, port: int, count: int, seconds: float) -> None:
    found = storm(port, count, seconds)
    pipe.send((dict(found.statuses), found.began, found.ended))
    pipe.close()


class Prober:
    """GET `path` (/livez) every PROBE_EVERY on a fresh connection: (when asked, seconds or
    None)."""

    def __init__(self, port: int, path: str = "/livez") -> None:
        self._port = port
        self._path = path
        self._stop = threading.Event()
        self.answers: list[tuple[float, float | None]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def __enter__(self) -> Prober:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(30)

    def _run(self) -> None:
        while not self._stop.is_set():
            asked = time.monotonic()
            self.answers.append((asked, self._ask()))
            self._stop.wait(max(0.0, PROBE_EVERY - (time.monotonic() - asked)))

    def _ask(self) -> float | None:
        began = time.perf_counter()
        connection = http.client.HTTPConnection("127.0.0.1", self._port, timeout=5)
        try:
            connection.request("GET", self._path)
            answer = connection.getresponse()
            answer.read()
        except OSError:
            return None
        finally:
            connection.close()
        return time.perf_counter() - began if answer.status == 200 else None


def measure(
    report: Report,
    mode: str,
    scrapes: int,
    rounds: int,
    seconds: float,
    children: Children,
    work: Path,
) -> None:
    port, probes = free_port(), free_port()
    storms: list[Storm] = []
    with simulator() as sim:
        directory = work / mode
        config_path = config(directory, sim, port, probes)
        daemon = launch(children, LAUNCHER, mode, config_path, work / f"{mode}.log")
        wait_first_polls(daemon, sim)
        wait_for(lambda: healthy(port), 30, "/healthz", daemon.alive)
        idle = idle_scrapes(port, IDLE_SCRAPES)
        with Prober(probes) as prober:
            time.sleep(BEFORE)
            sim_began = sim.clock()
            cpu = 0
            polls_during = 0
            for _ in range(rounds):
                polls = len(event_gets(sim))
                cpu_before = sample(daemon.proc.pid).run_ns
                storms.append(storm_apart(port, scrapes, seconds))
                cpu += sample(daemon.proc.pid).run_ns - cpu_before
                polls_during += len(event_gets(sim)) - polls
                time.sleep(PAUSE)
        daemon.alive()
        gets = event_gets(sim)
    took = sum(found.ended - found.began for found in storms)
    before = [at for at in gets if sim_began - BEFORE <= at < sim_began]
    during = [a for at, a in prober.answers if any(f.began <= at <= f.ended for f in storms)]
    answered = [a for a in during if a is not None]
    report.section(
        f"{mode}: {rounds} x {scrapes} concurrent /metrics"
        + (f", each for {seconds:g} s" if seconds else "")
        + f" (under way {took:.1f} s in all)"
    )
    statuses: Counter[int] = Counter()
    for found in storms:
        statuses.update(found.statuses)
    shown = ", ".join(f"{n} x {s or 'no answer'}" for s, n in sorted(statuses.items()))
    idle_p99 = percentile(idle, 99)
    report.row("/metrics p50 idle", f"{percentile(idle, 50) * 1000:.2f} ms")
    report.row(
        "/metrics p99 idle", f"{idle_p99 * 1000:.2f} ms", "< 10 ms", idle_p99 < METRICS_TARGET
    )
    report.row("scrapes' answers", shown)
    report.row("daemon CPU for the storms", f"{cpu / 1e9:.2f} s")
    total = sum(statuses.values())
    report.row("daemon CPU per 1,000 scrapes", f"{cpu / 1e6 / max(total, 1):.2f} s")
    if answered:
        p99 = percentile(answered, 99)
        report.row("/livez p50 during", f"{percentile(answered, 50) * 1000:.1f} ms")
        report.row("/livez p99 during", f"{p99 * 1000:.1f} ms", "< 100 ms", p99 < HEALTH_TARGET)
        report.row("/livez max during", f"{max(answered) * 1000:.1f} ms")
    report.row("/livez asked / unanswered during", f"{len(during)} / {len(during) - len(answered)}")
    report.row("polls/s before", f"{len(before) / BEFORE:.1f}")
    report.row("polls/s during", f"{polls_during / took:.1f}")


def idle_scrapes(port: int, count: int) -> list[float]:
    """Seconds each of `count` GET /metrics took, one at a time, 5 ms apart, after one more
    first (its imports and set-up are not a scrape's)."""
    _one_scrape(port)
    idle = []
    for _ in range(count):
        began = time.perf_counter()
        _one_scrape(port)
        idle.append(time.perf_counter() - began)
        time.sleep(0.005)
    return idle


def _one_scrape(port: int) -> None:
    connection = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        connection.request("GET", "/metrics")
        answer = connection.getresponse()
        answer.read()
        if answer.status != 200:
            raise BenchError(f"GET /metrics: {answer.status}")
    finally:
        connection.close()


def healthy(port: int) -> bool:
    try:
        connection = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False


def config(directory: Path, sim: Simulator, port: int, probes: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    sections = daemon_sections(directory, sim, INTERVAL, console=False)
    sections["jsonl"] = {"path": str(directory / "events.jsonl")}
    sections["http"] = {"listen": f"127.0.0.1:{port}", "probe_listen": f"127.0.0.1:{probes}"}
    return write_sections(directory, sections)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scrapes", type=int, default=1000)
    parser.add_argument("--rounds", type=int, default=10, help="storms, one after the other")
    parser.add_argument(
        "--seconds", type=float, default=0.0, help="keep the scrapes in flight this long"
    )
    parser.add_argument("--parts", default="sebridge,baseline")
    args = parser.parse_args()
    report = Report()
    steps = [
        (
            mode,
            f"a storm of {args.scrapes} scrapes ({mode})",
            lambda c, w, m=mode: measure(report, m, args.scrapes, args.rounds, args.seconds, c, w),
        )
        for mode in ("sebridge", "baseline")
    ]
    return run_parts(
        "bench/metrics_storm.py: 1,000 concurrent scrapes",
        report,
        steps,
        args.parts.split(","),
        "sebridge-storm-",
    )


if __name__ == "__main__":
    sys.exit(main())

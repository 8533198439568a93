"""What /metrics costs: scrape latency while events flow, memory, and the container image.

1. scrape: `sebridge run` (JSON lines sink, HTTP server on) while 50 events are scheduled
   and completed on the IMDS simulator; /metrics and /healthz are asked in turn over one
   keep-alive connection until every event's transitions are written. Target: /metrics p99
   <= 10 ms; baseline, same run: /healthz p99 (the same server, no metrics).
2. rss: two daemons through the same 50 events, started the same way, one as it is, one
   whose metrics are stubbed out before sebridge is imported (prometheus_client never
   loaded); VmRSS of each after the events and 200 scrapes of the first, the median of 5
   samples. Target: the difference <= 3 MB.
3. image: the image's size and `sebridge demo --yes` time inside it, from the last run of
   deploy/container/build-and-smoke.sh (.cache/container/result.json; --build runs it now,
   as root).

Usage: python bench/metrics.py [--parts scrape,rss,image] [--events 50] [--build]
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

import requests

from harness import (
    BenchError,
    Children,
    Report,
    daemon_sections,
    free_port,
    launch,
    mib,
    percentile,
    run_parts,
    sample,
    simulator,
    start_daemon,
    wait_first_polls,
    wait_for,
    write_sections,
)
from sebridge.imds.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
RESULT = ROOT / ".cache" / "container" / "result.json"
SCRAPE_TARGET = 0.010
RSS_TARGET_KIB = 3 * 1000 * 1000 // 1024  # 3 MB
INTERVAL = 0.2


def config(directory: Path, sim: Simulator, port: int) -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    sections = daemon_sections(directory, sim, INTERVAL, console=False)
    sections["jsonl"] = {"path": str(directory / "events.jsonl")}
    sections["http"] = {"listen": f"127.0.0.1:{port}"}
    return write_sections(directory, sections)


def lines(directory: Path) -> int:
    try:
        return (directory / "events.jsonl").read_text(encoding="utf-8").count("\n")
    except FileNotFoundError:
        return 0


def flow(sims: list[Simulator], events: int, stop: threading.Event) -> None:
    """Schedule `events` events, one every 0.1 s, each completed 1 s after it came."""
    due: list[tuple[float, list[str]]] = []
    for _ in range(events):
        ids = [sim.schedule("Reboot", resources=[sim.vm_name]) for sim in sims]
        due.append((time.monotonic() + 1.0, ids))
        while due and due[0][0] <= time.monotonic():
            for sim, event_id in zip(sims, due.pop(0)[1], strict=True):
                sim.complete(event_id)
        if stop.wait(0.1):
            return
    for at, ids in due:
        time.sleep(max(0.0, at - time.monotonic()))
        for sim, event_id in zip(sims, ids, strict=True):
            sim.complete(event_id)


def timed_get(session: requests.Session, url: str) -> float:
    began = time.perf_counter()
    answer = session.get(url, timeout=10)
    answer.content  # noqa: B018 - read the whole body
    elapsed = time.perf_counter() - began
    if answer.status_code != 200:
        raise BenchError(f"GET {url}: {answer.status_code}")
    return elapsed


def measure_scrapes(report: Report, events: int, children: Children, work: Path) -> None:
    port = free_port()
    with simulator() as sim:
        directory = work / "scrape"
        daemon = start_daemon(children, config(directory, sim, port), work / "scrape.log")
        wait_first_polls(daemon, sim)
        base = f"http://127.0.0.1:{port}"
        session = requests.Session()
        wait_for(lambda: timed_get(session, f"{base}/healthz"), 30, "/healthz", daemon.alive)
        stop = threading.Event()
        feeder = threading.Thread(target=flow, args=([sim], events, stop), daemon=True)
        metrics: list[float] = []
        health: list[float] = []
        feeder.start()
        try:
            # Each event: scheduled and completed; the flow is over once all are written.
            while lines(directory) < 2 * events:
                metrics.append(timed_get(session, f"{base}/metrics"))
                health.append(timed_get(session, f"{base}/healthz"))
                daemon.alive()
        finally:
            stop.set()
            feeder.join(30)
    report.section(f"1. /metrics while {events} events flow ({len(metrics)} scrapes)")
    report.percentiles(metrics, [50, 99], SCRAPE_TARGET, label="/metrics ")
    report.percentiles(health, [50, 99], label="baseline /healthz ")
    ratio = percentile(metrics, 99) / percentile(health, 99)
    report.row("p99 /metrics / /healthz", f"{ratio:.2f}x")


def measure_rss(report: Report, events: int, children: Children, work: Path) -> None:
    with simulator() as with_sim, simulator() as without_sim:
        ports = free_port(), free_port()
        dirs = work / "with", work / "without"
        configs = [
            config(d, s, p) for d, s, p in zip(dirs, (with_sim, without_sim), ports, strict=True)
        ]
        with_metrics = launch(children, LAUNCHER, "real", configs[0], work / "with.log")
        without = launch(children, LAUNCHER, "stub", configs[1], work / "without.log")
        wait_first_polls(with_metrics, with_sim)
        wait_first_polls(without, without_sim)
        flow([with_sim, without_sim], events, threading.Event())
        for directory, daemon in zip(dirs, (with_metrics, without), strict=True):
            wait_for(lambda d=directory: lines(d) >= 2 * events, 60, "every line", daemon.alive)
        session = requests.Session()
        for _ in range(200):
            timed_get(session, f"http://127.0.0.1:{ports[0]}/metrics")
        if requests.get(f"http://127.0.0.1:{ports[1]}/metrics", timeout=5).text != "stubbed":
            raise BenchError("the baseline daemon serves real metrics")
        rss = [0, 0]
        for i, daemon in enumerate((with_metrics, without)):
            samples = []
            for _ in range(5):
                time.sleep(0.2)
                samples.append(sample(daemon.proc.pid).rss_kib)
            rss[i] = int(statistics.median(samples))
    report.section(f"2. memory after {events} events (and 200 scrapes of the first)")
    report.row("VmRSS with metrics", mib(rss[0]))
    report.row("baseline: VmRSS, metrics stubbed out", mib(rss[1]))
    cost = rss[0] - rss[1]
    report.row("cost of metrics", mib(cost), "<= 3 MB", cost <= RSS_TARGET_KIB)


def measure_image(report: Report, build: bool) -> None:
    if build:
        subprocess.run(["bash", str(ROOT / "deploy/container/build-and-smoke.sh")], check=True)
    if not RESULT.exists():
        raise BenchError(f"no {RESULT}: run deploy/container/build-and-smoke.sh (as root) first")
    result = json.loads(RESULT.read_text(encoding="utf-8"))
    age = time.time() - RESULT.stat().st_mtime
    report.section(f"3. the container image ({result['image']}, built {age / 60:.0f} min ago)")
    report.row("image size", f"{result['size_bytes'] / 1e6:.0f} MB")
    report.row("sebridge demo --yes inside it", f"{result['demo_seconds']:.1f} s")
    report.row("build-and-smoke.sh, that run", f"{result['total_seconds']:.0f} s")


# Both daemons start through this launcher, so neither carries the benchmark's own imports;
# the baseline replaces sebridge's metrics with no-ops (and /metrics with a constant) before
# anything imports prometheus_client.
LAUNCHER = """
import sys, types
stub = sys.argv[1] == "stub"
if stub:
    class NoMetrics:
        def __init__(self, sinks=(), registry=None):
            self.sinks, self.registry = tuple(sinks), None
        def __getattr__(self, name):
            return lambda *args, **kwargs: None
    stubs = (
        ("engine.metrics", "Metrics", NoMetrics),
        ("engine.store_gauges", "StoreGauges", object),
    )
    for name, attr, value in stubs:
        module = types.ModuleType("sebridge." + name)
        setattr(module, attr, value)
        sys.modules["sebridge." + name] = module
from sebridge.cli import main as cli, serving
if stub:
    def app(environ, start_response):
        start_response("200 OK", [("Content-Type", "text/plain")])
        return [b"stubbed"]
    serving._metrics_route = lambda runner: app
    assert "prometheus_client" not in sys.modules, "prometheus_client was imported anyway"
sys.exit(cli.main(["run", "--config", sys.argv[2]]))
"""


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--parts", default="scrape,rss,image")
    parser.add_argument("--events", type=int, default=50)
    parser.add_argument("--build", action="store_true", help="run build-and-smoke.sh first")
    args = parser.parse_args()
    report = Report()
    steps = [
        (
            "scrape",
            "/metrics while events flow",
            lambda c, w: measure_scrapes(report, args.events, c, w),
        ),
        ("rss", "the memory of metrics", lambda c, w: measure_rss(report, args.events, c, w)),
        ("image", "the container image", lambda c, w: measure_image(report, args.build)),
    ]
    return run_parts(
        "bench/metrics.py: what /metrics costs",
        report,
        steps,
        args.parts.split(","),
        "sebridge-metrics-",
    )


if __name__ == "__main__":
    sys.exit(main())

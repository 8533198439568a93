"""One release's HTTP figures, for bench/compare_release.py: /metrics idle, an approval link
-> StartRequests, and the probe while 1,000 connections crowd the traffic port.

One daemon per side, `python -m sebridge run` from the side's copy of `src/` (JSON lines
sink, poll 1 s), with [http] listen, public_url (approval links on, under a key generated
into the store) and probe_listen. A release whose config refuses probe_listen (it has no
probe listener) runs without it, and its probe figure is GET /healthz on the traffic port,
its only port. In order:

1. /metrics p99: 200 scrapes one at a time (metrics_storm.idle_scrapes), nothing happening.
2. approval link -> StartRequests p99: `approvals` Reboots scheduled at once, each one's
   approve_url read from its JSON line (both releases write it there); then per event, as a
   person's browser does, GET the page (its confirm form) and POST the form (a name) on the
   same kept-alive connection: from just before the POST to the simulator receiving the
   StartRequests that names that event alone.
3. probe p99: metrics_storm.storm_apart (1,000 GET /metrics at once on the traffic port,
   each on its own connection) `storms` times, half a second apart, while metrics_storm's
   Prober asks the probe every 50 ms on a fresh connection: the p99 of the probes asked
   while a storm was under way and answered 200.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from contextlib import ExitStack
from pathlib import Path
from urllib.parse import urlsplit

import requests

from harness import (
    BenchError,
    Children,
    JsonlTail,
    check_alive,
    daemon_sections,
    free_port,
    percentile,
    simulator,
    start_requests_post,
    wait_for,
    write_sections,
)
from metrics_storm import PAUSE, Prober, healthy, idle_scrapes, storm_apart
from release_process import Side, Taken, daemon, polling
from sebridge.imds.simulator import Simulator

PUBLIC = "https://sebridge.example.net"  # the links' base; requested on 127.0.0.1 instead
IDLE_SCRAPES = 200
CROWD = 1000  # connections at once on the traffic port
TRAFFIC_ONLY = "/healthz on the traffic port, its only port"


def http_config(directory: Path, sim: Simulator, port: int, probes: int | None) -> Path:
    directory.mkdir(parents=True)
    sections = daemon_sections(directory, sim, 1.0, console=False)
    sections["jsonl"] = {"path": str(directory / "events.jsonl")}
    sections["http"] = {"listen": f"127.0.0.1:{port}", "public_url": PUBLIC}
    if probes is not None:
        sections["http"]["probe_listen"] = f"127.0.0.1:{probes}"
    return write_sections(directory, sections)


def http_figures(
    children: Children, side: Side, work: Path, approvals: int, storms: int, taken: Taken
) -> None:
    """Takes metrics_p99, approve_p99 and probe_p99 (ms) into `taken`, each on its own (one
    that cannot be taken says why; the next is still tried); BenchError when the daemon
    could not be started."""
    port, probes = free_port(), free_port()
    with ExitStack() as stack:
        sim = stack.enter_context(simulator())
        for probe_port in (probes, None):
            directory = work / f"{side.name}-http-{'probes' if probe_port else 'traffic'}"
            config = http_config(directory, sim, port, probe_port)
            log = directory / "daemon.log"
            proc = stack.enter_context(daemon(children, side, config))
            try:
                polling(proc, sim, log, 1)
                break
            except BenchError:
                if probe_port is None or not refused_probe_listen(log):
                    raise

        def alive() -> None:
            check_alive(proc, log)

        def metrics() -> None:
            scrapes = idle_scrapes(port, IDLE_SCRAPES)
            taken.values["metrics_p99"] = percentile(scrapes, 99) * 1000

        def approve() -> None:
            took = link_approvals(sim, port, directory / "events.jsonl", approvals, alive)
            taken.values["approve_p99"] = percentile(took, 99) * 1000

        def probe() -> None:
            if probe_port is None:
                taken.other_way["probe_p99"] = f"{side.name}: {TRAFFIC_ONLY}"
            asked, answered = crowded_probes(port, probe_port, storms)
            alive()
            if not answered:
                raise BenchError(f"none of the {asked} probes during the storms was answered")
            taken.values["probe_p99"] = percentile(answered, 99) * 1000
            if len(answered) < asked:
                unanswered = f"{asked - len(answered)} of {asked} probes unanswered"
                taken.notes["probe_p99"] = f"{side.name}: {unanswered} (not in the p99)"

        wait_for(lambda: healthy(port), 30, "/healthz", alive)
        taken.take(side.name, ("metrics_p99",), metrics)
        taken.take(side.name, ("approve_p99",), approve)
        taken.take(side.name, ("probe_p99",), probe)


def refused_probe_listen(log: Path) -> bool:
    """Whether the daemon stopped at its config because it does not know probe_listen."""
    text = log.read_text(errors="replace")
    return "unknown key" in text and "probe_listen" in text


def link_approvals(
    sim: Simulator, port: int, jsonl: Path, count: int, alive: Callable[[], None]
) -> list[float]:
    """Seconds from each approval form's POST to its StartRequests at the simulator."""
    ids = [sim.schedule("Reboot") for _ in range(count)]
    links: dict[str, str] = {}

    def every_link(record: dict[str, object]) -> bool:
        if record.get("event_id") in ids and record.get("approve_url"):
            links[str(record["event_id"])] = str(record["approve_url"])
        return len(links) == count

    JsonlTail(jsonl).wait_for(every_link, 30, alive)
    base = f"http://127.0.0.1:{port}"
    took = []
    with requests.Session() as browser:
        browser.trust_env = False
        for event_id in ids:
            parts = urlsplit(links[event_id])
            url = base + parts.path + (f"?{parts.query}" if parts.query else "")
            page = browser.get(url, timeout=10)
            if page.status_code != 200 or '<form method="post"' not in page.text:
                raise BenchError(f"the approval page of {event_id}: {page.status_code}, no form")
            before = len(sim.posts)
            sent = time.time()
            done = browser.post(url, data={"name": "bench"}, timeout=10)
            if done.status_code != 200:
                raise BenchError(f"the approval POST of {event_id} answered {done.status_code}")
            took.append(start_requests_post(sim, before, event_id, alive).at - sent)
    return took


def crowded_probes(port: int, probes: int | None, storms: int) -> tuple[int, list[float]]:
    """(probes asked during the storms, seconds of those answered 200): /livez on `probes`,
    or /healthz on `port` when there is no probe port."""
    under_way = []
    prober = Prober(port, "/healthz") if probes is None else Prober(probes, "/livez")
    with prober:
        for _ in range(storms):
            found = storm_apart(port, CROWD, 0.0)
            under_way.append((found.began, found.ended))
            time.sleep(PAUSE)
    during = [a for at, a in prober.answers if any(b <= at <= e for b, e in under_way)]
    return len(during), [a for a in during if a is not None]

"""The fleet page and its calendar feed with 500 events on PostgreSQL: p50 and p99 per request.

A store is filled the way a fleet writes one (Store.documents.apply): five agents (vm0 .. vm4), each
recording a document of `--events / 5` events, every event listing three VMs (one of them
the agent's, one web VM no agent runs on); half the events' rule names a prepare hook,
whose run on the agent's VM has succeeded (every tenth failed, with some output); a tenth
have a person's approval. Then the page's routes are served by the daemon's own HTTP server
(waitress, web/server.py), as `[web] page = true` serves them, and fetched over a kept-alive
connection from 127.0.0.1, the trusted proxy, with the proxy's header: `GET /fleet`,
`GET /fleet.json` and `GET /calendar/<token>.ics`, `--rounds` times each, in turns. Printed:
each one's wall-clock p50 and p99, and the CPU this process spent per request (the server's
threads and the client; not PostgreSQL's), which a loaded machine inflates less.

Budget (issue 38): calendar apps poll the feed, so it answers in under 100 ms at p99.

    .venv/bin/python bench/fleet_page.py [--events 500] [--rounds 200]
"""

from __future__ import annotations

import argparse
import getpass
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "tests"), str(ROOT)]

import requests  # noqa: E402

import harness  # noqa: E402
import pg  # noqa: E402
from sebridge.integrations.registry import config_from_mapping  # noqa: E402
from sebridge.integrations.render import Renderer  # noqa: E402
from sebridge.kernel.redact import Masker  # noqa: E402
from sebridge.model import Approval, Document, HookRun, ScheduledEvent  # noqa: E402
from sebridge.model.approval import OutcomeKind  # noqa: E402
from sebridge.model.approval_request import ApprovalRequest, Outcome  # noqa: E402
from sebridge.model.decision import Decision  # noqa: E402
from sebridge.store import Store  # noqa: E402
from sebridge.store.hook_retries import RetryAnswer  # noqa: E402
from sebridge.web.fleet_wiring import calendar_url, routes  # noqa: E402
from sebridge.web.server import HttpServer  # noqa: E402

AGENTS = 5
FEED_BUDGET = 0.100
KEY = "Qm9uZS1kcnkgYmVuY2gga2V5OiBub3QgYSBydW4gb3IgcmVwZWF0"
HEADERS = {"X-Forwarded-User": "bench@example.net"}


def fill(url: str, count: int, now: datetime) -> None:
    """`count` events over AGENTS agents, as their ticks and hook runs record them."""
    per = count // AGENTS
    drain = Decision("ask", "drain first", prepare=("drain",))
    plain = Decision("ask", "people decide")
    for a in range(AGENTS):
        store = Store(url, agent=f"vm{a}")
        try:
            events = tuple(
                ScheduledEvent(
                    f"{a:02d}000000-0000-4000-8000-{i:012d}",
                    ("Reboot", "Redeploy", "Freeze")[i % 3],
                    "Scheduled",
                    (f"vm{a}", f"vm{(a + 1) % AGENTS}", f"web{i}"),
                    not_before=now + timedelta(minutes=15 + i),
                    description="Host server is undergoing planned maintenance.",
                    source="Platform",
                    duration_seconds=600 if i % 2 else -1,
                )
                for i in range(per)
            )
            decisions = {e.event_id: drain if i % 2 else plain for i, e in enumerate(events)}
            store.documents.apply(Document(1, events), [], now, decisions=decisions)
            for i, e in enumerate(events):
                if i % 10 == 0:
                    store.approvals.record(Approval(e.event_id, f"person{i}", "slack", now))
                if not i % 2:
                    continue
                run = store.hook_runs.begin(
                    e, vm=f"vm{a}", stage="prepare", hook="drain", now=now, sinks=()
                )
                assert run is not None
                failed = i % 10 == 1
                ended = HookRun(
                    "drain",
                    "prepare",
                    f"vm{a}",
                    exit_code=1 if failed else 0,
                    seconds=2.5,
                    output="draining pool web-frontend\n" * 5 + ("lb refused" if failed else "ok"),
                    why="exit 1" if failed else "",
                )
                store.hook_runs.finish(e, ended, now=now, sinks=())
        finally:
            store.close()


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=500)
    parser.add_argument("--rounds", type=int, default=200)
    args = parser.parse_args()
    if not pg.server_answers():
        print(f"no PostgreSQL on {pg.HOST}:{pg.PORT}: this benchmark needs one")
        return 1
    admin = f"postgresql://{getpass.getuser()}@127.0.0.1:5432/postgres?{pg.PLAIN}"
    report = harness.Report()
    with pg.temporary_database(admin) as url:
        fill(url, args.events, datetime.now(UTC))
        measure(url, args, report)
    report.print()
    return 1 if report.errors else 0


def measure(url: str, args: argparse.Namespace, report: harness.Report) -> None:
    config = config_from_mapping(
        {
            "store": {"url": url},
            "http": {"public_url": "https://fleet.example.net", "link_secret": KEY},
            "web": {"page": True},
        },
        environ={},
    )
    store = Store(url, agent="vm0")

    def approve(request: ApprovalRequest) -> Outcome:
        return Outcome(OutcomeKind.REFUSED, request.event_id, "not in this benchmark")

    def retry(event_id: str, person: str) -> RetryAnswer:
        return RetryAnswer(event_id, refused="not in this benchmark")

    served = routes(
        config,
        store.db,
        Renderer(),
        KEY,
        approve=approve,
        retry=retry,
        vm_name=lambda: "vm0",
        mask=Masker(),
    )
    server = HttpServer("127.0.0.1", 0, served)
    server.start()
    http = requests.Session()
    http.trust_env = False
    base = f"http://127.0.0.1:{server.port}"
    feed = calendar_url(base, KEY)
    paths = {"page": base + "/fleet", "json": base + "/fleet.json", "feed": feed}
    times: dict[str, list[float]] = {name: [] for name in paths}
    cpu: dict[str, list[float]] = {name: [] for name in paths}
    try:
        sizes = {}
        for name, where in paths.items():  # warm: templates compiled, plans cached
            answer = http.get(where, headers=HEADERS, timeout=30)
            if answer.status_code != 200:
                report.errors.append(f"{name}: {answer.status_code} {answer.text[:200]}")
                return
            sizes[name] = len(answer.content)
        for _ in range(args.rounds):
            for name, where in paths.items():
                began, used = time.perf_counter(), time.process_time()
                answer = http.get(where, headers=HEADERS, timeout=30)
                times[name].append(time.perf_counter() - began)
                cpu[name].append(time.process_time() - used)
                assert answer.status_code == 200
        events = http.get(paths["json"], headers=HEADERS, timeout=30).json()["events"]
        report.section(f"{len(events)} events, {AGENTS} agents, PostgreSQL, {args.rounds} rounds")
        report.row("GET /fleet bytes", str(sizes["page"]))
        report.percentiles(times["page"], (50, 99), label="GET /fleet ")
        report.percentiles(times["json"], (50, 99), label="GET /fleet.json ")
        report.row("GET /calendar/<token>.ics bytes", str(sizes["feed"]))
        report.percentiles(times["feed"], (50, 99), FEED_BUDGET, label="GET /calendar/...ics ")
        report.section("CPU per request in this process (the server's threads and the client)")
        for name, label in (("page", "/fleet"), ("json", "/fleet.json"), ("feed", "calendar")):
            report.row(f"{label} CPU p50", harness.ms(harness.percentile(cpu[name], 50)))
        load = os.getloadavg()[0]
        report.notes.append(f"load average (1 min) at the end: {load:.1f} on {os.cpu_count()} CPUs")
    finally:
        http.close()
        server.stop()
        store.close()


if __name__ == "__main__":
    sys.exit(main())

"""What a fleet approval soak (fleet_approvals.py) found: read from the simulators, the
agents' JSON lines, the database and the logs, and the table's rows."""

from __future__ import annotations

import bisect
import json
import shutil
from collections import Counter
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from harness import ms, percentile

# How events are approved, in the order they are scheduled (policy: User events the
# policy approves on every agent's tick at once; cli: `sebridge approve` through one
# agent; cli-pair: two at the same moment through two agents; policy+cli: both).
PATHS = ("policy", "cli", "policy", "cli-pair", "policy", "policy+cli")
KINDS = ("policy", "cli", "cli-pair", "policy+cli")
NOT_SENT = "not sent to IMDS"
BAD_STATES = ("abandoned", "failed")


@dataclass
class Result:
    soak: Any  # soak_rig.Soak, which builds this
    posts: dict[str, list[tuple[int, float]]]  # accepted StartRequests by event: (agent, at)
    accepted: int  # Simulator.start_requests over the three simulators
    approvals: dict[str, dict[str, object]]
    transitions: list[dict[str, object]]
    deadlocks: int
    lines: list[dict[str, object]]
    logs: dict[str, list[str]]
    gets: list[list[float]]  # arrival times of each simulator's events GETs
    code: str = ""
    round_trips: int = 0  # the fleet's and the CLI's, counted by the tap

    def __post_init__(self) -> None:
        ours = {p.event_id for p in self.soak.planned}
        self.received = {e for e in self.posts if e in ours}
        said: set[str] = set()
        self.problems = [t for t in self.transitions if t["kind"] == "problem"]
        for t in self.problems:
            if NOT_SENT in str(json.loads(str(t["data"])).get("note") or ""):
                said.add(str(t["event_id"]))
        for line in self.lines:
            if line.get("transition") == "problem" and NOT_SENT in str(line.get("note") or ""):
                said.add(str(line["event_id"]))
        said |= {e for e, r in self.approvals.items() if r["state"] in BAD_STATES}
        self.not_sent = said
        self.bad = sorted(self.received & said)

    def sighting_gaps(self) -> list[float]:
        """Per policy event: the first poll after it appeared at the second agent to poll -
        the same at the first. The first agent records the event and the policy's approval,
        POSTs and records the outcome within about 150 ms (at +2 ms per round trip): a second
        agent recording its own first sighting meanwhile is the race."""
        gaps = []
        for plan in self.soak.planned:
            if plan.path.startswith("policy"):
                firsts = sorted(
                    ts[i]
                    for ts in self.gets
                    if (i := bisect.bisect_left(ts, plan.scheduled_at)) < len(ts)
                )
                if len(firsts) >= 2:
                    gaps.append(firsts[1] - firsts[0])
        return gaps

    def latencies(self, paths: Sequence[str] = PATHS) -> list[float]:
        found = []
        for plan in self.soak.planned:
            row = self.approvals.get(plan.event_id)
            if plan.path in paths and row and plan.event_id in self.posts:
                recorded = datetime.fromisoformat(str(row["at"])).timestamp()
                found.append(min(at for _, at in self.posts[plan.event_id]) - recorded)
        return found

    def log_lines(self, *words: str) -> list[str]:
        return [
            f"{name}: {line}"
            for name, text in self.logs.items()
            for line in text
            if any(w in line.lower() for w in words)
        ]

    def level_lines(self, level: str) -> list[str]:
        return [
            f"{name}: {line}"
            for name, text in self.logs.items()
            for line in text
            if line.split()[2:3] == [level]
        ]

    def rows(self) -> list[tuple[str, str, str]]:
        planned = self.soak.planned
        states = Counter(str(r["state"]) for r in self.approvals.values())
        twice = [e for e in self.received if len(self.posts[e]) > 1]
        announced = Counter(
            str(r["event_id"]) for r in self.lines if r.get("transition") == "approved"
        )
        cli = [c for p in planned for c in p.cli]
        lat = self.latencies()
        lat_policy = self.latencies(("policy",))
        lat_cli = self.latencies(("cli", "cli-pair", "policy+cli"))
        never = [
            p.event_id
            for p in planned
            if p.event_id in self.approvals and p.event_id not in self.received
        ]
        by_path = Counter(p.path for p in planned)
        gaps = self.sighting_gaps()
        return [
            (
                "events scheduled (policy / cli / cli-pair / policy+cli)",
                f"{len(planned)} ({' / '.join(str(by_path[k]) for k in KINDS)})",
                "",
            ),
            ("approvals recorded (store rows)", str(len(self.approvals)), ""),
            ("approval states", " ".join(f"{k}={v}" for k, v in sorted(states.items())), ""),
            (
                "approvals IMDS received (events with a StartRequests accepted)",
                str(len(self.received)),
                "",
            ),
            (
                "  of which reported not sent (problem 'not sent to IMDS' or row abandoned/failed)",
                str(len(self.bad)),
                "0",
            ),
            ("approvals IMDS never received", str(len(never)), ""),
            ("problem transitions (all)", str(len(self.problems)), ""),
            (
                "events with > 1 StartRequests accepted (max per event)",
                f"{len(twice)} ({max((len(self.posts[e]) for e in twice), default=1)})",
                "allowed",
            ),
            (
                "StartRequests accepted / events received",
                f"{self.accepted} / {len(self.received)}",
                "",
            ),
            (
                "received without an 'approved' JSON line / with > 1",
                f"{sum(1 for e in self.received if not announced[e])}"
                f" / {sum(1 for e in self.received if announced[e] > 1)}",
                "0 / 0",
            ),
            ("database round trips (agents and CLI)", str(self.round_trips), ""),
            ("deadlocks (pg_stat_database)", str(self.deadlocks), "0"),
            ("agent log lines saying 'deadlock'", str(len(self.log_lines("deadlock"))), "0"),
            (
                "agent log ERROR / WARNING lines / tracebacks",
                f"{len(self.level_lines('ERROR'))} / {len(self.level_lines('WARNING'))} / "
                f"{len(self.log_lines('traceback'))}",
                "",
            ),
            (
                "CLI runs: exit codes",
                " ".join(f"{k}:{v}" for k, v in sorted(Counter(c.rc for c in cli).items())) or "-",
                "",
            ),
            (
                "policy events polled first by 2 agents within 20 / 150 ms",
                f"{sum(g < 0.02 for g in gaps)} / {sum(g < 0.15 for g in gaps)} of {len(gaps)}",
                "",
            ),
            (
                "latency approval recorded -> StartRequests, p50 / p99",
                f"{ms(percentile(lat, 50))} / {ms(percentile(lat, 99))}" if lat else "-",
                "",
            ),
            (
                "  policy / cli paths, p50",
                " / ".join(ms(percentile(v, 50)) if v else "-" for v in (lat_policy, lat_cli)),
                "",
            ),
            ("  max", ms(max(lat)) if lat else "-", ""),
        ]

    def details(self, limit: int) -> list[str]:
        """For each event IMDS received that was reported as not sent: its plan, StartRequests,
        approval row, transitions, CLI answers and every log line naming it (2 lines around)."""
        out: list[str] = []
        plans = {p.event_id: p for p in self.soak.planned}
        for event_id in self.bad[:limit]:
            plan = plans[event_id]
            out.append(
                f"--- {self.soak.label}: {event_id} (path {plan.path}, scheduled "
                f"{datetime.fromtimestamp(plan.scheduled_at).isoformat()})"
            )
            for i, at in self.posts[event_id]:
                out.append(
                    f"  StartRequests accepted by vm{i}'s IMDS at "
                    f"{datetime.fromtimestamp(at).isoformat()}"
                )
            out.append(f"  approval row: {self.approvals.get(event_id)}")
            for t in self.transitions:
                if t["event_id"] == event_id:
                    data = json.loads(str(t["data"]))
                    out.append(
                        f"  transition {t['id']} {t['kind']} at {t['at']} actor="
                        f"{data.get('actor')} via={data.get('via')} note={data.get('note')!r}"
                    )
            for c in plan.cli:
                out.append(f"  CLI via vm{c.agent}: exit {c.rc} after {c.seconds:.2f} s: {c.out!r}")
            for name, text in self.logs.items():
                hits = [n for n, line in enumerate(text) if event_id in line]
                shown: set[int] = set()
                for n in hits:
                    for m in range(max(0, n - 2), min(len(text), n + 3)):
                        if m not in shown:
                            shown.add(m)
                            out.append(f"  {name}: {text[m]}")
        if len(self.bad) > limit:
            out.append(f"(and {len(self.bad) - limit} more)")
        return out

    def keep(self, directory: Path) -> None:
        """The agents' files, the store's approvals and transitions, the plan and CLI answers."""
        directory.mkdir(parents=True, exist_ok=True)
        for path in self.soak.work.iterdir():
            if path.is_file():
                shutil.copy2(path, directory / path.name)
        dump = {
            "approvals": list(self.approvals.values()),
            "transitions": self.transitions,
            "planned": [vars(p) | {"cli": [vars(c) for c in p.cli]} for p in self.soak.planned],
            "posts": self.posts,
        }
        (directory / "store_and_plan.json").write_text(json.dumps(dump, default=str, indent=1))

"""VmRSS of `sebridge run` with every sink configured, beside a console-only daemon.

Seven sinks: console, JSON lines, Slack (Socket Mode), Teams (Workflows webhook), Jira
(Cloud, watching its status), webhook (signed, deploy/webhook's chat template) and e-mail
(STARTTLS + AUTH), each against the fake of tests/fakes in this process; the IMDS simulators
too. Three daemons in the same run: seven sinks, the five of before issue 25 (console, JSON
lines, Slack, Teams, Jira) and the console alone, each `python -m sebridge run --config
FILE`, its store SQLite in a temporary directory, started together and given the same
events: a warm-up of --events Reboots a person is asked about, one Redeploy approved by the
built-in policy (started, then completed), then --rss-warmup idle seconds; VmRSS is read
then (/proc/PID/status, as the other benches read it). The issue's bound is 55 MB (10**6
bytes) with seven sinks.

    python bench/all_sinks_rss.py            # about 30 s
    python bench/all_sinks_rss.py --quick    # about 15 s smoke run

Exit status 0 whatever the figure; 1 only if it could not be taken.
"""

from __future__ import annotations

import argparse
import base64
import os
import secrets
import sys
import time
from collections.abc import Callable, Sequence
from contextlib import ExitStack
from pathlib import Path

from harness import (
    PROXY_VARS,
    Children,
    ProcSample,
    Report,
    Step,
    daemon_sections,
    mib,
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
sys.path.insert(0, str(ROOT / "tests"))  # the fakes live in tests/fakes
from fakes.jira import FakeJira  # noqa: E402
from fakes.slack import FakeSlack  # noqa: E402
from fakes.smtp import FakeSmtp  # noqa: E402
from fakes.teams import FakeTeams  # noqa: E402
from fakes.webhook import FakeWebhook  # noqa: E402

RSS_MB = 55.0  # issue 25: VmRSS with every sink configured, MB (10**6 bytes)
OPS = "C0123456789"
USER, PASSWORD = "bench", "bench-Password-1"


class Fakes:
    """Every sink's counterpart, started for the run and stopped with the stack."""

    def __init__(self, stack: ExitStack) -> None:
        self.key = "whsec_" + base64.b64encode(secrets.token_bytes(32)).decode()
        self.slack = stack.enter_context(FakeSlack(channels={OPS: "ops"}))
        self.teams = stack.enter_context(FakeTeams())
        self.jira = stack.enter_context(FakeJira("cloud"))
        self.hook = stack.enter_context(FakeWebhook(keys=[self.key]))
        self.smtp = stack.enter_context(FakeSmtp(users={USER: PASSWORD}))

    def sections(self, directory: Path) -> dict[str, dict[str, object]]:
        """The six sections beside [console]: every sink the daemon has."""
        return {
            "jsonl": {"path": str(directory / "events.jsonl")},
            "slack": {
                "bot_token": self.slack.bot_token,
                "app_token": self.slack.app_token,
                "channel": OPS,
                "api_url": self.slack.url,
            },
            "teams": {"webhook_url": self.teams.workflows_url},
            "jira": {
                "url": self.jira.url,
                "email": self.jira.email,
                "api_token": self.jira.token,
                "project": "OPS",
                "approve_status": "Approved",
            },
            "webhook": {
                "url": self.hook.url,
                "secret": self.key,
                "template": str(ROOT / "deploy" / "webhook" / "chat.json.j2"),
            },
            "email": {
                "host": "127.0.0.1",
                "port": self.smtp.port,
                "ca_file": str(self.smtp.cert.cert),
                "username": USER,
                "password": PASSWORD,
                "from": "sebridge <sebridge@example.com>",
                "to": ["ops@example.com"],
            },
        }

    def took(self, count: int, daemons: int) -> bool:
        """Whether each sink with a counterpart took `count` messages of each daemon that
        has it (Slack, Teams and Jira: `daemons`; webhook and e-mail: the seven's alone)."""
        slack = sum(1 for m in self.slack.messages.values() if m.thread_ts is None)
        shared = min(slack, len(self.teams.shown), len(self.jira.issues))
        return (
            shared >= count * daemons and min(len(self.hook.bodies), len(self.smtp.mails)) >= count
        )


def warm_up(sim: Simulator, events: int, alive: Callable[[], None]) -> None:
    """`events` Reboots asked about; a Redeploy the built-in policy approves, started and
    completed: every sink renders and sends each kind of message."""
    for _ in range(events):
        sim.schedule("Reboot")
    redeploy = sim.schedule("Redeploy", source="User")  # approved by the built-in policy
    wait_for(lambda: redeploy in sim.start_requests, 30, "the policy's StartRequest", alive)
    sim.start_event(redeploy)
    time.sleep(1.5)
    sim.complete(redeploy)


# The daemons of one run: their name, and the sections beside [console] they get.
FIVE = ("jsonl", "slack", "teams", "jira")  # before issue 25: five sinks with the console
SEVEN = (*FIVE, "webhook", "email")


def measure(args: argparse.Namespace, children: Children, work: Path, report: Report) -> None:
    """Three daemons at once, the same events each: seven sinks, the five of before issue 25
    (the first's figure minus this one's is what webhook and e-mail add), console alone."""
    kinds = {"seven sinks": SEVEN, "five sinks (before webhook, e-mail)": FIVE, "console only": ()}
    with ExitStack() as stack:
        fakes = Fakes(stack)
        daemons = []
        for number, (name, sinks) in enumerate(kinds.items()):
            directory = work / str(number)
            directory.mkdir()
            sim = stack.enter_context(simulator())
            sections = daemon_sections(directory, sim, 1.0, console=True)
            every = fakes.sections(directory)
            sections.update({sink: every[sink] for sink in sinks})
            config = write_sections(directory, sections)
            daemons.append((name, sim, start_daemon(children, config, directory / "daemon.log")))
        try:
            for _, sim, daemon in daemons:
                wait_first_polls(daemon, sim)
            for _, sim, daemon in daemons:
                warm_up(sim, args.events, daemon.alive)
            # Both daemons with Slack, Teams and Jira post to the same fakes: twice as many.
            wait_for(
                lambda: fakes.took(args.events + 1, 2),
                60,
                "every sink's messages",
                daemons[0][2].alive,
            )
            time.sleep(args.rss_warmup)
            samples = {}
            for name, _, daemon in daemons:
                daemon.alive()
                samples[name] = sample(daemon.proc.pid)
            report_rss(report, samples)
        finally:
            for _, _, daemon in daemons:
                children.stop(daemon.proc)


def report_rss(report: Report, samples: dict[str, ProcSample]) -> None:
    report.section("VmRSS after warm-up (events asked, a policy approval to its end; then idle)")
    (seven, every), (five, older), (console, alone) = samples.items()
    five = five.split(" (")[0]
    for name, got in samples.items():
        mb = got.rss_kib * 1024 / 1e6
        value = f"{mib(got.rss_kib)} ({mb:.1f} MB)"
        if got is every:
            report.row(f"VmRSS, {name}", value, f"<= {RSS_MB:g} MB", mb <= RSS_MB)
            report.row("  VmHWM (peak)", mib(got.hwm_kib), f"({got.threads} threads)")
        else:
            report.row(f"VmRSS, {name}", value, f"({got.threads} threads, same run)")
    report.row(
        "webhook and e-mail's cost", mib(every.rss_kib - older.rss_kib), f"({seven} - {five})"
    )
    report.row("six sinks' cost", mib(every.rss_kib - alone.rss_kib), f"({seven} - {console})")


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="VmRSS of sebridge with every sink.")
    parser.add_argument("--events", type=int, default=20, help="Reboots of the warm-up (20)")
    parser.add_argument("--rss-warmup", type=float, default=10.0, help="idle s before RSS (10)")
    parser.add_argument("--quick", action="store_true", help="smoke run: 5 events, 3 s idle")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.rss_warmup = 5, 3.0
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for name in PROXY_VARS:
        os.environ.pop(name, None)
    report = Report()
    steps: list[Step] = [("rss", "rss", lambda c, w: measure(args, c, w, report))]
    header = (
        f"sebridge every-sink RSS bench: python {sys.version.split()[0]}, {os.cpu_count()} CPUs"
    )
    return run_parts(header, report, steps, ["rss"], "sebridge-bench-")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)

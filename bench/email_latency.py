"""E-mail figures of `sebridge run`, against a real SMTP server and the simulator.

The SMTP server (aiosmtpd, tests/fakes/smtp.py: STARTTLS with a certificate the daemon
trusts through ca_file, AUTH PLAIN) and the IMDS simulator run in this process on
127.0.0.1; each daemon is a child process, `python -m sebridge run --config FILE`, its store
in a temporary directory. Instants are wall-clock time (time.time()) read in this process or
noted by the server and the simulator on arrival.

1. mail: the simulator's document changes (a new Reboot) -> the mail's DATA is taken by the
   SMTP server (each delivery: connect, EHLO, STARTTLS, EHLO, AUTH, MAIL, RCPT, DATA, QUIT),
   poll_interval 1 s, random phase. Baseline: the same daemon's JSON lines sink writing the
   same event's line (same poll, same dispatcher).
2. rss: VmRSS of a daemon with console + e-mail after a warm-up (a mailed event approved by
   policy, one cancelled), beside a console-only daemon given the same events.

    python bench/email_latency.py            # about 1 min
    python bench/email_latency.py --quick    # about 20 s smoke run

Exit status 0 whatever the figures; 1 only if a measurement could not be taken.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

from harness import (
    PROXY_VARS,
    Children,
    JsonlTail,
    ProcSample,
    Report,
    Step,
    daemon_sections,
    p50_p99,
    report_sink_rss,
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
sys.path.insert(0, str(ROOT))  # the SMTP server lives in tests/fakes
from tests.fakes.smtp import FakeSmtp  # noqa: E402

USER, PASSWORD = "bench", "bench-Password-1"

# Targets.
MAIL_S = 0.100  # document change -> mail taken by the server, p99 <= poll interval + 100 ms
RSS_MB = 55.0  # VmRSS with console + e-mail after warm-up, MB (10**6 bytes)


def write_config(
    directory: Path,
    sim: Simulator,
    interval: float,
    *,
    smtp: FakeSmtp | None,
    console: bool = False,
    jsonl: Path | None = None,
) -> Path:
    sections = daemon_sections(directory, sim, interval, console=console)
    if jsonl is not None:
        sections["jsonl"] = {"path": str(jsonl)}
    if smtp is not None:
        sections["email"] = {
            "host": "127.0.0.1",
            "port": smtp.port,
            "ca_file": str(smtp.cert.cert),
            "username": USER,
            "password": PASSWORD,
            "from": "sebridge <sebridge@example.com>",
            "to": ["ops@example.com"],
        }
    return write_sections(directory, sections)


def mail_of(smtp: FakeSmtp, event_id: str, start: int = 0) -> float | None:
    """When the server took the first mail naming `event_id` (from mail number `start`)."""
    for mail in smtp.mails[start:]:
        if event_id in mail.part("plain"):
            return mail.at
    return None


# -- 1. document change -> mail taken by the SMTP server ---------------------------------------


@dataclass
class MailTiming:
    changed: float
    taken: float  # the server ended DATA with 250
    line: float  # the same event's JSONL line became visible (baseline sink)


def measure_mail(
    args: argparse.Namespace, children: Children, work: Path, rng: random.Random
) -> list[MailTiming]:
    directory = work / "mail"
    directory.mkdir()
    timings: list[MailTiming] = []
    jsonl = directory / "events.jsonl"
    with FakeSmtp(users={USER: PASSWORD}) as smtp, simulator() as sim:
        config = write_config(directory, sim, args.interval, smtp=smtp, jsonl=jsonl)
        daemon = start_daemon(children, config, directory / "daemon.log")
        tail = JsonlTail(jsonl)
        try:
            wait_first_polls(daemon, sim)
            for i in range(args.warmup_events + args.events):
                time.sleep(rng.uniform(0, args.interval))  # a random phase of the polling
                start = len(smtp.mails)
                changed = time.time()
                event_id = sim.schedule("Reboot")
                line_at, _ = tail.wait_for(
                    lambda r, e=event_id: (
                        r.get("event_id") == e and r.get("transition") == "scheduled"
                    ),
                    5 * args.interval + 10,
                    daemon.alive,
                )
                taken = wait_for(
                    lambda s=start, e=event_id: mail_of(smtp, e, s),
                    5 * args.interval + 10,
                    f"the mail of {event_id}",
                    daemon.alive,
                )
                sim.complete(event_id)
                wait_for(
                    lambda e=event_id: sum(e in m.part("plain") for m in smtp.mails) >= 2,
                    5 * args.interval + 10,
                    "the cancelled follow-up",
                    daemon.alive,
                )
                if i >= args.warmup_events:
                    timings.append(MailTiming(changed, taken, line_at))
        finally:
            children.stop(daemon.proc)
    return timings


def report_mail(report: Report, args: argparse.Namespace, timings: list[MailTiming]) -> None:
    latency = [t.taken - t.changed for t in timings]
    baseline = [t.line - t.changed for t in timings]
    report.section(
        f"1. document change -> mail taken by the SMTP server ({len(timings)} events, "
        f"poll {args.interval:g} s; STARTTLS + AUTH per mail)"
    )
    report.percentiles(latency, (50, 99), args.interval + MAIL_S)
    report.row("baseline: JSON lines sink, same daemon, p50 / p99", p50_p99(baseline))
    extra = [t.taken - t.line for t in timings]
    report.row(
        "mail after the JSONL line p50 / p99", p50_p99(extra), "(templates + an SMTP session)"
    )


# -- 2. RSS -------------------------------------------------------------------------------


def warm_up(sim: Simulator, smtp: FakeSmtp | None, alive: Callable[[], None]) -> None:
    """A Redeploy approved by the policy (announced, approved, started, completed), a Reboot
    cancelled: the e-mail sink renders and sends every kind of mail."""
    redeploy = sim.schedule("Redeploy", source="User")  # approved by the built-in policy
    reboot = sim.schedule("Reboot")
    wait_for(lambda: redeploy in sim.start_requests, 15, "the policy's StartRequest", alive)
    sim.start_event(redeploy)
    time.sleep(1.5)
    for event_id in (redeploy, reboot):
        sim.complete(event_id)
    if smtp is not None:
        wait_for(lambda: len(smtp.mails) >= 5, 15, "the warm-up's mails", alive)
    time.sleep(1.5)


@dataclass
class RssResult:
    email: ProcSample
    baseline: ProcSample


def measure_rss(args: argparse.Namespace, children: Children, work: Path) -> RssResult:
    directory = work / "rss"
    (directory / "email").mkdir(parents=True)
    (directory / "console").mkdir()
    with FakeSmtp(users={USER: PASSWORD}) as smtp, simulator() as sim_e, simulator() as sim_c:
        with_email = write_config(directory / "email", sim_e, 1.0, smtp=smtp, console=True)
        console_only = write_config(directory / "console", sim_c, 1.0, smtp=None, console=True)
        d_email = start_daemon(children, with_email, directory / "email" / "daemon.log")
        d_console = start_daemon(children, console_only, directory / "console" / "daemon.log")
        try:
            wait_first_polls(d_email, sim_e)
            wait_first_polls(d_console, sim_c)
            warm_up(sim_e, smtp, d_email.alive)
            warm_up(sim_c, None, d_console.alive)
            time.sleep(args.rss_warmup)
            d_email.alive()
            d_console.alive()
            return RssResult(sample(d_email.proc.pid), sample(d_console.proc.pid))
        finally:
            children.stop(d_email.proc)
            children.stop(d_console.proc)


def report_rss(report: Report, result: RssResult) -> None:
    report_sink_rss(
        report,
        "2. memory after warm-up (policy approval, start, end, a cancel; then idle)",
        "e-mail",
        result.email,
        result.baseline,
        RSS_MB,
    )


# -- main -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description="E-mail figures of sebridge.")
    parser.add_argument("--events", type=int, default=50, help="events timed in part 1 (50)")
    parser.add_argument("--warmup-events", type=int, default=2, help="untimed first events (2)")
    parser.add_argument("--interval", type=float, default=1.0, help="poll_interval, part 1 (1.0)")
    parser.add_argument("--rss-warmup", type=float, default=10.0, help="idle s before RSS (10)")
    parser.add_argument("--seed", type=int, help="random seed of the event spacing")
    parser.add_argument("--quick", action="store_true", help="smoke run: 10 events")
    parser.add_argument("--only", choices=("mail", "rss"), action="append")
    args = parser.parse_args(argv)
    if args.quick:
        args.events, args.rss_warmup = 10, 3.0
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for name in PROXY_VARS:
        os.environ.pop(name, None)
    parts = args.only or ["mail", "rss"]
    rng = random.Random(args.seed)
    report = Report()
    steps: list[Step] = [
        ("mail", "mail", lambda c, w: report_mail(report, args, measure_mail(args, c, w, rng))),
        ("rss", "rss", lambda c, w: report_rss(report, measure_rss(args, c, w))),
    ]
    header = (
        f"sebridge e-mail bench: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"seed {args.seed}"
    )
    return run_parts(header, report, steps, parts, "sebridge-bench-")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:
        sys.exit(130)

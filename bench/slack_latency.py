"""Slack figures of `sebridge run`: click -> IMDS POST, document change -> Slack post, memory.

The fake Slack (tests/fakes/slack.py: the Web API over HTTP, Socket Mode over a websocket) and
the IMDS simulator run in this process, on 127.0.0.1; the daemon runs as a child process,
`python -m sebridge run --config FILE`, with its store in a temporary directory. Every
instant compared is wall-clock time (time.time()) read in this process: the fake and the
simulator note when a request arrived, so polling here does not blur the figures.

1. clicks: an approver clicks Approve on a freshly scheduled event's message; the time from
   the click leaving Slack (the envelope sent on the websocket in Socket Mode; just before
   the signed POST to /slack/events in HTTP mode) to the simulator receiving the daemon's
   StartRequests POST (`Simulator.posts[i].at`). Both modes, each its own daemon.
2. post: the simulator's document changes (a new Reboot) -> the daemon's chat.postMessage
   for that event arrives at the fake (`FakeCall.at`), at poll_interval 1 s, split into the
   polling wait and the processing after the poll that saw it.
3. rss: VmRSS of a Socket Mode daemon (console + Slack sinks) after a warm-up with events and
   clicks, beside a console-only daemon given the same events at the same time.

    python bench/slack_latency.py            # about 3 min
    python bench/slack_latency.py --quick    # about 1 min smoke run

Prints each figure with its target and PASS/MISS. Exit status 0 whatever the figures; 1 only
if a measurement could not be taken (a daemon died, a message never came); 130 on Ctrl-C.
"""

from __future__ import annotations

import argparse
import os
import random
import sys
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.error import URLError
from urllib.request import urlopen

from harness import (
    PROXY_VARS,
    BenchError,
    Children,
    Daemon,
    ProcSample,
    Report,
    Step,
    daemon_sections,
    event_gets,
    free_port,
    last_poll,
    mib,
    p50_p99,
    run_parts,
    sample,
    simulator,
    start_daemon,
    start_requests_post,
    wait_first_polls,
    wait_for,
    write_sections,
)
from sebridge.imds.simulator import Simulator

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))  # the fake Slack lives in tests/fakes
from tests.fakes.slack import FakeSlack  # noqa: E402

OPS = "C0123456789"
APPROVER = "U0AAA"
SECRET = "bench-signing-secret"

# Targets.
CLICK_P99_S = 0.050  # click -> IMDS POST, p99, loopback
POST_SLACK_S = 0.050  # document change -> chat.postMessage, p99 <= poll interval + 50 ms
RSS_MB = 60.0  # VmRSS of the Slack (Socket Mode) daemon after warm-up, in MB (10**6 bytes)


# -- plumbing -----------------------------------------------------------------------------


def write_config(
    directory: Path,
    sim: Simulator,
    interval: float,
    *,
    slack: FakeSlack | None,
    mode: str = "socket",
    console: bool = False,
    port: int = 0,
) -> Path:
    """A daemon config: the simulator, a store in `directory`, console and/or Slack."""
    sections = daemon_sections(directory, sim, interval, console=console)
    sections["http"] = {"listen": f"127.0.0.1:{port}"}
    if slack is not None:
        keys: dict[str, object] = {
            "bot_token": slack.bot_token,
            "channel": OPS,
            "approvers": [APPROVER],
            "api_url": slack.url,
        }
        if mode == "socket":
            keys["app_token"] = slack.app_token
        else:
            keys["signing_secret"] = SECRET
        sections["slack"] = keys
    return write_sections(directory, sections)


def wait_ready(
    daemon: Daemon, sim: Simulator, slack: FakeSlack | None, mode: str, port: int
) -> None:
    """First poll done; Socket Mode connected, or /healthz answering in HTTP mode."""
    wait_first_polls(daemon, sim)
    if slack is None:
        return
    if mode == "socket":
        wait_for(lambda: slack.socket_connections >= 1, 30, "Socket Mode", daemon.alive)
        return

    def healthy() -> bool:
        try:
            with urlopen(f"http://127.0.0.1:{port}/healthz", timeout=1) as response:
                return bool(response.status == 200)
        except (URLError, OSError):
            return False

    wait_for(healthy, 30, "the HTTP server", daemon.alive, step=0.05)


def parent_ts(slack: FakeSlack, event_id: str) -> str | None:
    """ts of the top-level message whose metadata names `event_id`."""
    for message in slack.messages.values():
        payload = (message.metadata or {}).get("event_payload") or {}
        if payload.get("event_id") == event_id:
            return message.ts
    return None


def quiet(slack: FakeSlack, for_seconds: float = 0.03, timeout: float = 10.0) -> None:
    """Wait until the daemon made no Web API call for `for_seconds` (its Slack work is done)."""
    deadline = time.monotonic() + timeout
    count, since = len(slack.calls), time.monotonic()
    while time.monotonic() < deadline:
        time.sleep(0.005)
        now_count = len(slack.calls)
        if now_count != count:
            count, since = now_count, time.monotonic()
        elif time.monotonic() - since >= for_seconds:
            return


# -- 1. click -> IMDS POST ---------------------------------------------------------------


@dataclass
class ClickRun:
    mode: str
    click_to_post: list[float] = field(default_factory=list)
    click_to_ack: list[float] = field(default_factory=list)  # envelope ack / HTTP 200
    post_to_reply: list[float] = field(default_factory=list)  # POST -> "approved" reply at Slack
    rss_after: ProcSample | None = None


def measure_clicks(args: argparse.Namespace, children: Children, work: Path, mode: str) -> ClickRun:
    directory = work / f"clicks-{mode}"
    directory.mkdir()
    run = ClickRun(mode)
    port = free_port() if mode == "http" else 0
    with FakeSlack(channels={OPS: "ops"}) as slack, simulator() as sim:
        config = write_config(directory, sim, args.click_poll, slack=slack, mode=mode, port=port)
        daemon = start_daemon(children, config, directory / "daemon.log")
        try:
            wait_ready(daemon, sim, slack, mode, port)
            url = f"http://127.0.0.1:{port}/slack/events"
            for i in range(args.warmup_clicks + args.clicks):
                event_id = sim.schedule("Reboot")
                ts = wait_for(
                    lambda event_id=event_id: parent_ts(slack, event_id),
                    10,
                    f"the Slack message of {event_id}",
                    daemon.alive,
                    step=0.002,
                )
                quiet(slack)
                payload = slack.block_actions_payload(
                    "approve", value=event_id, user_id=APPROVER, channel=OPS, message_ts=ts
                )
                posts_before = len(sim.posts)
                if mode == "socket":
                    envelope_id = slack.send_envelope(payload)
                    clicked = slack.socket.envelopes[envelope_id].at
                    acked: float | None = None
                else:
                    clicked = time.time()
                    status, _, _ = slack.post_interaction(url, payload, SECRET)
                    acked = time.time() - clicked
                    if status != 200:
                        raise BenchError(f"POST /slack/events answered {status}")
                post = start_requests_post(sim, posts_before, event_id, daemon.alive)
                if mode == "socket":
                    if slack.wait_ack(envelope_id, 3) is None:
                        raise BenchError(f"the click on {event_id} was not acknowledged in 3 s")
                    acked = slack.ack_latency(envelope_id)
                replied = wait_for(
                    lambda ts=ts: slack.replies(OPS, ts),
                    10,
                    f"the 'approved' reply of {event_id}",
                    daemon.alive,
                )
                if i >= args.warmup_clicks:
                    run.click_to_post.append(post.at - clicked)
                    if acked is not None:
                        run.click_to_ack.append(acked)
                    run.post_to_reply.append(float(replied[0].ts) - post.at)
                sim.complete(event_id)  # keeps the document at one event
            quiet(slack)
            daemon.alive()
            run.rss_after = sample(daemon.proc.pid)
        finally:
            children.stop(daemon.proc)
    return run


def report_clicks(report: Report, run: ClickRun) -> None:
    what = "envelope sent on the websocket" if run.mode == "socket" else "signed POST sent"
    name = "Socket Mode" if run.mode == "socket" else "HTTP mode"
    report.section(
        f"1. click -> IMDS StartRequests POST, {name} ({len(run.click_to_post)} clicks; "
        f"from the {what})"
    )
    report.percentiles(run.click_to_post, (50, 90, 99), CLICK_P99_S)
    acked = "envelope ack received" if run.mode == "socket" else "HTTP 200 received"
    if run.click_to_ack:
        report.row(
            f"click -> {acked} p50 / p99",
            p50_p99(run.click_to_ack),
            "(Slack allows 3 s)",
        )
    if run.post_to_reply:
        report.row("IMDS POST -> 'approved' reply at Slack p50 / p99", p50_p99(run.post_to_reply))
    if run.rss_after is not None:
        report.row(
            "daemon VmRSS after these clicks",
            mib(run.rss_after.rss_kib),
            f"(VmHWM {mib(run.rss_after.hwm_kib)})",
        )


# -- 2. document change -> chat.postMessage ---------------------------------------------


@dataclass
class PostTiming:
    changed: float  # just before Simulator.schedule()
    poll: float  # arrival of the poll that saw it (the last GET before the post)
    posted: float  # the chat.postMessage arrived at the fake


def measure_post(
    args: argparse.Namespace, children: Children, work: Path, rng: random.Random
) -> tuple[list[PostTiming], list[float]]:
    directory = work / "post"
    directory.mkdir()
    interval = args.interval
    timings: list[PostTiming] = []
    with FakeSlack(channels={OPS: "ops"}) as slack, simulator() as sim:
        config = write_config(directory, sim, interval, slack=slack, mode="socket")
        daemon = start_daemon(children, config, directory / "daemon.log")
        try:
            wait_ready(daemon, sim, slack, "socket", 0)
            for i in range(args.warmup_events + args.events):
                time.sleep(rng.uniform(0, interval))  # a uniformly random phase of the polling
                calls_before = len(slack.calls)
                changed = time.time()
                event_id = sim.schedule("Reboot")

                def posted(event_id: str = event_id, start: int = calls_before) -> Any:
                    for call in slack.calls[start:]:
                        payload = (call.params.get("metadata") or {}).get("event_payload") or {}
                        if (
                            call.method == "chat.postMessage"
                            and payload.get("event_id") == event_id
                        ):
                            return call
                    return None

                call = wait_for(
                    posted, 5 * interval + 10, f"chat.postMessage of {event_id}", daemon.alive
                )
                sim.complete(event_id)
                ts = wait_for(lambda event_id=event_id: parent_ts(slack, event_id), 5, "ts")
                wait_for(
                    lambda ts=ts: slack.replies(OPS, ts), 5 * interval + 10, "the cancel reply"
                )
                if i >= args.warmup_events:
                    timings.append(PostTiming(changed, 0.0, call.at))
            gets = event_gets(sim)
        finally:
            children.stop(daemon.proc)
    for t in timings:
        t.poll = last_poll(gets, t.posted, t.changed)
    return timings, gets


def report_post(
    report: Report, args: argparse.Namespace, measured: tuple[list[PostTiming], list[float]]
) -> None:
    timings, _gets = measured
    interval = args.interval
    latency = [t.posted - t.changed for t in timings]
    wait = [max(0.0, t.poll - t.changed) for t in timings]
    processing = [t.posted - t.poll for t in timings]
    report.section(
        f"2. document change -> chat.postMessage at Slack ({len(timings)} events, "
        f"poll {interval:g} s, Socket Mode daemon)"
    )
    report.percentiles(latency, (50, 90, 99), interval + POST_SLACK_S)
    report.poll_split(interval, wait, processing, "poll -> chat.postMessage", POST_SLACK_S)


# -- 3. RSS ---------------------------------------------------------------------------------


@dataclass
class RssResult:
    slack: ProcSample
    baseline: ProcSample
    seconds: float


def warm_up(sim: Simulator, slack: FakeSlack | None, alive: Callable[[], None]) -> None:
    """Events through every path: a click approval, "I'm on it", a policy approval, a cancel."""
    reboot = sim.schedule("Reboot")
    redeploy = sim.schedule("Redeploy", source="User")  # approved by the policy
    freeze = sim.schedule("Freeze")
    wait_for(lambda: len(sim.document()["Events"]) == 3, 5, "the events")
    if slack is not None:
        for event_id, action in ((reboot, "approve"), (freeze, "take")):
            ts = wait_for(lambda e=event_id: parent_ts(slack, e), 15, "a Slack message", alive)
            payload = slack.block_actions_payload(
                action, value=event_id, user_id=APPROVER, channel=OPS, message_ts=ts
            )
            envelope_id = slack.send_envelope(payload)
            if slack.wait_ack(envelope_id, 5) is None:
                raise BenchError("a warm-up click was not acknowledged")
        wait_for(lambda: reboot in sim.start_requests, 10, "the click's StartRequest", alive)
    else:
        time.sleep(1.0)
    wait_for(lambda: redeploy in sim.start_requests, 10, "the policy's StartRequest", alive)
    for event_id in (reboot, redeploy):
        sim.start_event(event_id)
    time.sleep(1.0)
    for event_id in (reboot, redeploy, freeze):
        sim.complete(event_id)
    time.sleep(1.0)
    if slack is not None:
        quiet(slack, 0.2)


def measure_rss(args: argparse.Namespace, children: Children, work: Path) -> RssResult:
    directory = work / "rss"
    (directory / "slack").mkdir(parents=True)
    (directory / "console").mkdir()
    with (
        FakeSlack(channels={OPS: "ops"}) as slack,
        simulator() as sim_slack,
        simulator() as sim_console,
    ):
        with_slack = write_config(
            directory / "slack", sim_slack, 1.0, slack=slack, mode="socket", console=True
        )
        console_only = write_config(
            directory / "console", sim_console, 1.0, slack=None, console=True
        )
        d_slack = start_daemon(children, with_slack, directory / "slack" / "daemon.log")
        d_console = start_daemon(children, console_only, directory / "console" / "daemon.log")
        try:
            wait_ready(d_slack, sim_slack, slack, "socket", 0)
            wait_ready(d_console, sim_console, None, "socket", 0)
            started = time.monotonic()
            warm_up(sim_slack, slack, d_slack.alive)
            warm_up(sim_console, None, d_console.alive)
            time.sleep(args.rss_warmup)
            d_slack.alive()
            d_console.alive()
            result = RssResult(
                sample(d_slack.proc.pid), sample(d_console.proc.pid), time.monotonic() - started
            )
        finally:
            children.stop(d_slack.proc)
            children.stop(d_console.proc)
    return result


def report_rss(report: Report, result: RssResult) -> None:
    s, b = result.slack, result.baseline
    report.section(
        f"3. memory after warm-up ({result.seconds:.0f} s: events, clicks, then idle; "
        "both daemons console on, stdout to /dev/null)"
    )
    mb = s.rss_kib * 1024 / 1e6
    report.row(
        "VmRSS, Slack sink (Socket Mode)",
        f"{mib(s.rss_kib)} ({mb:.1f} MB)",
        f"<= {RSS_MB:g} MB",
        mb <= RSS_MB,
    )
    report.row(
        "  RssAnon / RssFile", f"{mib(s.anon_kib)} / {mib(s.file_kib)}", f"({s.threads} threads)"
    )
    report.row("  VmHWM (peak)", mib(s.hwm_kib))
    report.row("VmRSS, console only (baseline)", mib(b.rss_kib), f"({b.threads} threads)")
    report.row("  RssAnon / RssFile", f"{mib(b.anon_kib)} / {mib(b.file_kib)}")
    report.row("  VmHWM (peak)", mib(b.hwm_kib))
    report.row("ratio Slack / baseline VmRSS", f"{s.rss_kib / b.rss_kib:.2f}x")
    report.row("Slack's cost (difference)", mib(s.rss_kib - b.rss_kib))


# -- main -------------------------------------------------------------------------------


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        description="Slack figures of `sebridge run` against the fake Slack and the simulator."
    )
    parser.add_argument("--clicks", type=int, default=100, help="clicks timed per mode (100)")
    parser.add_argument("--warmup-clicks", type=int, default=3, help="untimed first clicks (3)")
    parser.add_argument(
        "--click-poll", type=float, default=0.2, help="poll_interval of the click daemons (0.2)"
    )
    parser.add_argument("--events", type=int, default=50, help="events timed in part 2 (50)")
    parser.add_argument("--warmup-events", type=int, default=2, help="untimed first events (2)")
    parser.add_argument("--interval", type=float, default=1.0, help="poll_interval in part 2 (1.0)")
    parser.add_argument(
        "--rss-warmup", type=float, default=10.0, help="idle seconds before the RSS sample (10)"
    )
    parser.add_argument("--seed", type=int, help="random seed of the event spacing")
    parser.add_argument(
        "--quick", action="store_true", help="smoke run: 30 clicks per mode, 15 events, 3 s idle"
    )
    parser.add_argument(
        "--only", choices=("clicks", "post", "rss"), action="append", help="run only these"
    )
    args = parser.parse_args(argv)
    if args.quick:
        args.clicks, args.events, args.rss_warmup = 30, 15, 3.0
    if args.clicks < 1 or args.events < 1:
        parser.error("--clicks and --events must be positive")
    if args.seed is None:
        args.seed = random.randrange(1_000_000)
    return args


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    for name in PROXY_VARS:  # loopback only: neither we nor the daemons may use a proxy
        os.environ.pop(name, None)
    os.environ.pop("SEBRIDGE_CONFIG", None)
    parts = args.only or ["clicks", "post", "rss"]
    rng = random.Random(args.seed)
    report = Report()
    steps: list[Step] = [
        (
            "clicks",
            "clicks, Socket Mode",
            lambda c, w: report_clicks(report, measure_clicks(args, c, w, "socket")),
        ),
        (
            "clicks",
            "clicks, HTTP mode",
            lambda c, w: report_clicks(report, measure_clicks(args, c, w, "http")),
        ),
        (
            "post",
            "document change -> chat.postMessage",
            lambda c, w: report_post(report, args, measure_post(args, c, w, rng)),
        ),
        ("rss", "memory", lambda c, w: report_rss(report, measure_rss(args, c, w))),
    ]
    header = (
        f"sebridge Slack bench: python {sys.version.split()[0]}, {os.cpu_count()} CPUs, "
        f"daemon as a child process, seed {args.seed}"
    )
    return run_parts(header, report, steps, parts, "sebridge-slack-bench-")


if __name__ == "__main__":
    try:
        sys.exit(main())
    except KeyboardInterrupt:  # Ctrl-C or SIGTERM: the children are already stopped
        print("interrupted", file=sys.stderr)
        sys.exit(130)

"""Messages per sink for one 3-VM event with one retry, before and after `transitions`.

Issue 34, finding 15: one Reboot listing web1, web2 and web3, on a fleet of three
agents sharing PostgreSQL (the daemons built as `sebridge run` builds them,
cli/runtime.py: build_daemon, ticked by hand), a person asked (`ask`); the
prepare hook `drain` runs on each VM at the prepare lead (web2's fails once,
then succeeds on its retry); then alice approves (`sebridge approve`'s use
case), the event starts and completes, and the recover hook `undrain` runs on
each VM. Every sink is
configured (console, JSON lines, Slack, Teams, Jira, e-mail, webhook) and
never reached: what is counted is the outbox rows written for each sink, one
per message (a Slack reply, a Teams card, a Jira comment, a mail).

"Before" runs the same scenario on the code of the merge-base with main (its
`src` and `templates`, taken with `git archive` into a temporary folder, or
--before-src), "after" on this tree; each in a process of its own.

    python bench/routing_noise.py [--dsn postgresql://postgres@127.0.0.1:5432/postgres]
        [--action ask|approve]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
import uuid
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
VMS = ("web1", "web2", "web3")
SINKS = ("console", "jsonl", "slack", "teams", "jira", "email", "webhook")


def _hooks_round(d: Any) -> None:
    """The hook worker's round, waited for: run_once; a tree before it, round() (inline)."""
    worker = getattr(d, "hook_worker", None)
    if worker is not None:
        worker.run_once()
    else:
        d.hooks.worker.round()


def _carrier_round(d: Any) -> None:
    """The carrier's round: run_once; a tree before it, wake() (inline without a thread)."""
    run_once = getattr(d.carrier, "run_once", None)
    (run_once or d.carrier.wake)()


def scenario(dsn: str, work: Path, action: str = "ask") -> dict[str, list[str]]:
    """Run the event on three agents; the kinds of the outbox rows per sink, in order.
    action "approve": the rule approves (after the drains) instead of alice."""
    import psycopg

    from sebridge.cli.runtime import build_daemon
    from sebridge.imds.simulator import Simulator
    from sebridge.integrations.registry import config_from_mapping
    from sebridge.model.approval_request import ApprovalRequest

    database = f"sebridge_noise_{uuid.uuid4().hex[:8]}"
    with psycopg.connect(dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{database}"')
    url = dsn.rsplit("/", 1)[0] + f"/{database}"
    drain = work / "drain"
    drain.write_text(
        "#!/bin/sh\n"
        f'if [ "$SEBRIDGE_VM_NAME" = web2 ] && [ ! -e "{work}/failed-once" ]; then\n'
        f'  touch "{work}/failed-once"; echo "web2: jobs still running"; exit 1\n'
        "fi\n"
    )
    drain.chmod(0o755)
    dead = "http://127.0.0.1:9"  # nothing listens: no message ever leaves
    sim = Simulator(vm_name="web1").start()
    daemons = []
    try:
        for vm in VMS:
            data: dict[str, Any] = {
                "imds": {"endpoint": sim.url, "vm_name": vm},
                "store": {"url": url},
                "console": {"enabled": True},
                "jsonl": {"path": str(work / f"{vm}.jsonl")},
                "slack": {
                    "bot_token": "xoxb-1-bench",
                    "app_token": "xapp-1-bench",
                    "channel": "C0BENCH",
                    "api_url": f"{dead}/api/",
                },
                "teams": {"webhook_url": f"{dead}/teams"},
                "jira": {
                    "url": dead,
                    "email": "ops@example.com",
                    "api_token": "bench",
                    "project": "OPS",
                },
                "email": {
                    "host": "127.0.0.1",
                    "port": 9,
                    "starttls": False,
                    "from": "sebridge@example.com",
                    "to": ["ops@example.com"],
                },
                "webhook": {"url": f"{dead}/hook", "secret": "whsec_" + "A" * 44},
                "policy": {
                    "prepare_lead_seconds": 3600,  # the drains start before anyone approved
                    "rules": [
                        {
                            "name": "drain first",
                            "action": action,
                            "prepare": ["drain"],
                            "recover": ["undrain"],
                        }
                    ],
                },
                "hooks": {
                    "drain": {"command": [str(drain)], "retries": 1, "retry_delay": 0},
                    "undrain": {"command": ["/bin/true"]},
                },
            }
            with open(os.devnull, "w") as quiet:
                daemons.append(build_daemon(config_from_mapping(data, environ={}), quiet))

        def rounds(n: int = 4) -> None:
            # Every agent polls, then runs its hooks, then carries approvals out: each
            # knows the others (their documents) before a readiness is judged.
            for _ in range(n):
                for d in daemons:
                    d.tick()
                for d in daemons:
                    _hooks_round(d)
                for d in daemons:
                    _carrier_round(d)

        rounds(1)  # every agent has run (and beaten) before the event comes
        event = sim.schedule("Reboot", resources=list(VMS), notice=900)
        rounds()
        if action == "ask":
            # Recorded; the rounds below carry it out (no carrier thread here to wait for).
            daemons[0].approvals.request(ApprovalRequest(event, "alice", "cli"), wait=0)
            rounds()
        sim.start_event(event)
        rounds()
        sim.complete(event)
        rounds()
        kinds: dict[str, list[str]] = {sink: [] for sink in SINKS}
        with psycopg.connect(url) as conn:
            rows = conn.execute(
                "SELECT o.sink, t.kind FROM outbox o JOIN transitions t ON t.id = o.transition_id "
                "ORDER BY o.id"
            )
            for sink, kind in rows:
                kinds[sink].append(kind)
            if os.environ.get("SEBRIDGE_BENCH_NOTES"):  # what each folded message said
                for (note,) in conn.execute(
                    "SELECT data FROM transitions WHERE kind = 'ready' ORDER BY id"
                ):
                    print(json.loads(note).get("note"), file=sys.stderr)
        return kinds
    finally:
        for d in daemons:
            d.parts.dispatcher.stop(0.0)
            d.imds.close()
            d.store.close()
        sim.stop()
        with psycopg.connect(dsn, autocommit=True) as admin:
            admin.execute(f'DROP DATABASE IF EXISTS "{database}" WITH (FORCE)')


def run_on(src: Path, dsn: str, action: str) -> dict[str, list[str]]:
    """The scenario in a process whose `sebridge` is the one in `src`."""
    env = {**os.environ, "PYTHONPATH": str(src), "SEBRIDGE_BENCH_CHILD": "1"}
    code = (
        "import sys, json, runpy, pathlib, tempfile\n"
        f"sys.path.insert(0, {str(src)!r})\n"
        "import sebridge\n"
        f"assert pathlib.Path(sebridge.__file__).is_relative_to({str(src)!r}), sebridge.__file__\n"
        f"bench = runpy.run_path({str(Path(__file__))!r}, run_name='bench')\n"
        "with tempfile.TemporaryDirectory() as work:\n"
        f"    print(json.dumps(bench['scenario']({dsn!r}, pathlib.Path(work), {action!r})))\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env=env, capture_output=True, text=True, check=False
    )
    if done.returncode != 0:
        raise SystemExit(f"the scenario failed on {src}:\n{done.stderr[-3000:]}")
    kinds: dict[str, list[str]] = json.loads(done.stdout.strip().splitlines()[-1])
    return kinds


def before_tree(target: Path) -> Path:
    """The merge-base with main's `src` and `templates`, unpacked under `target`."""
    base = subprocess.run(
        ["git", "-C", str(ROOT), "merge-base", "HEAD", "main"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    archive = subprocess.run(
        ["git", "-C", str(ROOT), "archive", base, "src", "templates"],
        capture_output=True,
        check=True,
    ).stdout
    subprocess.run(["tar", "-x", "-C", str(target)], input=archive, check=True)
    print(f"before: {base[:7]} (merge-base with main); after: this tree")
    return target / "src"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dsn", default="postgresql://postgres@127.0.0.1:5432/postgres")
    parser.add_argument("--before-src", type=Path, help="the `src` folder of the code before")
    parser.add_argument(
        "--action", choices=("ask", "approve"), default="ask", help="the rule's action (ask)"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        before_src = args.before_src or before_tree(Path(tmp))
        before = run_on(before_src, args.dsn, args.action)
        after = run_on(ROOT / "src", args.dsn, args.action)
    print(f"{'sink':<10}{'before':>8}{'after':>8}  after, by kind")
    for sink in SINKS:
        said = ", ".join(f"{k} {after[sink].count(k)}" for k in dict.fromkeys(after[sink]))
        print(f"{sink:<10}{len(before[sink]):>8}{len(after[sink]):>8}  {said}")


if __name__ == "__main__":
    main()

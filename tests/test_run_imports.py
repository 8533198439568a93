"""What `sebridge run` loads, for a console-only config: none of the heavy parts it does not run.

A child process runs the daemon against the simulator; it notes what is loaded when its
first IMDS GET goes out and, once its first poll was acted on (the jobs' scheduler built,
the templates tried), what is loaded then, and exits. Each is checked against a deny-list:
packages and modules that cost memory or start-up time and that a daemon with the console
alone must not load (by then). A small module of ours added to `run`'s path passes; the
daemon's memory is a benchmark (bench/compare_release.py: idle VmRSS against its 40 MiB
budget). See docs/ARCHITECTURE.md, "Layout".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sebridge.imds.simulator import Simulator

# Never loaded by `run` with the console alone, each with what would load it.
NEVER = {
    # third-party packages
    "prometheus_client": "an HTTP server (/metrics)",
    "waitress": "an HTTP server",
    "re2": "a `description` rule",
    "slack_bolt": "[slack]",
    "slack_sdk": "[slack]",
    "jira": "[jira]",
    "pymsteams": "[teams]",
    "requests": "the sinks whose libraries use it",
    "standardwebhooks": "[webhook]",
    "icalendar": "[web] page (the calendar feed)",
    "psycopg": "a PostgreSQL store",
    "pythonjsonlogger": "log_format = json",
    # the standard library's heavier parts, each loaded where it is used
    "difflib": "a misspelt name in the config (did you mean)",
    "email.headerregistry": "an [email] address to check",
    "smtplib": "[email]",
    # sebridge's own
    "sebridge.web": "an HTTP server, approval links",
    "sebridge.web.health": "/healthz",
    "sebridge.web.readyz": "/readyz",
    "sebridge.hooks.process": "the first hook run",
    "sebridge.store.postgres": "a PostgreSQL store",
    "sebridge.store.pg_listen": "a PostgreSQL store",
    "sebridge.store.fleet_view": "[web] page",
    "sebridge.policy.explain": "`sebridge policy explain`",
    "sebridge.imds.simulator": "`sebridge simulate`",
    "sebridge.cli.doctor": "`sebridge check`",
    "sebridge.cli.demo": "`sebridge demo`",
    "sebridge.cli.approve": "`sebridge approve`",
    "sebridge.integrations.slack.sink": "[slack]",
    "sebridge.integrations.slack.bolt": "[slack] socket mode",
    "sebridge.integrations.teams.sink": "[teams]",
    "sebridge.integrations.jira.sink": "[jira]",
    "sebridge.integrations.jira.client": "[jira]",
    "sebridge.integrations.kubernetes.sink": "[kubernetes]",
    "sebridge.integrations.kubernetes.client": "[kubernetes]",
    "sebridge.integrations.email.sink": "[email]",
    "sebridge.integrations.webhook.sink": "[webhook]",
    "sebridge.integrations.jsonl.sink": "[jsonl]",
}
# Not loaded yet when the first GET goes out: the scheduler and the templates come after
# the first poll (engine/schedule.py; integrations/render.py: the built-in templates are
# compiled after it).
AFTER_THE_FIRST_GET = {
    "apscheduler": "the jobs' scheduler, built once the first poll is over",
    "tzlocal": "APScheduler",
    "jinja2": "the templates, compiled once the first poll is over",
    "markupsafe": "Jinja2",
}

# Runs `sebridge run` as `python -m sebridge run` does. At the first GET it notes the
# modules loaded; after the first Daemon.act(), once the jobs' scheduler runs and the
# templates were tried (Renderer.warm), it prints both lists and ends the process.
PROBE = """
import json, os, sys, threading, time
import sebridge.engine.daemon as daemon
import sebridge.integrations.render as render

at_first_get = []
get = daemon.ImdsClient.get_document
def first_get(self):
    if not at_first_get:
        at_first_get.append(sorted(sys.modules))
    return get(self)
daemon.ImdsClient.get_document = first_get

warmed = threading.Event()
warm = render.Renderer.warm
def warming(self):
    warm(self)
    warmed.set()
render.Renderer.warm = warming

act = daemon.Daemon.act
def first(self, polled):
    act(self, polled)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if any(t.name == "APScheduler" for t in threading.enumerate()) and warmed.is_set():
            break
        time.sleep(0.01)
    print(json.dumps({"first_get": at_first_get[0], "after": sorted(sys.modules)}), flush=True)
    os._exit(0)
daemon.Daemon.act = first
from sebridge.cli.main import main
sys.exit(main(["run", "--config", sys.argv[1]]))
"""


def denied(loaded: list[str], deny: dict[str, str]) -> list[str]:
    """Each denied name `loaded` holds (a name stands for its submodules too), with why."""
    return [
        f"{name} (only with {why})"
        for name, why in deny.items()
        if any(module == name or module.startswith(name + ".") for module in loaded)
    ]


def test_run_with_the_console_alone_loads_nothing_heavy_it_does_not_run(
    sim: Simulator, tmp_path: Path
) -> None:
    config = tmp_path / "sebridge.toml"
    config.write_text(
        f'[imds]\nendpoint = "{sim.url}"\npoll_interval = 0.2\nvm_name = "vm0"\n'
        f'[store]\nurl = "sqlite:///{tmp_path}/state.db"\n[console]\nenabled = true\n',
        encoding="utf-8",
    )
    child = subprocess.run(
        [sys.executable, "-c", PROBE, str(config)],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    lines = [line for line in child.stdout.splitlines() if line.startswith("{")]
    assert lines, f"no module list (exit {child.returncode}): {child.stderr[-2000:]}"
    loaded = json.loads(lines[-1])
    assert denied(loaded["first_get"], NEVER | AFTER_THE_FIRST_GET) == []
    assert denied(loaded["after"], NEVER) == []
    # What comes after the first GET does come: the probe saw the daemon's whole start.
    assert denied(loaded["after"], AFTER_THE_FIRST_GET) == [
        f"{name} (only with {why})" for name, why in AFTER_THE_FIRST_GET.items()
    ]

"""What `sebridge run` loads, for a console-only config: nothing it does not run.

A child process runs the daemon against the simulator; once its first poll was acted on
it prints the sebridge modules and the third-party packages it holds, and exits. The
lists below are exact: a module added to `run`'s path (a CLI-only command's, the HTTP
server's, prometheus_client without /metrics) fails this test by name; one that is no
longer loaded is to be removed from the list. See docs/ARCHITECTURE.md, "Layout".
"""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

from sebridge.imds.simulator import Simulator

# sebridge's modules, without their "sebridge." prefix ("sebridge": the package itself).
EXPECTED_MODULES = frozenset(
    [
        "sebridge",
        "approval",
        "approval.assembly",
        "approval.carrier",
        "approval.counts",
        "approval.gate",
        "approval.outcomes",
        "approval.request",
        "approval.usecase",
        "cli",
        "cli.commands",
        "cli.exits",
        "cli.main",
        "cli.runtime",
        "config",
        "config.checks",
        "config.core",
        "config.durations",
        "config.instances",
        "config.key_strength",
        "config.loader",
        "config.masked",
        "config.pattern",
        "config.policy",
        "config.reader",
        "config.secrets",
        "config.unit_credentials",
        "config.unit_environment",
        "engine",
        "engine.daemon",
        "engine.diff",
        "engine.dispatch",
        "engine.leases",
        "engine.metrics",
        "engine.poll",
        "engine.record",
        "engine.reminders",
        "engine.runner",
        "engine.schedule",
        "engine.services",
        "engine.stop_signals",
        "engine.wakeups",
        "hooks",
        "hooks.agent",
        "hooks.chains",
        "hooks.gate",
        "hooks.readiness",
        "hooks.words",
        "hooks.worker",
        "imds",
        "imds.answers",
        "imds.client",
        "imds.endpoint",
        "imds.parse",
        "imds.unreadable",
        "imds.vm_name",
        "imds.wire",
        "integrations",
        "integrations.base",
        "integrations.console",
        "integrations.console.sink",
        "integrations.email",
        "integrations.email.settings",
        "integrations.jira",
        "integrations.jira.settings",
        "integrations.jsonl",
        "integrations.kubernetes",
        "integrations.kubernetes.settings",
        "integrations.registry",
        "integrations.render",
        "integrations.samples",
        "integrations.slack",
        "integrations.slack.settings",
        "integrations.teams",
        "integrations.teams.settings",
        "integrations.webhook",
        "integrations.webhook.settings",
        "kernel",
        "kernel.arenas",
        "kernel.backoff",
        "kernel.clock",
        "kernel.errors",
        "kernel.outage",
        "kernel.redact",
        "kernel.retry_after",
        "kernel.text",
        "kernel.worker",
        "kernel.wsgi",
        "model",
        "model.approval",
        "model.decision",
        "model.kinds",
        "model.leads",
        "model.message",
        "model.outlook",
        "model.readiness",
        "model.title",
        "policy",
        "policy.compile",
        "policy.matchers",
        "policy.rules",
        "store",
        "store.approvals",
        "store.claims",
        "store.codec",
        "store.connect",
        "store.database",
        "store.duties",
        "store.events",
        "store.history",
        "store.hook_retries",
        "store.hook_runs",
        "store.lock",
        "store.outbox",
        "store.records",
        "store.schema",
        "store.schema_check",
        "store.settings",
        "store.sqlite",
        "store.stand_ins",
        "store.store",
        "store.vm_tags",
    ]
)
# Third-party top-level packages (the scheduler, templates). Not urllib3: the poll's GET
# takes the IMDS client's fast path (imds/wire.py); urllib3 comes with a POST (imds/pooled.py).
EXPECTED_PACKAGES = frozenset({"apscheduler", "jinja2", "markupsafe", "tzlocal"})
# What is loaded when the first GET goes out: the scheduler and the templates come after
# it (engine/schedule.py; integrations/render.py: built-in templates are tried after).
FIRST_GET_PACKAGES: frozenset[str] = frozenset()

# Runs `sebridge run` as `python -m sebridge run` does. At the first poll it notes the
# packages loaded; after the first Daemon.act(), once the jobs' scheduler runs and the
# templates were tried (Renderer.warm), it prints what is loaded and ends the process.
PROBE = """
import json, os, sys, threading, time
import sebridge.engine.daemon as daemon
import sebridge.integrations.render as render

def packages():
    top = {name.split(".")[0] for name in sys.modules}
    third = top - set(sys.stdlib_module_names) - set(sys.builtin_module_names)
    return sorted(n for n in third if n != "sebridge" and not n.startswith("_"))

at_first_get = []
get = daemon.ImdsClient.get_document
def first_get(self):
    if not at_first_get:
        at_first_get.append(packages())
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
    print(json.dumps({
        "sebridge": sorted(n for n in sys.modules if n.split(".")[0] == "sebridge"),
        "packages": packages(),
        "first_get": at_first_get[0],
    }), flush=True)
    os._exit(0)
daemon.Daemon.act = first
from sebridge.cli.main import main
sys.exit(main(["run", "--config", sys.argv[1]]))
"""


def _short(name: str) -> str:
    return name if name == "sebridge" else name.removeprefix("sebridge.")


def test_run_with_the_console_alone_loads_only_what_it_runs(sim: Simulator, tmp_path: Path) -> None:
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
    modules = {_short(name) for name in loaded["sebridge"]}
    assert not modules - EXPECTED_MODULES, f"`run` loads more: {sorted(modules - EXPECTED_MODULES)}"
    assert not EXPECTED_MODULES - modules, (
        f"no longer loaded, remove from EXPECTED_MODULES: {sorted(EXPECTED_MODULES - modules)}"
    )
    packages = set(loaded["packages"])
    assert packages == EXPECTED_PACKAGES, (
        f"more: {sorted(packages - EXPECTED_PACKAGES)}, fewer: {sorted(EXPECTED_PACKAGES - packages)}"
    )
    first_get = set(loaded["first_get"])
    assert first_get == FIRST_GET_PACKAGES, f"loaded before the first GET: {sorted(first_get)}"

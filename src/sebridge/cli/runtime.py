"""Builds the daemon from a Config: IMDS client, store, sinks, then the daemon and its runner.

The composition root beside the registry: it turns the configuration into
a Daemon (the tick, its parts built by cli/assembly.py), a Runner (their life,
given the same record of parts, with what the integrations bring inbound:
cli/serving.py) or an approval desk for a process that is not the daemon (the
CLI). See docs/ARCHITECTURE.md, "Composition root".
"""

from __future__ import annotations

import contextlib
import logging
import os
import sys
from collections.abc import Callable
from datetime import timedelta
from typing import TYPE_CHECKING, TextIO

from sebridge.approval.assembly import assemble
from sebridge.approval.usecase import Approvals
from sebridge.cli.assembly import compose_daemon
from sebridge.cli.imds_client import build_imds
from sebridge.cli.link_keys import link_signer
from sebridge.config.loader import Config
from sebridge.config.masked import secret_values
from sebridge.engine.daemon import Daemon
from sebridge.engine.runner import Runner
from sebridge.imds import ImdsClient
from sebridge.imds.vm_name import BRIEF_WAIT, learn_vm_name
from sebridge.integrations import registry
from sebridge.integrations.render import Renderer
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import (
    ConfigError,
    ImdsError,
    PermanentDeliveryError,
    StoreInUseError,
)
from sebridge.kernel.redact import Masker
from sebridge.kernel.text import VisibleFormatter
from sebridge.model.message import Sink
from sebridge.policy.compile import build_policy, uses_tags
from sebridge.store import Store

if TYPE_CHECKING:
    from sebridge.hooks.gate import ReadinessGate

# What only some configurations use (the HTTP server, approval links, /metrics, the CLI's
# approval desk) is imported where it is used: `run` loads what it runs
# (tests/test_run_imports.py).

log = logging.getLogger(__name__)

__all__ = [
    "build_daemon",
    "build_desk",
    "build_runner",
    "build_sinks",
    "configure_logging",
    "missing_store",
    "open_store",
    "template_problems",
    "vm_name",
]


def configure_logging(config: Config, verbose: bool = False) -> None:
    """Logs go to stderr (stdout belongs to the console and JSON lines sinks).

    `[log] format = "json"`: one JSON object per line (python-json-logger does
    the escaping, so a quote or a newline in a message cannot break a line);
    a traceback is the "exception" field of its record.
    """
    level = logging.DEBUG if verbose else getattr(logging, config.log.level.upper())
    handler = logging.StreamHandler(sys.stderr)
    if config.log.format == "json":
        from pythonjsonlogger.json import JsonFormatter

        handler.setFormatter(
            JsonFormatter(
                "%(asctime)s %(levelname)s %(name)s %(message)s",
                rename_fields=_JSON_FIELDS,
                datefmt="%Y-%m-%dT%H:%M:%S%z",
            )
        )
    else:
        # IMDS text in a message is shown escaped: one record stays one line.
        handler.setFormatter(VisibleFormatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
    logging.basicConfig(level=level, handlers=[handler], force=True)
    # APScheduler logs every run at INFO: once a second is noise.
    logging.getLogger("apscheduler").setLevel(max(level, logging.WARNING))


_JSON_FIELDS = {
    "asctime": "ts",
    "levelname": "level",
    "name": "logger",
    "message": "msg",
    "exc_info": "exception",
}


def vm_name(config: Config, *, wait: float | None = None) -> str:
    """This VM's name, the agent's identity: `[imds] vm_name`, else IMDS's compute name
    (asked for up to `wait` seconds, default imds.vm_name.NAME_WAIT). ConfigError naming
    imds.vm_name when IMDS does not say. See docs/ARCHITECTURE.md, "Agent name"."""
    if config.imds.vm_name:
        return config.imds.vm_name
    if wait is None:  # a start: its wait is said (it may last NAME_WAIT)
        return learn_vm_name(config.imds.endpoint, announce=True)
    return learn_vm_name(config.imds.endpoint, wait=wait)


def record_tags(config: Config, store: Store, name: str) -> None:
    """Read this VM's Azure tags from IMDS (once, briefly) and record them under its name,
    for rules' `tags` on every agent (imds/tags.py). IMDS not answering does not stop a
    start: the VM keeps the tags recorded before, or has none (it matches no tags rule)."""
    from sebridge.imds.tags import read_tags  # only where a rule matches on tags

    client = build_imds(config, timeout=BRIEF_WAIT)
    try:
        tags = read_tags(client)
    except ImdsError as exc:
        log.warning(
            "cannot read this VM's Azure tags from IMDS (%s): rules' tags match it by the "
            "tags recorded before, if any",
            exc,
        )
        return
    finally:
        client.close()
    store.vm_tags.record(name, tags, utcnow())


def open_store(
    config: Config, *, agent: str = "", exclusive: bool = False, migrate: bool = True
) -> Store:
    """The store from [store], migrated to the current schema.

    Args:
        agent: this VM's name (vm_name()): who claims and sights. Empty for a process
            that only reads and records (the CLI beside daemons): it claims nothing.
        exclusive: for the daemon (and a CLI carrying an approval out itself).
        migrate: False for a command that only reads: an older schema is refused.
    """
    if exclusive and not agent:
        raise ValueError("a store held as an agent needs the agent's name")
    store = Store(config.store.url, agent=agent, exclusive=exclusive, migrate=migrate)
    # Whoever records a transition (the daemon, a CLI command) writes outbox rows only for
    # the kinds each sink delivers (`transitions`).
    store.outbox.deliver_only(registry.wanted(config))
    return store


def missing_store(config: Config) -> str | None:
    """The SQLite file of [store] when it does not exist yet (`sebridge run` creates it);
    commands that only look at the store say so instead of creating it."""
    path = config.store.sqlite_path
    if path and path != ":memory:" and not os.path.exists(path):
        return path
    return None


def _sinks(config: Config, renderer: Renderer, stdout: TextIO | None) -> dict[str, Sink]:
    """Every enabled instance's sink; ConfigError listing every broken template."""
    built, broken = _build_sinks(config, renderer, stdout)
    if broken:
        for sink in built.values():
            sink.close()
        if len(broken) == 1:
            raise ConfigError(broken[0])
        raise ConfigError(f"{len(broken)} problems:" + "".join(f"\n  - {b}" for b in broken))
    return built


def _build_sinks(
    config: Config, renderer: Renderer, stdout: TextIO | None
) -> tuple[dict[str, Sink], list[str]]:
    """The sinks that built, by instance, and what each broken template said: every sink
    is tried, so all of them are said at once."""
    built: dict[str, Sink] = {}
    broken: list[str] = []
    try:
        for instance in registry.enabled(config):
            ctx = registry.context(instance, config, renderer, stdout)
            try:
                sink = instance.integration.sink(ctx)
            except PermanentDeliveryError as exc:  # a broken template
                broken.append(instance.said(str(exc)))
                continue
            if sink is not None:
                built[instance.name] = sink
    except BaseException:
        for sink in built.values():
            sink.close()
        raise
    return built, broken


def template_problems(config: Config) -> list[str]:
    """What each enabled sink's broken templates say (`sebridge check`): the sinks are
    built as `run` builds them, their templates tried against samples, then closed;
    nothing is sent."""
    built, broken = _build_sinks(config, Renderer(config.templates.dir or None), None)
    for sink in built.values():
        sink.close()
    return broken


def build_sinks(config: Config, stdout: TextIO | None = None) -> dict[str, Sink]:
    """Every enabled instance's sink, by its name ("slack", "slack.dba"). Templates are
    tried now: a broken one fails here."""
    renderer = Renderer(config.templates.dir or None)
    return _sinks(config, renderer, stdout)


def build_daemon(
    config: Config, stdout: TextIO | None = None, *, renderer: Renderer | None = None
) -> Daemon:
    """The daemon (the tick) with everything it needs; for `sebridge once` as it is."""
    renderer = renderer or Renderer(config.templates.dir or None)
    sinks = _sinks(config, renderer, stdout)
    # One delivering process per SQLite file: a second `run`, or `once` beside the
    # daemon, would deliver everything again. PostgreSQL's claims let a fleet share one.
    name = vm_name(config)  # before the store: it is the agent's identity there
    store = open_store(config, agent=name, exclusive=True)
    if uses_tags(config.policy):
        record_tags(config, store, name)
    signer = link_signer(config, store)
    approve_url = None
    if signer is not None:
        from sebridge.web.links import approval_link

        approve_url = approval_link(config.http.public_url, signer)
    # Built once: what hooks print is masked of every secret the config holds, and of the
    # approval links' key generated into the store (hooks/process.py).
    generated = ""
    if signer is not None:
        from sebridge.web.links import LINK_KEY_SETTING

        generated = store.settings.get(LINK_KEY_SETTING) or ""
    mask = Masker((*secret_values(config), generated))
    return compose_daemon(
        build_imds(config),
        store,
        sinks,
        policy=build_policy(config.policy),
        dry_run=config.policy.dry_run,
        vm_name=name,
        retry_for=timedelta(seconds=config.dispatch.retry_for_seconds_after_gone),
        max_backoff=config.dispatch.max_backoff_seconds,
        approve_url=approve_url,
        hooks=config.hooks,
        hook_mask=mask,
        routes=config.routes,
        fleet=fleet_timing(config),
    )


def fleet_timing(config: Config) -> tuple[timedelta, timedelta]:
    """[fleet] known_for and silent_after (hooks/gate.py: who is known, who is silent)."""
    return (
        timedelta(seconds=config.fleet.known_for),
        timedelta(seconds=config.fleet.silent_after),
    )


def build_runner(config: Config, stdout: TextIO | None = None) -> Runner:
    """`sebridge run`: the daemon, what receives approvals and runs beside the polling
    (routes, services, jobs), and the HTTP server that serves the routes."""
    # Built-in templates are tried after the first poll (integrations/render.py).
    renderer = Renderer(config.templates.dir or None, defer_builtin=True)
    daemon = build_daemon(config, stdout, renderer=renderer)
    runner = Runner(
        daemon,
        daemon.parts,  # the record the composition root built (cli/assembly.py)
        poll_interval=config.imds.poll_interval,
        shutdown_grace=config.dispatch.shutdown_grace_seconds,
        retention=timedelta(days=config.store.retention_days),
    )
    runner.after_start(renderer.warm)
    if config.hooks or os.getpid() == 1:
        _adopt_orphans(runner)
    # Imported here: the HTTP wiring is loaded only when a daemon serves (test_run_imports).
    from sebridge.cli.serving import attach_inbound

    try:
        attach_inbound(config, renderer, runner)
    except BaseException:
        daemon.imds.close()
        daemon.store.close()
        raise
    return runner


def _adopt_orphans(runner: Runner) -> None:
    """What hooks leave behind comes back to `run` (a child subreaper; in a container
    perhaps PID 1 itself) and is reaped on a timer as well as after each hook run
    (hooks/reaper.py). Imported here: a daemon without hooks, not PID 1, loads none of it."""
    from sebridge.hooks.reaper import REAP_EVERY, REAPER, become_subreaper
    from sebridge.model.services import Job

    def reap() -> None:
        REAPER.reap()

    become_subreaper()
    runner.add_jobs([Job("reap", REAP_EVERY, reap)])


def build_desk(
    config: Config, imds: ImdsClient
) -> tuple[Approvals, Store, ReadinessGate, Callable[[], object]]:
    """The approval use case for a process that is not the daemon (`sebridge approve`).

    When no daemon holds the store (SQLite: its lock; PostgreSQL: this agent's
    name), this process carries the approval out itself, holding it meanwhile;
    otherwise the daemon does, and the request waits for what it recorded. Carrying
    it out needs this VM's name; when IMDS does not say it within one call, the
    approval is only recorded, for a daemon whose IMDS lists the event. Also returns
    the readiness gate, so the command can say which VMs hold and the ways out, and
    what stops this process's carrier (its thread runs while the command holds the
    store), to be called before the store is closed.
    """
    try:
        name = vm_name(config, wait=config.imds.timeout)
    except ConfigError:
        name = ""  # no identity: record only (never a host name standing in for one)
    held: Store | None = None
    if name:
        with contextlib.suppress(StoreInUseError):  # the daemon holds it and carries it out
            held = open_store(config, agent=name, exclusive=True)
    holds = held is not None
    store = held or open_store(config)
    audience = registry.audience(config)

    from sebridge.hooks.agent import timeouts
    from sebridge.hooks.gate import ReadinessGate

    # No hooks run here: an approval whose rule names prepare hooks waits for the daemon's.
    # The gate counts this VM (the daemon's own name, `name`) as live even while its daemon
    # is stopped, so its prepare hooks are waited for, never skipped as "no agent".
    known_for, silent_after = fleet_timing(config)
    gate = ReadinessGate(
        store,
        lambda: name,
        lambda record: record.decision,
        timeout_of=timeouts(config.hooks),
        known_for=known_for,
        silent_after=silent_after,
    )
    approvals, carrier = assemble(
        store,
        imds,
        audience,
        carries=holds,
        dry_run=config.policy.dry_run,
        gate=gate,
        readiness_of=lambda record: gate.readiness(record).vms,
    )
    if carrier is None:
        return approvals, store, gate, lambda: None
    carrier.start()  # the same carrier as the daemon's, on its thread
    return approvals, store, gate, lambda: carrier.stop(config.imds.timeout)

"""Builds the daemon's parts from a Config: IMDS client, store, integrations, HTTP server."""

from __future__ import annotations

import logging
import socket
import sys
from datetime import timedelta
from typing import Any, TextIO

from sebridge.approve import Approver
from sebridge.config import Config
from sebridge.daemon import Daemon
from sebridge.errors import ConfigError, PermanentDeliveryError
from sebridge.health import Health
from sebridge.imds import ImdsClient
from sebridge.integrations.base import Context, Integration, WsgiApp
from sebridge.integrations.registry import REGISTRY
from sebridge.links import LINK_KEY_SETTING, LinkSigner, approval_link, new_link_key
from sebridge.policy import IGNORE, PolicySettings
from sebridge.render import Renderer
from sebridge.sink import Sink
from sebridge.store import Store
from sebridge.web.approval_page import PREFIX, ApprovalPage
from sebridge.web.server import HttpServer

__all__ = [
    "build_approver",
    "build_daemon",
    "build_imds",
    "build_sinks",
    "configure_logging",
    "enabled_integrations",
    "link_signer",
    "open_store",
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
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)-7s %(name)s: %(message)s"))
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


def build_imds(config: Config) -> ImdsClient:
    """The IMDS client from [imds]."""
    return ImdsClient(config.imds.endpoint, config.imds.api_version, timeout=config.imds.timeout)


def open_store(config: Config, *, exclusive: bool = False) -> Store:
    """The store from [store], migrated to the current schema; `exclusive` for the daemon."""
    agent = config.imds.vm_name or socket.gethostname()
    return Store(config.store.url, agent=agent, exclusive=exclusive)


def enabled_integrations(config: Config) -> list[Integration[Any]]:
    """The integrations the configuration turns on, in registry order."""
    return [i for i in REGISTRY if i.enabled(config)]


def _context(config: Config, stdout: TextIO | None) -> Context:
    return Context(config, Renderer(config.templates.dir or None), stdout)


def _sinks(ctx: Context) -> list[tuple[Integration[Any], Sink]]:
    built = []
    for integration in enabled_integrations(ctx.config):
        try:
            sink = integration.sink(ctx)
        except PermanentDeliveryError as exc:  # a broken template
            raise ConfigError(str(exc)) from None
        if sink is not None:
            built.append((integration, sink))
    return built


def build_sinks(config: Config, stdout: TextIO | None = None) -> list[Sink]:
    """Every enabled integration's sink. Templates are tried now: a broken one fails here."""
    return [sink for _, sink in _sinks(_context(config, stdout))]


def build_approver(config: Config, store: Store, imds: ImdsClient) -> Approver:
    """An Approver for processes that are not the daemon (`sebridge approve`)."""
    names = [i.name for i in enabled_integrations(config) if i.outbound]
    return Approver(
        store, imds, lambda policy: [] if policy == IGNORE else names, dry_run=config.policy.dry_run
    )


def build_daemon(config: Config, stdout: TextIO | None = None, *, serve: bool = False) -> Daemon:
    """The daemon with everything it needs.

    Args:
        serve: also what receives approvals and runs beside the polling
            (routes, services, jobs): for `sebridge run`, not `once`.
    """
    ctx = _context(config, stdout)
    built = _sinks(ctx)
    # One delivering process per SQLite file: a second `run`, or `once` beside the
    # daemon, would deliver everything again. PostgreSQL's claims let a fleet share one.
    store = open_store(config, exclusive=True)
    signer = link_signer(config, store)
    daemon = Daemon(
        build_imds(config),
        store,
        [sink for _, sink in built],
        policy=PolicySettings(
            approve_user_events=config.policy.approve_user_events,
            approve_freeze_under_seconds=config.policy.approve_freeze_under_seconds,
            only_this_vm=config.policy.only_this_vm,
        ),
        dry_run=config.policy.dry_run,
        vm_name=config.imds.vm_name,
        retry_for=timedelta(seconds=config.dispatch.retry_for_seconds_after_gone),
        max_backoff=config.dispatch.max_backoff_seconds,
        approve_url=approval_link(config.http.public_url, signer) if signer else None,
    )
    if serve:
        _attach_inbound(ctx, daemon, dict((i.name, s) for i, s in built), signer)
    return daemon


def link_signer(config: Config, store: Store) -> LinkSigner | None:
    """The approval links' signer when `[http] public_url` is set: under `link_secret`, else
    under a key generated once and kept in the store (a fleet sharing the store shares it)."""
    if not config.http.public_url:
        return None
    key = config.http.link_secret.reveal() or store.setting(LINK_KEY_SETTING)
    return LinkSigner(key or store.remember_first(LINK_KEY_SETTING, new_link_key()))


def _attach_inbound(
    ctx: Context, daemon: Daemon, sinks: dict[str, Sink], signer: LinkSigner | None
) -> None:
    routes: dict[str, WsgiApp] = {}
    if signer is not None:  # approval links are the core's, whichever sink carries them
        page = ApprovalPage(signer, daemon, ctx.renderer, dry_run=ctx.config.policy.dry_run)
        page.check_templates()
        routes[PREFIX] = page
    for integration in enabled_integrations(ctx.config):
        inbound = integration.inbound(ctx, daemon, sinks.get(integration.name))
        for path, app in inbound.routes.items():
            if path in routes or path == "/healthz":
                raise ConfigError(f"{integration.name}: HTTP path {path} is already served")
            routes[path] = app
        daemon.services.extend(inbound.services)
        daemon.jobs.extend(inbound.jobs)
    if routes or "http.listen" in ctx.config.given:
        http = ctx.config.http
        health = Health(daemon, ctx.config.imds.poll_interval)
        # Last to start, first to stop: no request reaches a part that has stopped.
        server = HttpServer(http.listen_host, http.listen_port, routes, health.report)
        daemon.services.append(server)

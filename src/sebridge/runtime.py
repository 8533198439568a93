"""Builds the daemon's parts from a Config: IMDS client, store, sinks, daemon."""

from __future__ import annotations

import logging
import socket
import sys
from datetime import timedelta
from typing import TextIO

from sebridge.approve import Approver
from sebridge.config import Config
from sebridge.daemon import Daemon
from sebridge.errors import ConfigError, PermanentDeliveryError
from sebridge.imds import ImdsClient
from sebridge.integrations.console.sink import ConsoleSink
from sebridge.integrations.jsonl.sink import JsonlSink
from sebridge.policy import IGNORE, PolicySettings
from sebridge.render import Renderer
from sebridge.sink import Sink
from sebridge.store import Store

__all__ = [
    "build_approver",
    "build_daemon",
    "build_imds",
    "build_sinks",
    "configure_logging",
    "open_store",
]


def configure_logging(config: Config, verbose: bool = False) -> None:
    """Logs go to stderr (stdout belongs to the console and JSON lines sinks)."""
    level = logging.DEBUG if verbose else getattr(logging, config.log.level.upper())
    fmt = (
        '{"ts":"%(asctime)s","level":"%(levelname)s","logger":"%(name)s","msg":"%(message)s"}'
        if config.log.format == "json"
        else "%(asctime)s %(levelname)-7s %(name)s: %(message)s"
    )
    logging.basicConfig(level=level, format=fmt, stream=sys.stderr, force=True)
    # APScheduler logs every run at INFO: once a second is noise.
    logging.getLogger("apscheduler").setLevel(max(level, logging.WARNING))


def build_imds(config: Config) -> ImdsClient:
    """The IMDS client from [imds]."""
    return ImdsClient(config.imds.endpoint, config.imds.api_version, timeout=config.imds.timeout)


def open_store(config: Config) -> Store:
    """The store from [store], migrated to the current schema."""
    return Store(config.store.url, agent=config.imds.vm_name or socket.gethostname())


def build_sinks(config: Config, stdout: TextIO | None = None) -> list[Sink]:
    """Every enabled sink, console first. Templates are tried now: a broken one fails here."""
    renderer = Renderer(config.templates.dir or None)
    sinks: list[Sink] = []
    if config.console.enabled:
        console = ConsoleSink(renderer, stream=stdout)
        try:
            console.check_templates()
        except PermanentDeliveryError as exc:
            raise ConfigError(str(exc)) from None
        sinks.append(console)
    if config.jsonl.enabled:
        sinks.append(JsonlSink(config.jsonl.path, stream=stdout))
    if config.slack.enabled:
        sinks.append(build_slack_sink(config, renderer))
    return sinks


def build_slack_sink(config: Config, renderer: Renderer) -> Sink:
    """The Slack sink, its templates checked."""
    # Imported only when Slack is on: slack_sdk costs memory and start-up time.
    from sebridge.integrations.slack.sink import SlackSink, build_slack_client

    slack = config.slack
    sink = SlackSink(
        build_slack_client(slack.bot_token.reveal(), slack.api_url),
        slack.channel,
        renderer,
        mention=slack.mention,
        mention_types=slack.mention_types,
    )
    try:
        sink.check_templates()
    except PermanentDeliveryError as exc:
        raise ConfigError(str(exc)) from None
    return sink


def sink_names(config: Config) -> list[str]:
    """The names of the sinks build_sinks makes, in the same order."""
    return [name for name in ("console", "jsonl", "slack") if name in config.sinks_enabled()]


def build_approver(config: Config, store: Store, imds: ImdsClient) -> Approver:
    """An Approver for processes that are not the daemon (`sebridge approve`)."""
    names = sink_names(config)
    return Approver(
        store, imds, lambda policy: [] if policy == IGNORE else names, dry_run=config.policy.dry_run
    )


def build_daemon(config: Config, stdout: TextIO | None = None, *, serve: bool = False) -> Daemon:
    """The daemon with everything it needs.

    Args:
        serve: also receive approvals (Slack clicks): for `sebridge run`, not `once`.
    """
    daemon = Daemon(
        build_imds(config),
        open_store(config),
        build_sinks(config, stdout),
        policy=PolicySettings(
            approve_user_events=config.policy.approve_user_events,
            approve_freeze_under_seconds=config.policy.approve_freeze_under_seconds,
            only_this_vm=config.policy.only_this_vm,
        ),
        dry_run=config.policy.dry_run,
        vm_name=config.imds.vm_name,
        retry_for=timedelta(seconds=config.dispatch.retry_for_seconds_after_gone),
        max_backoff=config.dispatch.max_backoff_seconds,
    )
    if serve and config.slack.enabled:
        from sebridge.integrations.slack.sink import SlackSink
        from sebridge.integrations.slack.wiring import slack_service

        (slack,) = (s for s in daemon.sinks if isinstance(s, SlackSink))
        daemon.services.append(slack_service(config, daemon, slack))
    return daemon

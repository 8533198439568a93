"""What `sebridge run` serves beside the polling: the integrations' inbound side, HTTP.

The approval links' page, the fleet page, each integration's routes, services and
jobs, the HTTP server with /healthz, /readyz and /metrics, the probe listener:
built from the Config and the parts' record the composition root built
(cli/assembly.py), and handed to the Runner. Imported by cli/runtime.py's
build_runner only. See docs/ARCHITECTURE.md, "Composition root".
"""

from __future__ import annotations

from sebridge.cli.imds_client import PROBE_TIMEOUT, build_imds
from sebridge.cli.link_keys import link_key, link_signer
from sebridge.config.loader import Config
from sebridge.engine.runner import Runner
from sebridge.integrations import registry
from sebridge.integrations.render import Renderer
from sebridge.kernel.errors import ConfigError
from sebridge.kernel.wsgi import WsgiApp

__all__ = ["attach_inbound"]


def attach_inbound(config: Config, renderer: Renderer, runner: Runner) -> None:
    """What each integration and page adds to `runner`: routes, services, jobs, and the
    HTTP server that serves the routes."""
    daemon, parts = runner.daemon, runner.parts
    sinks = parts.dispatcher.sinks
    routes: dict[str, WsgiApp] = {}
    owners: dict[str, str] = {}  # a route's path -> the instance that serves it
    signer = link_signer(config, daemon.store)
    if signer is not None:  # approval links are the core's, whichever sink carries them
        from sebridge.web.approval_page import PREFIX, ApprovalPage

        page = ApprovalPage(
            signer,
            daemon,
            renderer,
            dry_run=config.policy.dry_run,
            readiness_of=parts.hooks.shown,
            mask=parts.hook_mask,
        )
        page.check_templates()
        routes[PREFIX] = page
    if config.web.page:  # the fleet page and its calendar feed (docs/fleet-page.md)
        from sebridge.web.fleet_wiring import fleet_routes

        routes.update(fleet_routes(config, renderer, daemon, link_key(config, daemon.store)))
    jobs = []
    for instance in registry.enabled(config):
        ctx = registry.context(instance, config, renderer)
        inbound = instance.integration.inbound(ctx, daemon, sinks.get(instance.name))
        for path, app in inbound.routes.items():
            if path in routes:
                raise ConfigError(f"{instance.name}: HTTP path {path} is already served")
            routes[path] = app
            owners[path] = instance.name
        for service in inbound.services:
            runner.add_service(service)
        jobs.extend(inbound.jobs)
    runner.add_jobs(jobs)
    if routes or "http.listen" in config.given or config.http.probe_listen:
        _serve(config, runner, routes, owners)


def _serve(
    config: Config, runner: Runner, routes: dict[str, WsgiApp], owners: dict[str, str]
) -> None:
    """The HTTP server for `routes`, with /healthz, /readyz and /metrics beside them (when
    routes need it or `[http] listen` is set), and the probe listener on `[http]
    probe_listen` (when set): /livez, /readyz and /healthz on a server of its own."""
    from sebridge.web.health import Health, liveness, store_probe
    from sebridge.web.readyz import ReadyCheck, imds_probe
    from sebridge.web.server import CORE_PATHS, HttpServer

    for path, owner in owners.items():
        if path in CORE_PATHS:
            raise ConfigError(f"{owner}: HTTP path {path} is already served")
    http = config.http
    # One store probe for both: a write at most every 2 s however often they are asked.
    store = store_probe(runner)
    health = Health(runner, config.imds.poll_interval, store=store)
    imds = imds_probe(lambda: build_imds(config, timeout=PROBE_TIMEOUT))
    ready = ReadyCheck(runner, imds, store).report
    if http.probe_listen:  # its own port, loop and threads: a crowd on `listen` never delays it
        runner.add_service(
            HttpServer(
                http.probe_host,
                http.probe_port,
                {},
                health.report,
                ready=ready,
                live=lambda: liveness(runner),
                key="http.probe_listen",
                threads=2,
            )
        )
    if not (routes or "http.listen" in config.given):
        return
    routes["/metrics"] = _metrics_route(runner)
    # Last to start, first to stop: no request reaches a part that has stopped.
    runner.add_service(
        HttpServer(http.listen_host, http.listen_port, routes, health.report, ready=ready)
    )


def _metrics_route(runner: Runner) -> WsgiApp:
    """GET /metrics: the daemon's registry, with the store's figures read at scrape time
    (by a reader the runner stops with the services), collected at most once a second
    and shared by the scrapes of that second (web/metrics_page.py). prometheus_client is
    imported here: a daemon that serves no HTTP never loads it (docs/ARCHITECTURE.md,
    "Metrics and probes")."""
    from sebridge.web.metrics_export import registry_of
    from sebridge.web.metrics_page import MetricsPage
    from sebridge.web.store_gauges import StoreGauges

    metrics = runner.parts.metrics
    store = runner.store
    gauges = StoreGauges(lambda: store.tallies(metrics.sinks), metrics.sinks)
    registry = registry_of(metrics)
    registry.register(gauges)
    runner.add_service(gauges)
    return MetricsPage(registry)

"""The core's config sections: one frozen dataclass per section, and their checks.

A dataclass field *is* a config key (config/reader.py reads it): its default
is the key's default, `option()` holds its limits. `check_core()` runs once
the types are right: formats of single values (config/checks.py) and keys
together, reported to the Reader, with some values normalised. The
integrations bring their own sections (integrations/registry.py).
"""

from __future__ import annotations

import os
from dataclasses import dataclass, replace
from typing import Any
from urllib.parse import urlsplit

from sebridge.config import checks
from sebridge.config.durations import Seconds, WholeSeconds
from sebridge.config.policy import RuleSettings
from sebridge.config.reader import Reader, option
from sebridge.config.secrets import Secret
from sebridge.config.web import WebConfig, check_web
from sebridge.imds.client import API_VERSIONS, DEFAULT_API_VERSION

__all__ = [
    "CORE_SECTIONS",
    "DispatchConfig",
    "FleetConfig",
    "HttpConfig",
    "ImdsConfig",
    "LogConfig",
    "PolicyConfig",
    "StoreConfig",
    "TemplatesConfig",
    "check_core",
]

_UNSET = Secret()  # immutable: one default serves every secret


@dataclass(frozen=True)
class ImdsConfig:
    """[imds]: the Instance Metadata Service and how often to ask it."""

    # The scheme://host[:port] of IMDS (or the simulator); the path is sebridge's.
    endpoint: str = "http://169.254.169.254"
    # The IMDS API version; older ones lack Description, EventSource and DurationInSeconds.
    api_version: str = option(DEFAULT_API_VERSION, choices=API_VERSIONS)
    # Seconds between two polls of IMDS.
    poll_interval: Seconds = option(1.0, ge=0.2, le=3600.0, why="IMDS allows 5 requests/s")
    # Seconds to wait for each IMDS request.
    timeout: Seconds = option(
        5.0, gt=0.0, le=120.0, why="IMDS answers in milliseconds; its first call waits 120 s anyway"
    )
    # This VM's name as an event's Resources list it; empty: asked of IMDS at start (its
    # compute name).
    vm_name: str = ""


@dataclass(frozen=True, repr=False)
class StoreConfig:
    """[store]: where state lives: a SQLite file, in memory, or PostgreSQL (a fleet of daemons)."""

    # Where state lives: sqlite:////absolute/path.db, sqlite:///relative.db, sqlite:// (in
    # memory), or postgresql://user@host/db (a fleet's shared database). Keep SQLite on the
    # OS disk: /mnt and D: are the temporary disk, wiped by Redeploy and Preempt.
    url: str = "sqlite:////var/lib/sebridge/state.db"
    # Finished events are kept this many days.
    retention_days: int = option(90, ge=1, le=3650, why="ten years")

    @property
    def backend(self) -> str:
        """ "sqlite" or "postgresql"."""
        return checks.store_url(self.url)[0]

    @property
    def sqlite_path(self) -> str:
        """The SQLite file (":memory:" for in memory); "" for PostgreSQL."""
        return checks.store_url(self.url)[1]

    def __repr__(self) -> str:
        url = checks.redact_url(self.url)
        return f"StoreConfig(url={url!r}, retention_days={self.retention_days!r})"


@dataclass(frozen=True)
class PolicyConfig:
    """[policy]: what is approved without a human, what a person is asked, what is ignored.

    `rules` ([[policy.rules]]) decide per event (config/policy.py); without them the
    three keys below shape the built-in rules (policy/compile.py), as before rules existed.
    """

    # true: announce and record, but never POST an approval to IMDS.
    dry_run: bool = False
    # Without rules: approve at once an event a user started (EventSource "User").
    approve_user_events: bool = True
    # Without rules: approve at once a Freeze shorter than this many seconds; 0 disables.
    approve_freeze_under_seconds: WholeSeconds = option(
        9, ge=0, le=3600, why="a Freeze lasts seconds; 3600 already approves every Freeze"
    )
    # Without rules: true ignores events whose Resources do not list this VM.
    only_this_vm: bool = False
    # Prepare hooks start by NotBefore minus this many seconds.
    prepare_lead_seconds: WholeSeconds = option(300, ge=0, le=86400, why="a day")
    # The ordered rules, written as [[policy.rules]] tables: the first whose matchers all
    # hold decides; an event no rule matches is asked about.
    rules: tuple[RuleSettings, ...] = ()


@dataclass(frozen=True)
class DispatchConfig:
    """[dispatch]: delivery retries and shutdown."""

    # Keep retrying a notification this long after its event left IMDS.
    retry_for_seconds_after_gone: WholeSeconds = option(3600, ge=0, le=604800, why="a week")
    # The longest wait between two delivery attempts.
    max_backoff_seconds: Seconds = option(300.0, gt=0.0, le=3600.0, why="an hour")
    # On stop, the time given to deliveries in flight.
    shutdown_grace_seconds: Seconds = option(
        5.0,
        ge=0.0,
        le=25.0,
        why="a stop takes this plus a second; systemd's TimeoutStopSec is 30 s",
    )


# An agent beats every 30 s (store/store.py: HEARTBEAT; tests/test_fleet_silence.py holds
# the two equal): a live agent is never heard from less often.
HEARTBEAT_SECONDS = 30.0


@dataclass(frozen=True)
class FleetConfig:
    """[fleet]: which agents the fleet knows, and when a known one counts as silent.

    A listed VM whose agent ran in this store within `known_for` but has not been heard
    from within `silent_after` (or stopped) is not ready: its approval is held
    (hooks/readiness.py). Less than one heartbeat would take live agents for silent.
    """

    # An agent heard from within this is known.
    known_for: Seconds = option(
        604800.0, ge=HEARTBEAT_SECONDS, le=31536000.0, why="between one heartbeat and a year"
    )
    # A known agent not heard from for this long is silent.
    silent_after: Seconds = option(
        2 * HEARTBEAT_SECONDS,
        ge=HEARTBEAT_SECONDS,
        le=86400.0,
        why="at least one heartbeat (30 s): a live agent is heard from every 30 s",
    )


@dataclass(frozen=True)
class HttpConfig:
    """[http]: the daemon's HTTP server (integrations' routes, approval links, /healthz),
    and its probe listener when `probe_listen` is set.

    It starts when an integration needs a route, when `public_url` is set
    (approval links), or when `listen` is in the file. `public_url` is where
    people reach it (a TLS proxy in front), normalised without a trailing "/";
    `link_secret` signs approval links (empty: one is generated and kept in the store).
    """

    # The host:port the server listens on; IPv6 as [::1]:8787.
    listen: str = "127.0.0.1:8787"
    # A host:port of its own for the probes (/livez, /readyz, /healthz), e.g. 0.0.0.0:8788:
    # a second server with its own threads, so a crowd on `listen` never delays a probe.
    # Empty: no probe listener (the probes are answered on `listen` only).
    probe_listen: str = ""
    # The https:// address people reach this server at (a TLS reverse proxy in front),
    # without a trailing / or a query: approval links point there. Empty: no links.
    public_url: str = ""
    # The HMAC key that signs approval links; unset: one is generated on first start and
    # kept in the store. Anyone holding one link can test keys offline: a short one is found
    # in seconds.
    link_secret: Secret = option(
        _UNSET,
        min_bytes=32,
        why="make one with `openssl rand -base64 32`, or leave it unset and sebridge"
        " generates one and keeps it in the store",
    )

    @property
    def listen_host(self) -> str:
        return checks.listen(self.listen)[0]

    @property
    def listen_port(self) -> int:
        return checks.listen(self.listen)[1]

    @property
    def probe_host(self) -> str:
        return checks.listen(self.probe_listen)[0]

    @property
    def probe_port(self) -> int:
        return checks.listen(self.probe_listen)[1]


@dataclass(frozen=True)
class TemplatesConfig:
    """[templates]: a folder whose files override the built-in templates."""

    # A folder whose files override the built-in templates of the same name
    # (console/line.j2, slack/message.j2, jira/description.j2, ...); it must exist.
    dir: str = ""


@dataclass(frozen=True)
class LogConfig:
    """[log]: the daemon's own logging."""

    # The least severe level logged.
    level: str = option("info", choices=("debug", "info", "warning", "error"))
    # text, or json: one JSON object per line on stderr (ts, level, logger, msg; a traceback
    # as "exception").
    format: str = option("text", choices=("text", "json"))


CORE_SECTIONS: dict[str, type[Any]] = {
    "imds": ImdsConfig,
    "store": StoreConfig,
    "policy": PolicyConfig,
    "dispatch": DispatchConfig,
    "http": HttpConfig,
    "fleet": FleetConfig,
    "web": WebConfig,
    "templates": TemplatesConfig,
    "log": LogConfig,
}


def _check_listen(http: HttpConfig, rd: Reader) -> None:
    """[http] listen, and probe_listen: a valid address on a port of its own."""
    try:
        listen = checks.listen(http.listen)
    except ValueError as exc:
        rd.error("http.listen", str(exc))
        listen = None
    if not http.probe_listen:
        return
    try:
        probes = checks.listen(http.probe_listen)
    except ValueError as exc:
        rd.error("http.probe_listen", str(exc))
        return
    if listen is not None and probes[1] != 0 and probes[1] == listen[1]:
        rd.error(
            "http.probe_listen",
            f"port {probes[1]} is http.listen's: the probes need a port of their own",
        )


def check_core(sections: dict[str, Any], rd: Reader) -> dict[str, Any]:
    """Checks of the core's values by format, and of keys together; returns the sections
    with some values normalised (an endpoint without its trailing "/")."""
    imds: ImdsConfig = sections["imds"]
    store: StoreConfig = sections["store"]
    http: HttpConfig = sections["http"]
    templates: TemplatesConfig = sections["templates"]
    try:
        imds = replace(imds, endpoint=checks.endpoint(imds.endpoint))
    except ValueError as exc:
        rd.error("imds.endpoint", str(exc))
    sqlite_path = ""
    unset = rd.env.empty_variables("store.url")
    if unset:
        # Not "": postgresql://u:${PW}@h/db must not connect as u:@h (docs/configuration.md,
        # "The store").
        rd.error("store.url", f"{unset}: set it in the service's environment, or remove it")
    else:
        try:
            sqlite_path = checks.store_url(store.url)[1]
        except ValueError as exc:
            rd.error("store.url", str(exc))
    if checks.on_temp_disk(sqlite_path):
        rd.warnings.append(
            "store.url: the SQLite file is on the temporary disk (/mnt, D:), which Redeploy"
            " and Preempt wipe; put it on the OS disk, e.g. sqlite:////var/lib/sebridge/state.db"
        )
    _check_listen(http, rd)
    if http.public_url:
        try:
            http = replace(http, public_url=checks.public_url(http.public_url))
        except ValueError as exc:
            rd.error("http.public_url", str(exc))
        else:
            if urlsplit(http.public_url).scheme == "http" and not checks.local_url(http.public_url):
                rd.warnings.append(
                    "http.public_url is plain http://: anyone on the path can read and use an"
                    " approval link; put a TLS reverse proxy in front and use https://"
                )
    if templates.dir and not os.path.isdir(templates.dir):
        rd.error("templates.dir", f'"{templates.dir}" is not a directory')
    web = check_web(sections["web"], rd)
    return {**sections, "imds": imds, "http": http, "web": web}

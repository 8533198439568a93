"""The configuration: one TOML file, read and validated once at start.

Discovery: `load(path)` (the CLI's `--config`) > `$SEBRIDGE_CONFIG` >
`/etc/sebridge/sebridge.toml` if it exists > built-in defaults. Every string
value may use `${VAR}` (unset: ""; in a secret, an error) and `$$` (a
literal `$`). Every secret `x` also accepts `x_file = "/path"`. One frozen
dataclass per section holds its keys with their defaults; a dataclass field
*is* a config key, so the known-key lists, type checks and `redacted()` all
come from the fields. The core's sections are here; each integration brings
its own (integrations/registry.py), reached with `Config.section(name)`.
All problems are reported at once, each naming its key; secrets never
appear in a message or a repr. Nothing reads the environment after this.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any

from sebridge import config_checks as checks
from sebridge.config_reader import Reader, did_you_mean, option
from sebridge.config_secrets import Secret
from sebridge.errors import ConfigError
from sebridge.imds.client import API_VERSIONS, DEFAULT_API_VERSION
from sebridge.integrations.registry import REGISTRY

__all__ = [
    "API_VERSIONS",
    "DEFAULT_PATH",
    "ENV_VAR",
    "Config",
    "DispatchConfig",
    "HttpConfig",
    "ImdsConfig",
    "LogConfig",
    "PolicyConfig",
    "Secret",
    "StoreConfig",
    "TemplatesConfig",
    "from_mapping",
    "load",
]

DEFAULT_PATH = "/etc/sebridge/sebridge.toml"
ENV_VAR = "SEBRIDGE_CONFIG"
_UNSET = Secret()  # immutable: one default serves every secret


@dataclass(frozen=True)
class ImdsConfig:
    """[imds]: the Instance Metadata Service and how often to ask it."""

    endpoint: str = "http://169.254.169.254"
    api_version: str = option(DEFAULT_API_VERSION, choices=API_VERSIONS)
    poll_interval: float = option(1.0, ge=0.2, le=3600.0, why="IMDS allows 5 requests/s")
    timeout: float = option(
        5.0, gt=0.0, le=120.0, why="IMDS answers in milliseconds; its first call waits 120 s anyway"
    )
    vm_name: str = ""  # empty: ask IMDS for the compute name


@dataclass(frozen=True, repr=False)
class StoreConfig:
    """[store]: where state lives: a SQLite file, in memory, or PostgreSQL (a fleet of daemons)."""

    url: str = "sqlite:////var/lib/sebridge/state.db"
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
    """[policy]: what is approved without a human."""

    dry_run: bool = False
    approve_user_events: bool = True
    # 0 disables
    approve_freeze_under_seconds: int = option(
        9, ge=0, le=3600, why="a Freeze lasts seconds; 3600 already approves every Freeze"
    )
    only_this_vm: bool = False


@dataclass(frozen=True)
class DispatchConfig:
    """[dispatch]: delivery retries and shutdown."""

    retry_for_seconds_after_gone: int = option(3600, ge=0, le=604800, why="a week")
    max_backoff_seconds: float = option(300.0, gt=0.0, le=3600.0, why="an hour")
    shutdown_grace_seconds: float = option(
        5.0,
        ge=0.0,
        le=25.0,
        why="a stop takes this plus a second; systemd's TimeoutStopSec is 30 s",
    )


@dataclass(frozen=True)
class HttpConfig:
    """[http]: the daemon's one HTTP server (integrations' routes, approval links, /healthz).

    It starts when an integration needs a route, when `public_url` is set
    (approval links), or when `listen` is in the file. `public_url` is where
    people reach it (a TLS proxy in front), normalised without a trailing "/";
    `link_secret` signs approval links (empty: one is generated and kept in the store).
    """

    listen: str = "127.0.0.1:8787"
    public_url: str = ""
    link_secret: Secret = _UNSET

    @property
    def listen_host(self) -> str:
        return checks.listen(self.listen)[0]

    @property
    def listen_port(self) -> int:
        return checks.listen(self.listen)[1]


@dataclass(frozen=True)
class TemplatesConfig:
    """[templates]: a folder whose files override the built-in templates."""

    dir: str = ""


@dataclass(frozen=True)
class LogConfig:
    """[log]: the daemon's own logging."""

    level: str = option("info", choices=("debug", "info", "warning", "error"))
    format: str = option("text", choices=("text", "json"))


_CORE: dict[str, type[Any]] = {
    "imds": ImdsConfig,
    "store": StoreConfig,
    "policy": PolicyConfig,
    "dispatch": DispatchConfig,
    "http": HttpConfig,
    "templates": TemplatesConfig,
    "log": LogConfig,
}
_INTEGRATIONS: dict[str, type[Any]] = {i.name: i.settings for i in REGISTRY if i.settings}
_SECTIONS = {**_CORE, **_INTEGRATIONS}


@dataclass(frozen=True)
class Config:
    """The whole configuration. `source` is the file it came from, or "defaults".

    Args:
        sections: each integration's section, by name (see `section()`).
        given: the sections ("slack") and keys ("http.listen") the file set.
    """

    source: str = "defaults"
    imds: ImdsConfig = field(default_factory=ImdsConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    dispatch: DispatchConfig = field(default_factory=DispatchConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    templates: TemplatesConfig = field(default_factory=TemplatesConfig)
    log: LogConfig = field(default_factory=LogConfig)
    sections: Mapping[str, Any] = field(
        default_factory=lambda: {name: cls() for name, cls in _INTEGRATIONS.items()}
    )
    given: frozenset[str] = frozenset()
    warnings: tuple[str, ...] = ()  # worth telling a person, not worth refusing to start

    def section(self, name: str) -> Any:
        """An integration's section (its settings dataclass)."""
        return self.sections[name]

    def redacted(self) -> dict[str, dict[str, Any]]:
        """The effective configuration as plain data; secrets as "***" (set) or "" (not)."""
        out = {
            name: {f.name: _plain(getattr(section, f.name)) for f in fields(section)}
            for name, section in self._all_sections()
        }
        out["store"]["url"] = checks.redact_url(self.store.url)
        return out

    def _all_sections(self) -> list[tuple[str, Any]]:
        return [(name, getattr(self, name)) for name in _CORE] + list(self.sections.items())


def load(
    path: str | os.PathLike[str] | None = None, *, environ: Mapping[str, str] | None = None
) -> Config:
    """Find, read and validate the configuration. Raises ConfigError naming file and key."""
    env = os.environ if environ is None else environ
    if path is not None:
        chosen, origin = os.fspath(path), "--config"
    elif env.get(ENV_VAR):
        chosen, origin = env[ENV_VAR], f"${ENV_VAR}"
    elif os.path.exists(DEFAULT_PATH):
        chosen, origin = DEFAULT_PATH, "the default location"
    else:
        return from_mapping({}, environ=env, source="defaults")
    try:
        with open(chosen, "rb") as fh:
            data = tomllib.load(fh)
    except FileNotFoundError:
        raise ConfigError(f"config file {chosen} (from {origin}) does not exist") from None
    except OSError as exc:
        reason = exc.strerror or type(exc).__name__
        raise ConfigError(f"cannot read config file {chosen} (from {origin}): {reason}") from None
    except tomllib.TOMLDecodeError as exc:
        raise ConfigError(f"{chosen}: invalid TOML: {exc}") from None
    except UnicodeDecodeError:
        raise ConfigError(f"{chosen}: invalid TOML: the file is not UTF-8 text") from None
    return from_mapping(data, environ=env, source=chosen)


def from_mapping(
    data: Mapping[str, Any], *, environ: Mapping[str, str] | None = None, source: str = "<config>"
) -> Config:
    """Validate parsed TOML (`{section: {key: value}}`) into a Config."""
    return _validate(data, os.environ if environ is None else environ, source)


def _validate(data: Mapping[str, Any], environ: Mapping[str, str], source: str) -> Config:
    rd = Reader(environ, source)
    for name in data:
        if name not in _SECTIONS:
            rd.problems.append(_unknown_section(name, data[name]))
    sections = {
        name: rd.section(name, data.get(name, {}), cls, {}) for name, cls in _SECTIONS.items()
    }
    rd.raise_problems()  # shape and type problems first: the checks below rely on the types
    given = frozenset(
        [name for name in data if name in _SECTIONS]
        + [
            f"{name}.{key}"
            for name in data
            if isinstance(data[name], Mapping)
            for key in data[name]
        ]
    )
    config = Config(
        source=source,
        **{name: sections[name] for name in _CORE},
        sections={name: sections[name] for name in _INTEGRATIONS},
        given=given,
    )
    config = checks.check(config, rd)
    config = replace(
        config,
        sections={
            i.name: i.validate(config.section(i.name), config, rd) for i in REGISTRY if i.settings
        },
    )
    rd.raise_problems()
    return replace(config, warnings=tuple(rd.warnings))


def _unknown_section(name: str, value: Any) -> str:
    owners = [s for s, cls in _SECTIONS.items() if name in {f.name for f in fields(cls)}]
    belongs = f" (it belongs in [{owners[0]}])" if owners else ""
    hint = belongs or did_you_mean(name, _SECTIONS, quote="[")
    what = f"section [{name}]" if isinstance(value, Mapping) else f'top-level key "{name}"'
    return f"unknown {what}{hint}; known sections: {', '.join(_SECTIONS)}"


def _plain(value: Any) -> Any:
    if isinstance(value, Secret):
        return str(value)
    if isinstance(value, tuple):
        return list(value)
    return value

"""The configuration: one TOML file, read and validated once at start.

Discovery: `load(path)` (the CLI's `--config`) > `$SEBRIDGE_CONFIG` >
`/etc/sebridge/sebridge.toml` if it exists > built-in defaults. Every string
value may use `${VAR}` (unset: "") and `$$` (a literal `$`). Every secret
`x` also accepts `x_file = "/path"`. One frozen dataclass per section holds
its keys with their defaults; a dataclass field *is* a config key, so the
known-key lists, type checks and `redacted()` all come from the fields.
All problems are reported at once, each naming its key; secrets never
appear in a message or a repr. Nothing reads the environment after this.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Mapping
from dataclasses import dataclass, field, fields, replace
from typing import Any, TypeVar

from sebridge import config_checks as checks
from sebridge.config_reader import Reader, did_you_mean
from sebridge.config_secrets import Secret
from sebridge.errors import ConfigError
from sebridge.imds.client import API_VERSIONS, DEFAULT_API_VERSION
from sebridge.model import EventType

__all__ = [
    "API_VERSIONS",
    "DEFAULT_PATH",
    "ENV_VAR",
    "Config",
    "ConsoleConfig",
    "DispatchConfig",
    "HttpConfig",
    "ImdsConfig",
    "JiraConfig",
    "JsonlConfig",
    "LogConfig",
    "PolicyConfig",
    "Secret",
    "SlackConfig",
    "StoreConfig",
    "TeamsConfig",
    "TemplatesConfig",
    "from_mapping",
    "load",
]

DEFAULT_PATH = "/etc/sebridge/sebridge.toml"
ENV_VAR = "SEBRIDGE_CONFIG"
EVENT_TYPES = tuple(t.value for t in EventType)

_T = TypeVar("_T")
_UNSET = Secret()  # the default of every secret (Secret is immutable, so one is enough)


def _opt(
    default: _T,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    choices: tuple[str, ...] = (),
    why: str = "",
) -> _T:
    """A field with a default and limits: numbers in range, strings (or items) in `choices`."""
    return field(
        default=default, metadata={"ge": ge, "gt": gt, "le": le, "choices": choices, "why": why}
    )


@dataclass(frozen=True)
class ImdsConfig:
    """[imds]: the Instance Metadata Service and how often to ask it."""

    endpoint: str = "http://169.254.169.254"
    api_version: str = _opt(DEFAULT_API_VERSION, choices=API_VERSIONS)
    poll_interval: float = _opt(1.0, ge=0.2, le=3600.0, why="IMDS allows 5 requests/s")
    timeout: float = _opt(5.0, gt=0.0)
    vm_name: str = ""  # empty: ask IMDS for the compute name


@dataclass(frozen=True, repr=False)
class StoreConfig:
    """[store]: where state lives (SQLite file, in memory, or a shared PostgreSQL)."""

    url: str = "sqlite:////var/lib/sebridge/state.db"
    retention_days: int = _opt(90, ge=1)

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
    approve_freeze_under_seconds: int = _opt(9, ge=0)  # 0 disables
    only_this_vm: bool = False


@dataclass(frozen=True)
class DispatchConfig:
    """[dispatch]: delivery retries and shutdown."""

    retry_for_seconds_after_gone: int = _opt(3600, ge=0)
    max_backoff_seconds: float = _opt(300.0, gt=0.0)
    shutdown_grace_seconds: float = _opt(5.0, ge=0.0)


@dataclass(frozen=True)
class HttpConfig:
    """[http]: the endpoint for Slack HTTP mode, approval links, health and metrics."""

    listen: str = "127.0.0.1:8787"
    public_url: str = ""  # base of approval links; normalised without a trailing "/"
    link_secret: Secret = _UNSET

    @property
    def listen_host(self) -> str:
        return checks.listen(self.listen)[0]

    @property
    def listen_port(self) -> int:
        return checks.listen(self.listen)[1]


@dataclass(frozen=True)
class ConsoleConfig:
    """[console]: the log sink."""

    enabled: bool = True


@dataclass(frozen=True)
class JsonlConfig:
    """[jsonl]: one JSON object per transition. Enabled by default only if the table exists."""

    path: str = "-"  # "-" = stdout
    enabled: bool = False


@dataclass(frozen=True)
class SlackConfig:
    """[slack]: enabled when bot_token is set; Socket Mode when app_token is set."""

    bot_token: Secret = _UNSET
    app_token: Secret = _UNSET
    signing_secret: Secret = _UNSET
    channel: str = ""
    approvers: tuple[str, ...] = ()
    api_url: str = "https://slack.com/api/"  # normalised to end with "/"
    mention: str = ""
    mention_types: tuple[str, ...] = _opt(("Preempt", "Terminate"), choices=EVENT_TYPES)

    @property
    def enabled(self) -> bool:
        return bool(self.bot_token)

    @property
    def socket_mode(self) -> bool:
        return bool(self.app_token)


@dataclass(frozen=True)
class TeamsConfig:
    """[teams]: enabled when webhook_url is set."""

    webhook_url: Secret = _UNSET
    format: str = _opt("adaptive", choices=("adaptive", "messagecard"))

    @property
    def enabled(self) -> bool:
        return bool(self.webhook_url)


@dataclass(frozen=True)
class JiraConfig:
    """[jira]: enabled when url is set; email + api_token (Cloud) or pat (Data Center)."""

    url: str = ""
    email: str = ""
    api_token: Secret = _UNSET
    pat: Secret = _UNSET
    project: str = ""
    issue_type: str = "Task"
    done_transition: str = "Done"
    approve_status: str = ""  # empty: approval from Jira is off

    @property
    def enabled(self) -> bool:
        return bool(self.url)


@dataclass(frozen=True)
class TemplatesConfig:
    """[templates]: a folder whose files override the built-in templates."""

    dir: str = ""


@dataclass(frozen=True)
class LogConfig:
    """[log]: the daemon's own logging."""

    level: str = _opt("info", choices=("debug", "info", "warning", "error"))
    format: str = _opt("text", choices=("text", "json"))


_SECTIONS: dict[str, type[Any]] = {
    "imds": ImdsConfig,
    "store": StoreConfig,
    "policy": PolicyConfig,
    "dispatch": DispatchConfig,
    "http": HttpConfig,
    "console": ConsoleConfig,
    "jsonl": JsonlConfig,
    "slack": SlackConfig,
    "teams": TeamsConfig,
    "jira": JiraConfig,
    "templates": TemplatesConfig,
    "log": LogConfig,
}


@dataclass(frozen=True)
class Config:
    """The whole configuration. `source` is the file it came from, or "defaults"."""

    source: str = "defaults"
    imds: ImdsConfig = field(default_factory=ImdsConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    dispatch: DispatchConfig = field(default_factory=DispatchConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    console: ConsoleConfig = field(default_factory=ConsoleConfig)
    jsonl: JsonlConfig = field(default_factory=JsonlConfig)
    slack: SlackConfig = field(default_factory=SlackConfig)
    teams: TeamsConfig = field(default_factory=TeamsConfig)
    jira: JiraConfig = field(default_factory=JiraConfig)
    templates: TemplatesConfig = field(default_factory=TemplatesConfig)
    log: LogConfig = field(default_factory=LogConfig)
    warnings: tuple[str, ...] = ()  # worth telling a person, not worth refusing to start

    def sinks_enabled(self) -> tuple[str, ...]:
        """Enabled sinks, in the order console, jsonl, slack, teams, jira."""
        flags = (
            ("console", self.console.enabled),
            ("jsonl", self.jsonl.enabled),
            ("slack", self.slack.enabled),
            ("teams", self.teams.enabled),
            ("jira", self.jira.enabled),
        )
        return tuple(name for name, enabled in flags if enabled)

    def redacted(self) -> dict[str, dict[str, Any]]:
        """The effective configuration as plain data; secrets as "***" (set) or "" (not)."""
        out = {
            name: {f.name: _plain(getattr(getattr(self, name), f.name)) for f in fields(cls)}
            for name, cls in _SECTIONS.items()
        }
        out["store"]["url"] = checks.redact_url(self.store.url)
        return out


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
    jsonl = {"enabled": isinstance(data.get("jsonl"), Mapping)}  # a [jsonl] table turns it on
    sections = {
        name: rd.section(name, data.get(name, {}), cls, jsonl if name == "jsonl" else {})
        for name, cls in _SECTIONS.items()
    }
    rd.raise_problems()  # shape and type problems first: the checks below rely on the types
    config = checks.check(Config(source=source, **sections), rd)
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

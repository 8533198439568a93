"""The configuration: one TOML file, read and validated once at start.

Discovery: `load(path)` (the CLI's `--config`) > `$SEBRIDGE_CONFIG` >
`/etc/sebridge/sebridge.toml` if it exists > built-in defaults. Every string
value may use `${VAR}` (unset: ""; in a secret, an error) and `$$` (a
literal `$`). Every secret `x` also accepts `x_file = "/path"`. One frozen
dataclass per section holds its keys with their defaults; a dataclass field
*is* a config key, so the known-key lists, type checks and `redacted()` all
come from the fields. The core's sections are in config/core.py; the loader
is handed the others (`Sections`: the integrations', from
integrations/registry.py), reached with `Config.section(name)`.
All problems are reported at once, each naming its key; secrets never
appear in a message or a repr. Nothing reads the environment after this.
"""

from __future__ import annotations

import os
import tomllib
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass, field, fields, is_dataclass, replace
from typing import Any, Protocol

from sebridge.config import checks
from sebridge.config.core import (
    CORE_SECTIONS,
    DispatchConfig,
    FleetConfig,
    HttpConfig,
    ImdsConfig,
    LogConfig,
    PolicyConfig,
    StoreConfig,
    TemplatesConfig,
    check_core,
)
from sebridge.config.instances import INSTANCE_KEYS, split
from sebridge.config.policy import HookSettings, check_rules, read_hooks
from sebridge.config.reader import Reader, did_you_mean, key_name
from sebridge.config.secrets import Secret
from sebridge.config.web import WebConfig
from sebridge.kernel.errors import ConfigError
from sebridge.model.decision import NAMED

__all__ = [
    "DEFAULT_PATH",
    "ENV_VAR",
    "Config",
    "DispatchConfig",
    "FleetConfig",
    "HookSettings",
    "HttpConfig",
    "ImdsConfig",
    "LogConfig",
    "PolicyConfig",
    "Secret",
    "Sections",
    "StoreConfig",
    "TemplatesConfig",
    "from_mapping",
    "load",
]

DEFAULT_PATH = "/etc/sebridge/sebridge.toml"
ENV_VAR = "SEBRIDGE_CONFIG"


class Sections(Protocol):
    """The sections the loader is handed beside the core's (the integrations'), by the
    composition root (integrations/registry.py): config knows none of them itself."""

    def types(self) -> Mapping[str, type[Any]]:
        """Each section's name and the dataclass of its keys."""
        ...

    def validate(self, config: Config, rd: Reader) -> Config:
        """Checks beyond types (reported to `rd`); returns the config, normalised."""
        ...


class _NoSections:
    def types(self) -> Mapping[str, type[Any]]:
        return {}

    def validate(self, config: Config, rd: Reader) -> Config:
        return config


@dataclass(frozen=True)
class Config:
    """The whole configuration. `source` is the file it came from, or "defaults".

    Args:
        sections: each integration instance's section, by its name ("slack",
            "slack.dba": config/instances.py; see `section()`).
        given: the sections ("slack", "slack.dba") and keys ("http.listen") the file set.
        routes: each instance's `route` where it is not "default" ("all", "named";
            route_only = true is "named"): model/decision.py, sinks_for.
        transitions: each instance's `transitions` where the file gives them (else its
            integration's default: integrations/registry.py, wanted).
        hooks: each `[hooks.<name>]`, by name (config/policy.py).
    """

    source: str = "defaults"
    imds: ImdsConfig = field(default_factory=ImdsConfig)
    store: StoreConfig = field(default_factory=StoreConfig)
    policy: PolicyConfig = field(default_factory=PolicyConfig)
    dispatch: DispatchConfig = field(default_factory=DispatchConfig)
    http: HttpConfig = field(default_factory=HttpConfig)
    fleet: FleetConfig = field(default_factory=FleetConfig)
    web: WebConfig = field(default_factory=WebConfig)
    templates: TemplatesConfig = field(default_factory=TemplatesConfig)
    log: LogConfig = field(default_factory=LogConfig)
    sections: Mapping[str, Any] = field(default_factory=dict)
    given: frozenset[str] = frozenset()
    hooks: Mapping[str, HookSettings] = field(default_factory=dict)
    routes: Mapping[str, str] = field(default_factory=dict)
    transitions: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    warnings: tuple[str, ...] = ()  # worth telling a person, not worth refusing to start
    # The values of the variables read into secrets, and PGPASSWORD beside a PostgreSQL
    # store: masked in hooks' output with every Secret above (config/masked.py).
    secret_parts: tuple[Secret, ...] = field(default=(), repr=False, compare=False)

    @property
    def route_only(self) -> frozenset[str]:
        """The instances only a rule's `notify` reaches (route "named")."""
        return frozenset(i for i, route in self.routes.items() if route == NAMED)

    def section(self, name: str) -> Any:
        """An integration instance's section (its settings dataclass): "slack", "slack.dba"."""
        return self.sections[name]

    def redacted(self) -> dict[str, dict[str, Any]]:
        """The effective configuration as plain data; secrets as "***" (set) or "" (not)."""
        out = {
            name: {key_name(f): _plain(getattr(section, f.name)) for f in fields(section)}
            for name, section in self._all_sections()
        }
        for instance, route in self.routes.items():
            out[instance]["route"] = route
        for instance, kinds in self.transitions.items():
            out[instance]["transitions"] = list(kinds)
        out["store"]["url"] = checks.redact_url(self.store.url)
        # A hook's env may pass a token on ("${VAULT_TOKEN}"): its names only, as secrets.
        out["hooks"] = {
            name: {**_plain(hook), "env": {k: "***" for k in hook.env}}
            for name, hook in self.hooks.items()
        }
        return out

    def _all_sections(self) -> list[tuple[str, Any]]:
        return [(name, getattr(self, name)) for name in CORE_SECTIONS] + list(self.sections.items())


def load(
    path: str | os.PathLike[str] | None = None,
    *,
    sections: Sections | None = None,
    environ: Mapping[str, str] | None = None,
    read_secrets: bool = True,
    locate: Callable[[str], str] | None = None,
) -> Config:
    """Find, read and validate the configuration. Raises ConfigError naming file and key.

    Args:
        sections: the sections beside the core's (integrations/registry.py's SECTIONS).
        read_secrets: False for a command that sends nothing: secrets are only known
            to be set (Secret.unread), never expanded or read.
        locate: maps a `*_file` secret's path before it is read (config/unit_credentials.py).
    """
    env = os.environ if environ is None else environ
    data: dict[str, Any] | None = None
    if path is not None:
        chosen, origin = os.fspath(path), "--config"
    elif env.get(ENV_VAR):
        chosen, origin = env[ENV_VAR], f"${ENV_VAR}"
    elif os.path.exists(DEFAULT_PATH):
        chosen, origin = DEFAULT_PATH, "the default location"
    else:
        chosen, data = "defaults", {}
    if data is None:
        data = _read(chosen, origin)
    return from_mapping(
        data,
        sections=sections,
        environ=env,
        source=chosen,
        read_secrets=read_secrets,
        locate=locate,
    )


def _read(chosen: str, origin: str) -> dict[str, Any]:
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
    return data


def from_mapping(
    data: Mapping[str, Any],
    *,
    sections: Sections | None = None,
    environ: Mapping[str, str] | None = None,
    source: str = "<config>",
    read_secrets: bool = True,
    locate: Callable[[str], str] | None = None,
) -> Config:
    """Validate parsed TOML (`{section: {key: value}}`) into a Config (see `load`)."""
    env = os.environ if environ is None else environ
    rd = Reader(env, source, read_secrets=read_secrets, locate=locate)
    return _validate(data, sections or _NoSections(), rd)


def _validate(data: Mapping[str, Any], extra: Sections, rd: Reader) -> Config:
    source = rd.source
    types = extra.types()
    known = {**CORE_SECTIONS, **types}
    hooks = read_hooks(data.get("hooks", {}), rd)
    for name in data:
        if name not in known and name != "hooks":
            rd.problems.append(_unknown_section(name, data[name], known))
    read = {
        name: rd.section(name, data.get(name, {}), cls, {}) for name, cls in CORE_SECTIONS.items()
    }
    # An integration's section may hold named instances ([slack.dba]): config/instances.py.
    split_up = {name: split(name, data.get(name), cls, rd) for name, cls in types.items()}
    sections: dict[str, Any] = {}
    for name, cls in types.items():
        tables = split_up[name].tables
        # The unnamed instance is always there, at its defaults when the file has none
        # (an integration may be on without a section: the console).
        for instance, table in {name: tables.get(name, {}), **tables}.items():
            sections[instance] = rd.section(instance, table, cls, {}, also=INSTANCE_KEYS)
    # Every value read (one that failed holds its default): the checks below judge the
    # others, so every problem of the file is said at once (config/reader.py).
    rd.values_read()
    instances = [(i, t) for s in split_up.values() for i, t in s.tables.items()]
    given = frozenset(
        [name for name in data if name in CORE_SECTIONS]
        + [
            f"{name}.{key}"
            for name in data
            if name not in types and isinstance(data[name], Mapping)
            for key in data[name]
        ]
        + [instance for instance, _ in instances]
        + [f"{instance}.{key}" for instance, table in instances for key in table]
    )
    core = check_core({name: read[name] for name in CORE_SECTIONS}, rd)
    policy = core["policy"]
    rules = check_rules(policy.rules, hooks, given, rd)
    config = Config(
        source=source,
        **{**core, "policy": replace(policy, rules=rules)},
        sections=sections,
        given=given,
        hooks=hooks,
        routes={i: r for s in split_up.values() for i, r in s.routes.items()},
        transitions={i: k for s in split_up.values() for i, k in s.transitions.items()},
    )
    config = extra.validate(config, rd)
    rd.raise_problems()
    parts = list(rd.env.secret_parts)
    if rd.read_secrets and config.store.url.startswith("postgres"):
        parts.append(rd.environ.get("PGPASSWORD", ""))  # libpq's, for the store
    secret_parts = tuple(Secret(p) for p in dict.fromkeys(parts) if p)
    return replace(config, warnings=tuple(rd.warnings), secret_parts=secret_parts)


def _unknown_section(name: str, value: Any, known: Mapping[str, type[Any]]) -> str:
    owners = [s for s, cls in known.items() if name in {key_name(f) for f in fields(cls)}]
    belongs = f" (it belongs in [{owners[0]}])" if owners else ""
    # [hooks] is a section too (a table of [hooks.<name>] tables, config/policy.py).
    sections = [*known, "hooks"]
    hint = belongs or did_you_mean(name, sections, quote="[")
    what = f"section [{name}]" if isinstance(value, Mapping) else f'top-level key "{name}"'
    return f"unknown {what}{hint}; known sections: {', '.join(sections)}"


def _plain(value: Any) -> Any:
    if isinstance(value, Secret):
        return str(value)
    if isinstance(value, tuple):
        return [_plain(v) for v in value]
    if isinstance(value, Mapping):  # a table: of strings as they are, of secrets as ***
        return {k: _plain(v) for k, v in value.items()}
    if is_dataclass(value) and not isinstance(value, type):
        return {k: _plain(v) for k, v in asdict(value).items()}
    return value

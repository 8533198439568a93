"""The one list of integrations, and the only module that knows them all.

The composition root: the config loader is handed their sections from here
(`load_config`), and the runtime, `sebridge check` and the CLI build their
parts from here. Adding an integration is its folder plus one line in
REGISTRY.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import replace
from typing import Any, TextIO

from sebridge.config import loader as config_loader
from sebridge.config.loader import Config
from sebridge.config.reader import Reader
from sebridge.integrations.base import Context, Core, Integration
from sebridge.integrations.console import Console
from sebridge.integrations.email import Email
from sebridge.integrations.jira import Jira
from sebridge.integrations.jsonl import Jsonl
from sebridge.integrations.kubernetes import Kubernetes
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack import Slack
from sebridge.integrations.teams import Teams

__all__ = [
    "REGISTRY",
    "SECTIONS",
    "Sections",
    "config_from_mapping",
    "context",
    "core_of",
    "enabled",
    "load_config",
    "settings_of",
]

# Order is delivery order on the console and in `sebridge check`.
REGISTRY: tuple[Integration[Any], ...] = (
    Console(),
    Jsonl(),
    Slack(),
    Teams(),
    Jira(),
    Email(),
    Kubernetes(),
)


class Sections:
    """Integrations' config sections, as the config loader takes them (config.Sections)."""

    def __init__(self, integrations: Sequence[Integration[Any]]) -> None:
        self._sectioned = [i for i in integrations if i.settings is not None]

    def types(self) -> Mapping[str, type[Any]]:
        """Each integration's section name and its settings dataclass."""
        return {i.name: i.settings for i in self._sectioned if i.settings is not None}

    def validate(self, config: Config, rd: Reader) -> Config:
        """Each section through its integration's checks."""
        core = core_of(config)
        return replace(
            config,
            sections={
                i.name: i.validate(config.section(i.name), rd, core) for i in self._sectioned
            },
        )


SECTIONS = Sections(REGISTRY)


def load_config(
    path: str | os.PathLike[str] | None = None,
    *,
    environ: Mapping[str, str] | None = None,
    read_secrets: bool = True,
    locate: Callable[[str], str] | None = None,
) -> Config:
    """Find, read and validate the configuration, the integrations' sections included
    (`read_secrets`, `locate`: see config.load)."""
    return config_loader.load(
        path, sections=SECTIONS, environ=environ, read_secrets=read_secrets, locate=locate
    )


def config_from_mapping(
    data: Mapping[str, Any],
    *,
    environ: Mapping[str, str] | None = None,
    source: str = "<config>",
    read_secrets: bool = True,
    locate: Callable[[str], str] | None = None,
) -> Config:
    """Validate parsed TOML into a Config, the integrations' sections included."""
    return config_loader.from_mapping(
        data,
        sections=SECTIONS,
        environ=environ,
        source=source,
        read_secrets=read_secrets,
        locate=locate,
    )


def core_of(config: Config) -> Core:
    """What integrations may know of the core's configuration."""
    return Core(dry_run=config.policy.dry_run, links=bool(config.http.public_url))


def settings_of(integration: Integration[Any], config: Config) -> Any:
    """An integration's section of the configuration (its defaults when absent)."""
    return config.sections.get(integration.name) or integration.defaults()


def enabled(config: Config) -> list[Integration[Any]]:
    """The integrations the configuration turns on, in registry order."""
    return [i for i in REGISTRY if i.enabled(settings_of(i, config), i.name in config.given)]


def context(
    integration: Integration[Any],
    config: Config,
    renderer: Renderer,
    stdout: TextIO | None = None,
    *,
    send_test: bool = False,
) -> Context[Any]:
    """What building `integration`'s parts may use: its own settings and the core's facts."""
    core = core_of(config)
    return Context(settings_of(integration, config), core, renderer, stdout, send_test)

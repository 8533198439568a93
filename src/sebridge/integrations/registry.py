"""The one list of integrations, and the only module that knows them all.

The composition root: the config loader is handed their sections from here
(`load_config`), and the runtime, `sebridge check` and the CLI build their
parts from here. Adding an integration is its folder plus one line in
REGISTRY.

Each integration may be configured more than once: `[slack]` is the instance
"slack", `[slack.dba]` the instance "slack.dba" (config/instances.py). An
instance's name is its outbox key, its sink's `sink` label and what `check`
says; a rule's `notify` names instances (model/decision.py: sinks_for). See
docs/ARCHITECTURE.md, "Integrations".
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TextIO

from sebridge.config import loader as config_loader
from sebridge.config.instances import named, renamer
from sebridge.config.loader import Config
from sebridge.config.reader import Reader, did_you_mean
from sebridge.integrations.base import Context, Core, Finding, Integration
from sebridge.integrations.console import Console
from sebridge.integrations.email import Email
from sebridge.integrations.jira import Jira
from sebridge.integrations.jsonl import Jsonl
from sebridge.integrations.kubernetes import Kubernetes
from sebridge.integrations.render import Renderer
from sebridge.integrations.slack import Slack
from sebridge.integrations.teams import Teams
from sebridge.integrations.webhook import Webhook
from sebridge.model.decision import Decision, sinks_for

__all__ = [
    "REGISTRY",
    "SECTIONS",
    "Instance",
    "Sections",
    "audience",
    "config_from_mapping",
    "context",
    "core_of",
    "enabled",
    "findings",
    "load_config",
    "settings_of",
    "sink_names",
    "wanted",
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
    Webhook(),
)


class Sections:
    """Integrations' config sections, as the config loader takes them (config.Sections)."""

    def __init__(self, integrations: Sequence[Integration[Any]]) -> None:
        self._all = list(integrations)
        self._sectioned = [i for i in integrations if i.settings is not None]

    def types(self) -> Mapping[str, type[Any]]:
        """Each integration's section name and its settings dataclass."""
        return {i.name: i.settings for i in self._sectioned if i.settings is not None}

    def validate(self, config: Config, rd: Reader) -> Config:
        """Each instance's section through its integration's checks (its keys named as the
        instance's: config/instances.py); then what rules' `notify` name, against them."""
        core = core_of(config)
        by_name = {i.name: i for i in self._sectioned}
        sections: dict[str, Any] = {}
        for instance, settings in config.sections.items():
            integration = by_name[instance.partition(".")[0]]
            if instance != integration.name and integration.once:
                rd.error(
                    f"[{instance}]",
                    f"{integration.name} is configured once ({integration.once}): "
                    f"use [{integration.name}]",
                )
            elif not integration.outbound:
                for key, given in (("route", config.routes), ("transitions", config.transitions)):
                    if instance in given:
                        rd.error(f"{instance}.{key}", f"{integration.name} sends no messages")
            assert integration.settings is not None
            with named(rd, integration.name, instance, integration.settings):
                sections[instance] = integration.validate(settings, rd, core)
        config = replace(config, sections=sections)
        self._check_notify(config, rd)
        return config

    def _check_notify(self, config: Config, rd: Reader) -> None:
        """Fail closed: a rule's `notify` names enabled instances that send messages."""
        on = {i.name for i in _enabled(self._all, config) if i.outbound}
        named_by_rules: set[str] = set()
        for n, rule in enumerate(config.policy.rules, 1):
            if rule.notify is None:
                continue
            key = f"policy.rules[{n}].notify"
            if not rule.notify:
                rd.error(
                    key,
                    "an empty list sends the rule's events nowhere (for that, write "
                    'action = "ignore"); leave notify out to reach every instance',
                )
            for name in rule.notify:
                named_by_rules.add(name)
                why = self._unknown(name, config, on)
                if why:
                    rd.error(key, why)
        for instance in sorted(config.route_only & on - named_by_rules):
            rd.warnings.append(
                f'{instance}.route "named" (route_only): no rule names {instance} in notify, '
                "so it hears nothing"
            )

    def _unknown(self, name: str, config: Config, on: set[str]) -> str:
        """Why `notify` may not name `name` ("" when it may)."""
        integration = name.partition(".")[0]
        known = {i.name: i for i in self._all}
        if integration not in known:
            hint = did_you_mean(integration, known)
            return f'"{name}": no integration is named {integration}{hint}; known: ' + ", ".join(
                known
            )
        if name in on:
            return ""
        if not known[integration].outbound:
            return f'"{name}": {integration} sends no messages'
        if name not in config.given:
            return f'"{name}" is not configured: no [{name}] section'
        return f'"{name}" is configured but not enabled'


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


@dataclass(frozen=True)
class Instance:
    """One configured instance of an integration: `[slack]` is "slack", `[slack.dba]`
    is "slack.dba" (`name`: the outbox key, the sink's label, what check says)."""

    integration: Integration[Any]
    name: str
    route_only: bool = False

    @property
    def outbound(self) -> bool:
        """Whether it delivers messages (its integration has a sink)."""
        return self.integration.outbound

    def said(self, text: str) -> str:
        """`text` written for the integration's section (a finding, an error) said of this
        instance: "slack.channel" as "slack.dba.channel" (config/instances.py: renamer)."""
        integration = self.integration
        if self.name == integration.name or integration.settings is None:
            return text
        return renamer(integration.name, self.name, integration.settings)(text)


def settings_of(integration: Integration[Any] | Instance, config: Config) -> Any:
    """An instance's section of the configuration; an integration's unnamed instance's
    (its defaults when absent)."""
    if isinstance(integration, Instance):
        return config.sections.get(integration.name) or integration.integration.defaults()
    return config.sections.get(integration.name) or integration.defaults()


def _enabled(integrations: Sequence[Integration[Any]], config: Config) -> list[Instance]:
    found = []
    for integration in integrations:
        for name in config.sections:
            if name != integration.name and not name.startswith(f"{integration.name}."):
                continue
            instance = Instance(integration, name, name in config.route_only)
            if integration.enabled(settings_of(instance, config), name in config.given):
                found.append(instance)
    return found


def enabled(config: Config) -> list[Instance]:
    """The instances the configuration turns on, in registry order (an integration's
    unnamed instance first, then its named ones in file order)."""
    return _enabled(REGISTRY, config)


def sink_names(config: Config) -> list[str]:
    """The enabled instances that deliver messages: the sinks, by name."""
    return [i.name for i in enabled(config) if i.outbound]


def wanted(config: Config) -> dict[str, frozenset[str]]:
    """The kinds of transition each enabled sink delivers: its `transitions`, else its
    integration's default (model/kinds.py). The outbox writes rows for nothing else."""
    return {
        i.name: frozenset(config.transitions.get(i.name, i.integration.transitions))
        for i in enabled(config)
        if i.outbound
    }


def audience(config: Config) -> Callable[[Decision], tuple[str, ...]]:
    """The sinks an event with this decision reaches (model/decision.py: sinks_for), for a
    process that records transitions without a daemon's sinks (the CLI)."""
    names = sink_names(config)

    def sinks(decision: Decision) -> tuple[str, ...]:
        return sinks_for(decision, names, config.routes)

    return sinks


def context(
    integration: Integration[Any] | Instance,
    config: Config,
    renderer: Renderer,
    stdout: TextIO | None = None,
    *,
    send_test: bool = False,
) -> Context[Any]:
    """What building an instance's parts may use: its own settings and the core's facts
    (an integration: its unnamed instance)."""
    core = core_of(config)
    name = integration.name
    return Context(settings_of(integration, config), core, renderer, stdout, send_test, name)


def findings(instance: Instance, found: Sequence[Finding]) -> list[Finding]:
    """An instance's check findings, each naming the instance ("slack.dba: ...", and its
    keys in the text: "slack.dba.channel"), as `sebridge check` prints them."""
    if instance.name == instance.integration.name:
        return list(found)  # said as they always were
    return [
        Finding(
            instance.name if f.target == instance.integration.name else instance.said(f.target),
            f.ok,
            instance.said(f.message),
        )
        for f in found
    ]

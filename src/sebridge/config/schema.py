"""Every key the configuration accepts, read from the dataclasses the loader reads.

A dataclass field is a key (config/reader.py), so the schema is the fields: each
section's, a nested table's (`[[policy.rules]]`, a rule's `window`), a hook's
(`[hooks.<name>]`, whose name is its table's), each secret's `<key>_file` twin,
and the routing keys every instance of a sending integration takes
(config/instances.py). The caller hands over the integrations' sections, as it
does to the loader (integrations/registry.py). scripts/reference.py writes
docs/reference/configuration.md from it; tests/test_config_example.py holds
config/example.toml to it.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from sebridge.config.core import CORE_SECTIONS
from sebridge.config.instances import RoutingSettings
from sebridge.config.policy import HookSettings
from sebridge.config.reader import key_name
from sebridge.config.secrets import Secret

__all__ = ["HOOKS", "Key", "Table", "optional", "table_of", "tables"]

HOOKS = "hooks"
# A hook's name is its table's: `[hooks.drain]`; the key itself is refused (read_hooks).
_HOOK_NAME = "name"


@dataclass(frozen=True)
class Key:
    """One key: `section.name` ("imds.poll_interval", "policy.rules.window.days",
    "hooks.timeout", "slack.bot_token_file").

    Args:
        field: the dataclass field it reads (a `_file` twin: its secret's field).
        hint: its type as `typing.get_type_hints(..., include_extras=True)` gives it.
        twin: for `<key>_file`, the secret's key it gives instead.
        routing: one of the keys every instance of a sending integration takes.
    """

    section: str
    name: str
    field: dataclasses.Field[Any]
    hint: Any
    twin: str = ""
    routing: bool = False

    @property
    def path(self) -> str:
        return f"{self.section}.{self.name}"


@dataclass(frozen=True)
class Table:
    """A table of keys: a section, a nested table or a hook's, in the code's order.

    Args:
        section: its dotted name ("imds", "policy.rules", "hooks", "slack").
        cls: the dataclass its keys come from.
        keys: its keys, in field order, each secret followed by its `_file` twin.
    """

    section: str
    cls: type[Any]
    keys: tuple[Key, ...]


def tables(sections: Mapping[str, type[Any]], sending: Iterable[str] = ()) -> list[Table]:
    """The core's sections (a nested table after its section), `[hooks.<name>]`, then the
    integrations' `sections`; those named in `sending` also take the routing keys."""
    found: list[Table] = []
    for name, cls in CORE_SECTIONS.items():
        found.extend(_walk(name, cls))
        if name == "policy":
            found.extend(_walk(HOOKS, HookSettings, skip=(_HOOK_NAME,)))
    outbound = set(sending)
    for name, cls in sections.items():
        walked = _walk(name, cls)
        if name in outbound:
            routing = _walk(name, RoutingSettings)[0].keys
            first = walked[0]
            walked[0] = Table(
                name, cls, first.keys + tuple(dataclasses.replace(k, routing=True) for k in routing)
            )
        found.extend(walked)
    return found


def _walk(section: str, cls: type[Any], skip: tuple[str, ...] = ()) -> list[Table]:
    """`cls`'s table, then the tables nested in it (a field typed as a dataclass, or a
    tuple of them: config/reader.py, _tables)."""
    hints = typing.get_type_hints(cls, include_extras=True)
    keys: list[Key] = []
    nested: list[Table] = []
    for f in dataclasses.fields(cls):
        name = key_name(f)
        if name in skip:
            continue
        hint = hints[f.name]
        keys.append(Key(section, name, f, hint))
        if hint is Secret:
            keys.append(Key(section, f"{name}_file", f, hint, twin=name))
        inner = table_of(hint)
        if inner is not None:
            nested.extend(_walk(f"{section}.{name}", inner))
    return [Table(section, cls, tuple(keys)), *nested]


def table_of(hint: Any) -> type[Any] | None:
    """The dataclass of a nested table (`X`, `X | None`, `tuple[X, ...]`), else None."""
    kind = optional(hint)
    if typing.get_origin(kind) is tuple:
        kind = typing.get_args(kind)[0]
    return kind if isinstance(kind, type) and dataclasses.is_dataclass(kind) else None


def optional(hint: Any) -> Any:
    """`X` of `X | None`; any other type as it is."""
    if typing.get_origin(hint) in (types.UnionType, typing.Union):
        return next(k for k in typing.get_args(hint) if k is not type(None))
    return hint

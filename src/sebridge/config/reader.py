"""Reading one TOML table into a frozen dataclass, strictly, for config/loader.py.

A dataclass field is a config key: its annotation says how to read it (bool,
int, float, str, tuple[str, ...], tuple[int, ...], Mapping[str, str] (a table of
strings, each value `key.NAME`), Mapping[str, Secret] (the same, each value a
secret: extra headers that may carry a token), Secret, another such
dataclass (a nested table), a tuple of them (an array of tables, each named
`key[N]` from 1), or `X | None`: None when the key is absent), its default is the key's default,
and its metadata (see `option`) holds limits and choices, and the key's own name
when it is no Python name (`from`: `key_name`). A choice matches
without regard to case and is kept in its canonical spelling ("terminate" is
Terminate); anything else is an error naming the nearest choice. A number of
seconds typed `Seconds` or `WholeSeconds` (config/durations.py) also takes
"90s", "10m", "2h", "1d". Secret fields
also accept `<name>_file`, whose path `locate` may map (config_files: where
`check` outside the service finds the unit's credentials). Strings are
interpolated (config_secrets.Expander). With `read_secrets=False` a secret
is only known to be set (Secret.unread): nothing is expanded or read for it.
Problems are collected, each naming its full key, and raised together as one
ConfigError; values that failed keep their defaults meanwhile. The loader
reads every value first, then checks them (each on its own and together):
once the values are read (`values_read`), a check of a key whose value
failed to read says nothing, since it would judge the stand-in default
rather than what the file says; so one pass lists every problem, each once.
"""

from __future__ import annotations

import dataclasses
import json
import math
import types
import typing
from collections.abc import Callable, Iterable, Mapping
from dataclasses import field, fields
from typing import Any, TypeVar

from sebridge.config.durations import EXAMPLE, is_seconds, parse_duration
from sebridge.config.key_strength import LEAST_BITS, estimated_bits
from sebridge.config.secrets import Expander, Secret, read_secret_file
from sebridge.kernel.errors import ConfigError

__all__ = ["Reader", "did_you_mean", "key_name", "option"]

_T = TypeVar("_T")


def option(
    default: _T,
    *,
    ge: float | None = None,
    gt: float | None = None,
    le: float | None = None,
    choices: tuple[str, ...] = (),
    min_bytes: int = 0,
    why: str = "",
    key: str = "",
) -> _T:
    """A config field with a default and limits: numbers in range, strings (or items) in
    choices, a secret (when set) at least `min_bytes` long in UTF-8; `key`: the key's
    name when the field cannot bear it (a Python keyword: `from`)."""
    return field(
        default=default,
        metadata={
            "ge": ge,
            "gt": gt,
            "le": le,
            "choices": choices,
            "min_bytes": min_bytes,
            "why": why,
            "key": key,
        },
    )


def key_name(f: dataclasses.Field[Any]) -> str:
    """The config key a dataclass field reads: its name, or the `key` its option gives."""
    return str(f.metadata.get("key") or f.name)


class Reader:
    """Typed reads of config tables from one environment snapshot, collecting problems."""

    def __init__(
        self,
        environ: Mapping[str, str],
        source: str,
        *,
        read_secrets: bool = True,
        locate: Callable[[str], str] | None = None,
    ) -> None:
        self.env = Expander(environ)
        self.environ = environ  # the snapshot itself (PGPASSWORD: config/masked.py)
        self.source = source
        self.read_secrets = read_secrets
        self._locate = locate or (lambda path: path)
        self.problems: list[str] = []
        self.warnings: list[str] = []
        self._from_file: set[str] = set()  # secrets given as `key_file`
        self._scope: tuple[str, str] | None = None  # (section, instance): see scope()
        self._unreadable: set[str] = set()  # keys whose value failed to read
        self._checking = False  # past values_read(): checks of values, not reads

    def scope(self, section: str | None, instance: str | None) -> None:
        """Until scope(None, None): a key "section.x" that error(), required() and
        secret_key() are given means "instance.x" (an integration's checks, written for
        `[slack]`, run over `[slack.dba]`: config/instances.py)."""
        self._scope = (section, instance) if section and instance else None
        self.env.rename = self._key

    def _key(self, key: str) -> str:
        if self._scope is None:
            return key
        section, instance = self._scope
        if key.startswith(f"{section}.") and not key.startswith(f"{instance}."):
            return f"{instance}.{key[len(section) + 1 :]}"
        return key

    def raise_problems(self) -> None:
        """Raise one ConfigError carrying every problem so far, if there is any."""
        if len(self.problems) == 1:
            raise ConfigError(f"{self.source}: {self.problems[0]}")
        if self.problems:
            lines = "".join(f"\n  - {p}" for p in self.problems)
            raise ConfigError(f"{self.source}: {len(self.problems)} problems:{lines}")

    def values_read(self) -> None:
        """Every value is read: problems from here on are checks of them, and a check of a
        key that failed to read (it holds its default meanwhile) is not said."""
        self._checking = True

    def unreadable(self, key: str) -> bool:
        """Whether `key` (or its `key_file`, or the table holding it) failed to read: a
        check of it would judge the default standing in for it."""
        return f"{key}_file" in self._unreadable or any(
            key == bad or key.startswith((f"{bad}.", f"{bad}[")) for bad in self._unreadable
        )

    def error(self, key: str, message: str) -> None:
        key = self._key(key)
        if self._checking and self.unreadable(key):
            return
        self.problems.append(f"{key}: {message}")
        if not self._checking:
            self._unreadable.add(key)

    def problem(self, message: str, *, about: Iterable[str]) -> None:
        """A problem of several keys together (`about`), e.g. "set this or that"."""
        if not any(self.unreadable(self._key(key)) for key in about):
            self.problems.append(message)

    def secret_key(self, key: str) -> str:
        """The key a secret was given by: `key`, or `key_file` (for errors about its value)."""
        key = self._key(key)
        return f"{key}_file" if key in self._from_file else key

    def required(self, key: str, when: str) -> None:
        """`key` is empty but needed; say why it is empty when an env variable emptied it."""
        key = self._key(key)
        if self.unreadable(key):  # empty because its value failed to read: said already
            return
        self.problems.append(f"{key} is empty{self.env.why_empty(key)}; it is required {when}")

    def section(
        self,
        name: str,
        raw: Any,
        cls: type[_T],
        defaults: Mapping[str, Any],
        also: tuple[str, ...] = (),
    ) -> _T:
        """Build `cls` from the table `raw` (absent: {}); `defaults` override class defaults.
        `also`: keys the caller read out of `raw` itself, named among the known ones."""
        if not isinstance(raw, Mapping):
            self.problems.append(f"[{name}] must be a table, got {type(raw).__name__}")
            self._unreadable.add(name)
            raw = {}
        known: list[str] = []
        values: dict[str, Any] = dict(defaults)
        hints = typing.get_type_hints(cls, include_extras=True)  # keeps Seconds' marker
        for f in fields(cls):  # type: ignore[arg-type]
            written = key_name(f)
            kind, key = hints[f.name], f"{name}.{written}"
            known.append(written)
            if kind is Secret:
                known.append(f"{written}_file")
                values[f.name] = self._secret(raw, name, written, f.metadata)
            elif written in raw:
                try:
                    values[f.name] = self._value(kind, raw[written], key, f.metadata)
                except ValueError as exc:
                    self.error(key, str(exc))
        known.extend(also)
        for k in raw:
            if k not in known:
                hint = did_you_mean(k, known)
                self.problems.append(
                    f'unknown key "{k}" in [{name}]{hint}; known keys: {", ".join(known)}'
                )
        return cls(**values)

    def _value(self, kind: Any, raw: Any, key: str, meta: Mapping[str, Any]) -> Any:
        if typing.get_origin(kind) in (types.UnionType, typing.Union):
            # `X | None`: None is only ever the default (TOML has no null).
            kind = next(k for k in typing.get_args(kind) if k is not type(None))
        item = typing.get_args(kind)[0] if typing.get_origin(kind) is tuple else None
        if dataclasses.is_dataclass(kind) or dataclasses.is_dataclass(item):
            return self._tables(kind, item, raw, key)
        if kind == Mapping[str, Secret]:
            return self._secret_table(raw, key)
        if is_seconds(kind):
            kind, raw = typing.get_args(kind)[0], _seconds(raw, kind)
        if item is not None and (is_seconds(item) or item in (int, float)):
            if not isinstance(raw, list):
                example = ', e.g. [600, "10m"]' if is_seconds(item) else ""
                raise ValueError(f"expected a list of numbers{example}, got {_describe(raw)}")
            if is_seconds(item):
                item, raw = typing.get_args(item)[0], [_seconds(i, item) for i in raw]
            return tuple(self._scalar(item, i, key, meta) for i in raw)
        return self._scalar(kind, raw, key, meta)

    def _tables(self, kind: Any, item: Any, raw: Any, key: str) -> Any:
        """A nested table (a dataclass), or an array of them: each `key[N]`, from 1."""
        if item is None:
            return self.section(key, raw, kind, {})
        if not isinstance(raw, list):
            raise ValueError(f"expected an array of tables, got {_describe(raw)}")
        return tuple(self.section(f"{key}[{n}]", t, item, {}) for n, t in enumerate(raw, 1))

    def _scalar(self, kind: Any, raw: Any, key: str, meta: Mapping[str, Any]) -> Any:
        if kind is bool:
            if not isinstance(raw, bool):
                raise ValueError(f"expected true or false, got {_describe(raw)}")
            return raw
        if kind is int or kind is float:
            accepted = (int, float) if kind is float else int
            if isinstance(raw, bool) or not isinstance(raw, accepted):
                what = "a number" if kind is float else "an integer"
                raise ValueError(f"expected {what}, got {_describe(raw)}")
            if not math.isfinite(raw):
                raise ValueError(f"expected a finite number, got {_describe(raw)}")
            _check_range(raw, meta)
            return kind(raw)
        if kind is str:
            if not isinstance(raw, str):
                raise ValueError(f"expected a string, got {_describe(raw)}")
            return _check_choice(self.env.expand(raw, key), meta)
        if kind == tuple[str, ...]:
            if not isinstance(raw, list) or not all(isinstance(item, str) for item in raw):
                raise ValueError(f"expected a list of strings, got {_describe(raw)}")
            return tuple(_check_choice(self.env.expand(item, key), meta) for item in raw)
        if kind == Mapping[str, str]:
            if not isinstance(raw, Mapping) or not all(isinstance(v, str) for v in raw.values()):
                raise ValueError(
                    f'expected a table of strings, e.g. {{ A = "b" }}, got {_describe(raw)}'
                )
            return {name: self.env.expand(value, f"{key}.{name}") for name, value in raw.items()}
        raise TypeError(f"{key}: no reader for {kind!r}")  # a field type this module lacks

    def _secret_table(self, raw: Any, key: str) -> dict[str, Secret]:
        """A table of secrets: each value read as a secret is (`${VAR}` unset: an error)."""
        if not isinstance(raw, Mapping):
            raise ValueError(
                f'expected a table of strings, e.g. {{ A = "b" }}, got {_describe(raw)}'
            )
        if not self.read_secrets:  # only known to be set, as any secret is then
            return {name: Secret.unread(f"{key}.{name}") for name in raw}
        return {name: Secret(self._string(raw, name, f"{key}.{name}", secret=True)) for name in raw}

    def _secret(
        self, raw: Mapping[str, Any], section: str, name: str, meta: Mapping[str, Any]
    ) -> Secret:
        key = f"{section}.{name}"
        if not self.read_secrets:
            return self._unread_secret(raw, section, name)
        inline = self._string(raw, name, key, secret=True)
        path = self._string(raw, f"{name}_file", f"{key}_file", secret=False)
        if inline and path:
            self.problems.append(f"{section}: set {name} or {name}_file, not both")
        elif path:
            self._from_file.add(key)
            try:
                secret = Secret(read_secret_file(self._locate(path)))
                return self._long_enough(secret, f"{key}_file", meta)
            except ValueError as exc:
                self.error(f"{key}_file", str(exc))
        return self._long_enough(Secret(inline), key, meta)

    def _long_enough(self, secret: Secret, key: str, meta: Mapping[str, Any]) -> Secret:
        """A key (a secret with `min_bytes`) as it is used: without the whitespace around
        it, whether inline, from the environment or from a file; an error naming `key`
        when it is then too short or predictable (config/key_strength.py; the value is never
        shown, nor its length: a short key is guessed faster knowing it)."""
        least: int = meta.get("min_bytes") or 0
        if not least or not secret:
            return secret
        key_text = secret.reveal().strip()
        why = f": {meta['why']}" if meta.get("why") else ""
        if len(key_text.encode("utf-8")) < least:
            self.error(key, f"is shorter than {least} bytes (whitespace around it aside){why}")
        elif estimated_bits(key_text) < LEAST_BITS:
            self.error(key, f"is too predictable (runs or repeats, as a person types){why}")
        return Secret(key_text)

    def _unread_secret(self, raw: Mapping[str, Any], section: str, name: str) -> Secret:
        """Whether the secret is set, from the raw strings alone: nothing is expanded or read."""
        given = []
        for k in (name, f"{name}_file"):
            value = raw.get(k, "")
            if not isinstance(value, str):
                self.error(
                    f"{section}.{k}", f"expected a string, got {_describe(value, secret=True)}"
                )
            elif value:
                given.append(k)
        if len(given) == 2:
            self.problems.append(f"{section}: set {name} or {name}_file, not both")
        return Secret.unread(f"{section}.{given[0]}") if given else Secret()

    def _string(self, raw: Mapping[str, Any], name: str, key: str, *, secret: bool) -> str:
        """Read a string that feeds a secret. A `${VAR}` that is unset or empty is an
        error: a secret that silently became "" would turn its integration off."""
        value = raw.get(name, "")
        try:
            if not isinstance(value, str):
                raise ValueError(f"expected a string, got {_describe(value, secret=secret)}")
            text = self.env.expand(value, key, secret=secret)
        except ValueError as exc:
            self.error(key, str(exc))
            return ""
        unset = self.env.empty_variables(key)
        if unset:
            self.error(key, f"{unset}: set it, or remove the key")
            return ""
        return text


def did_you_mean(word: str, known: Iterable[str], *, quote: str = '"') -> str:
    """' (did you mean "x"?)' for the closest of `known` (case-insensitive), else ""."""
    # Imported here: only a misspelt name needs it, and a daemon started from a good file
    # never loads difflib (0.16 MiB of VmRSS; tests/test_run_imports.py).
    import difflib

    by_lower = {k.lower(): k for k in known}
    close = difflib.get_close_matches(word.lower(), list(by_lower), n=1, cutoff=0.6)
    if not close:
        return ""
    end = "]" if quote == "[" else quote
    return f" (did you mean {quote}{by_lower[close[0]]}{end}?)"


def _check_range(value: float, meta: Mapping[str, Any]) -> None:
    why = f" ({meta['why']})" if meta.get("why") else ""
    ge, gt, le = meta.get("ge"), meta.get("gt"), meta.get("le")
    if ge is not None and value < ge:
        raise ValueError(f"must be >= {_number(ge)}{why}, got {_number(value)}")
    if gt is not None and value <= gt:
        raise ValueError(f"must be > {_number(gt)}{why}, got {_number(value)}")
    if le is not None and value > le:
        raise ValueError(f"must be <= {_number(le)}{why}, got {_number(value)}")


def _number(value: float) -> str:
    """A number as a person wrote it: an integer whole (a port 4833140000, not
    4.83314e+09), a fraction as short as it reads exactly (0.2)."""
    if isinstance(value, int) or (abs(value) < 1e15 and value.is_integer()):
        return str(int(value))
    return f"{value:g}" if abs(value) >= 1e15 else repr(value)


def _check_choice(value: str, meta: Mapping[str, Any]) -> str:
    """`value` in its canonical spelling, whatever its case: a rule meant for Terminate
    must not silently match nothing because it says "terminate" (fail closed)."""
    choices: tuple[str, ...] = meta.get("choices", ())
    if not choices:
        return value
    canonical = {c.casefold(): c for c in choices}.get(value.casefold())
    if canonical is None:
        hint = did_you_mean(value, choices)
        raise ValueError(f'must be one of {", ".join(choices)}; got "{value}"{hint}')
    return canonical


def _seconds(raw: Any, kind: Any) -> Any:
    """A duration string as a number of seconds (an int for `WholeSeconds`); a number as
    it is, for its own checks (finite, in range) to judge."""
    whole = typing.get_args(kind)[0] is int
    if isinstance(raw, bool) or not isinstance(raw, int | float | str):
        raise ValueError(f"expected {EXAMPLE}, got {_describe(raw)}")
    if whole and isinstance(raw, float):
        raise ValueError(f"expected a whole number of seconds, got {_describe(raw)}")
    if not isinstance(raw, str):
        return raw
    seconds = parse_duration(raw)
    if whole:
        if not seconds.is_integer():
            raise ValueError(f"{_describe(raw)} is not a whole number of seconds; give {EXAMPLE}")
        return int(seconds)
    return seconds


def _describe(value: Any, *, secret: bool = False) -> str:
    """How an error shows a bad value: the value itself, or only its kind for secrets."""
    if isinstance(value, bool):
        return "a boolean" if secret else str(value).lower()
    if isinstance(value, int | float):
        return "a number" if secret else f"{value!r}"
    if isinstance(value, str):
        shown = value if len(value) <= 60 else value[:57] + "..."
        return "a string" if secret else json.dumps(shown, ensure_ascii=False)
    if isinstance(value, list):
        return "a list"
    if isinstance(value, Mapping):
        return "a table"
    return "a date/time"

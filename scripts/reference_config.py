"""docs/reference/configuration.md: every key the configuration accepts (config/schema.py),
with its type, default, allowed values (option(): choices, bounds and their `why`) and its
meaning: the dataclass docstring's `Args:`, the comment lines above the field and the one
beside it. A key without words in the code is written as "(undocumented)", which
tests/test_reference.py refuses: the words go into the code, not here."""

from __future__ import annotations

import ast
import dataclasses
import inspect
import io
import json
import re
import textwrap
import tokenize
import typing
from collections.abc import Mapping, Sequence
from typing import Any

from reference_markdown import GENERATED, cell, escaped, number

from sebridge.config.durations import EXAMPLE, is_seconds
from sebridge.config.schema import Key, Table, optional, table_of, tables
from sebridge.config.secrets import Secret

__all__ = ["UNDOCUMENTED", "configuration", "meanings"]

UNDOCUMENTED = "(undocumented)"


def meanings(cls: type[Any]) -> dict[str, str]:
    """Each field's words in the code: its entry in the class docstring's `Args:` (or
    `Attributes:`), the comment lines right above it, and the comment beside it."""
    lines, _ = inspect.getsourcelines(cls)
    source = textwrap.dedent("".join(lines))
    code = source.splitlines()
    comments: dict[int, str] = {}
    for token in tokenize.generate_tokens(io.StringIO(source).readline):
        if token.type == tokenize.COMMENT:
            comments[token.start[0]] = token.string.lstrip("#").strip()
    node = ast.parse(source).body[0]
    assert isinstance(node, ast.ClassDef)
    args = _docstring_args(ast.get_docstring(node) or "")
    found: dict[str, str] = {}
    for item in node.body:
        if not (isinstance(item, ast.AnnAssign) and isinstance(item.target, ast.Name)):
            continue
        above: list[str] = []
        n = item.lineno - 1
        while n >= 1 and code[n - 1].lstrip().startswith("#"):
            above.insert(0, comments[n])
            n -= 1
        end = item.end_lineno or item.lineno
        beside = [comments[i] for i in range(item.lineno, end + 1) if i in comments]
        words = [args.get(item.target.id, ""), *above, *beside]
        found[item.target.id] = " ".join(w for w in words if w)
    return found


def _docstring_args(doc: str) -> dict[str, str]:
    """`name: text` entries of a Google-style `Args:` or `Attributes:` block."""
    found: dict[str, str] = {}
    inside, name = False, ""
    for line in doc.splitlines():
        if line.strip() in ("Args:", "Attributes:"):
            inside = True
            continue
        if not inside:
            continue
        if line and not line.startswith(" "):
            inside = False
            continue
        entry = re.fullmatch(r" {4}(\w+)(?: \(.*?\))?: (.*)", line)
        if entry:
            name = entry[1]
            found[name] = entry[2].strip()
        elif name and line.strip():
            found[name] += " " + line.strip()
    return found


def _summary(cls: type[Any]) -> str:
    """The class docstring before its `Args:`, as one line per paragraph, without the
    "[imds]: " its heading already says."""
    doc = re.sub(r"^\[[a-z.<>]+\]: (.)", lambda m: m[1].upper(), inspect.getdoc(cls) or "")
    doc = re.split(r"^(?:Args|Attributes):$", doc, flags=re.M)[0]
    # "(hooks/worker.py)": where the code is, not the reader's concern.
    doc = re.sub(r"\s+\([a-z_/]+\.py(?::[^)]*)?\)", "", doc)
    paragraphs = [" ".join(p.split()) for p in doc.strip().split("\n\n")]
    return "\n\n".join(escaped(p) for p in paragraphs if p)


def _type(key: Key) -> str:
    if key.twin:
        return "path"
    return _kind(optional(key.hint))


_SIMPLE = {
    bool: "boolean",
    int: "integer",
    float: "number",
    str: "string",
    Secret: "[secret](#secrets)",
}


def _kind(kind: Any) -> str:
    if is_seconds(kind):
        whole = typing.get_args(kind)[0] is int
        return "[duration](#durations)" + (" (whole seconds)" if whole else "")
    if kind in _SIMPLE:
        return _SIMPLE[kind]
    origin, args = typing.get_origin(kind), typing.get_args(kind)
    if origin is tuple:
        if table_of(kind) is not None:
            return "array of tables"
        return f"list of {_plural(_kind(args[0]))}"
    if origin is Mapping or dataclasses.is_dataclass(kind):
        return "table" if origin is None else f"table of {_plural(_kind(args[1]))}"
    raise TypeError(f"no description for the type {kind!r}")  # a type the reader lacks too


def _plural(kind: str) -> str:
    for one in ("duration]", "secret]", "integer", "string"):
        kind = kind.replace(one, one.rstrip("]") + "s" + ("]" if one.endswith("]") else ""))
    return kind


def _default(key: Key) -> str:
    f = key.field
    if key.twin:
        return "unset"
    if f.default is not dataclasses.MISSING:
        value = f.default
    elif f.default_factory is not dataclasses.MISSING:
        value = f.default_factory()
    else:
        return "required"
    if value is None or (isinstance(value, Secret) and not value):
        return "unset"
    shown = f"`{_toml(value)}`"
    seconds = optional(key.hint)
    if is_seconds(seconds) and isinstance(value, int | float) and value >= 60:
        shown += f" ({_human(value)})"
    return shown


def _toml(value: Any) -> str:
    if isinstance(value, bool):
        return str(value).lower()
    if isinstance(value, int | float):
        return number(value)
    if isinstance(value, str):
        return json.dumps(value, ensure_ascii=False)
    if isinstance(value, tuple | list):
        return "[" + ", ".join(_toml(v) for v in value) + "]"
    if isinstance(value, Mapping):
        return "{" + ", ".join(f"{k} = {_toml(v)}" for k, v in value.items()) + "}"
    raise TypeError(f"no TOML for {value!r}")


def _human(seconds: float) -> str:
    """600 as "10m", 604800 as "7d": the largest unit that divides it."""
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60)):
        if seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{number(seconds)}s"


def _allowed(key: Key) -> str:
    meta = key.field.metadata
    parts: list[str] = []
    if key.twin:
        return ""
    choices: tuple[str, ...] = meta.get("choices", ())
    if choices:
        each = "each one of" if typing.get_origin(optional(key.hint)) is tuple else "one of"
        parts.append(f"{each} " + ", ".join(f"`{c}`" for c in choices))
    unit = " s" if is_seconds(_item(key.hint)) else ""
    ge, gt, le = meta.get("ge"), meta.get("gt"), meta.get("le")
    low = f"{number(ge)}{unit}" if ge is not None else ""
    above = f"above {number(gt)}{unit}" if gt is not None else ""
    if low and le is not None:
        parts.append(f"{low} to {number(le)}{unit}")
    elif le is not None:
        parts.append(", ".join(p for p in (above, f"at most {number(le)}{unit}") if p))
    elif low or above:
        parts.append(above or f"at least {low}")
    if meta.get("min_bytes"):
        parts.append(f"at least {meta['min_bytes']} bytes")
    text = "; ".join(parts)
    if meta.get("why") and text:
        text += f" ({meta['why']})"
    return text


def _item(hint: Any) -> Any:
    kind = optional(hint)
    return typing.get_args(kind)[0] if typing.get_origin(kind) is tuple else kind


def _meaning(key: Key, words: Mapping[str, str]) -> str:
    if key.twin:
        return f"The path of a file holding `{key.twin}`: one of the two, not both."
    return words.get(key.field.name) or UNDOCUMENTED


def _rows(keys: Sequence[Key], cls: type[Any]) -> list[str]:
    words = meanings(cls)
    rows = ["| Key | Type | Default | Meaning |", "| --- | --- | --- | --- |"]
    for key in keys:
        meaning, allowed = _meaning(key, words), _allowed(key)
        why = key.field.metadata.get("why", "")
        if allowed:
            meaning += f" *Allowed:* {allowed}."
        elif why and not key.twin:  # a reason with no limit to give it to
            meaning += f" ({why})"
        cells = (f"`{key.name}`", _type(key), _default(key), meaning)
        rows.append("| " + " | ".join(cell(c) for c in cells) + " |")
    return rows


_HEADERS = {
    "hooks": "`[hooks.<name>]`",
    "policy.rules": "`[[policy.rules]]`",
    "policy.rules.window": "A rule's `window`",
}


def _header(table: Table) -> str:
    return _HEADERS.get(table.section, f"`[{table.section}]`")


def configuration() -> str:
    """docs/reference/configuration.md."""
    from sebridge.config.instances import RoutingSettings
    from sebridge.integrations.registry import REGISTRY, SECTIONS

    integrations = {i.name: i for i in REGISTRY}
    sending = [i.name for i in REGISTRY if i.outbound]
    out = [
        "# Configuration reference",
        "",
        GENERATED,
        "",
        "Every key the configuration file accepts, one section per table, in the order the"
        " code reads them. A key left out takes its default.",
        "",
        *_notes(),
    ]
    routing: list[Key] = []
    for table in tables(SECTIONS.types(), sending):
        own = [k for k in table.keys if not k.routing]
        routing = [k for k in table.keys if k.routing] or routing
        out += ["", f"## {_header(table)}", "", _summary(table.cls), ""]
        integration = integrations.get(table.section)
        if integration is not None:
            out += [_instances_line(integration), ""]
        out += _rows(own, table.cls)
    out += [
        "",
        "## Every instance: `route`, `route_only`, `transitions`",
        "",
        _summary(RoutingSettings),
        "",
        *_rows(routing, RoutingSettings),
        "",
        "What each integration delivers when `transitions` is left out:",
        "",
        "| Integration | Transitions |",
        "| --- | --- |",
    ]
    for name in sending:
        kinds = ", ".join(f"`{k}`" for k in _kinds_in_order(integrations[name].transitions))
        out.append(f"| `[{name}]` | {kinds} |")
    return "\n".join(out) + "\n"


def _kinds_in_order(kinds: frozenset[str]) -> list[str]:
    from sebridge.model import TransitionKind

    return [k.value for k in TransitionKind if k.value in kinds]


def _instances_line(integration: Any) -> str:
    name = integration.name
    if integration.once:
        return f"Configured once ({integration.once}): no named instances."
    return (
        f"Named instances: `[{name}.<name>]` takes the same keys, each instance whole on its own"
        f" (nothing is inherited from `[{name}]`); every instance also takes the"
        " [routing keys](#every-instance-route-route_only-transitions)."
    )


def _notes() -> list[str]:
    from sebridge.config.loader import DEFAULT_PATH, ENV_VAR

    return [
        "## How values are read",
        "",
        f"The file is the one `--config FILE` names, else `${ENV_VAR}`, else `{DEFAULT_PATH}`"
        " when it exists; without one, every key takes its default. Every string value may"
        ' use `${VAR}` (an unset variable reads as ""; in a secret it is an error) and `$$`'
        " (a literal `$`). Every problem in the file is reported at once, each naming its key.",
        "",
        "### Durations",
        "",
        f"A key of type duration takes {EXAMPLE}.",
        "",
        "### Secrets",
        "",
        "A secret is never shown in a message, a log line or `sebridge check`. Each secret"
        " key `x` also takes `x_file`: the path of a file holding the value (one of the two,"
        " not both).",
        "",
        "### Choices",
        "",
        "A value from a list of choices matches whatever its case, and is kept in the"
        " spelling shown here.",
    ]

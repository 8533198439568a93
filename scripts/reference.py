"""Write the references under docs/reference/ from the code, so they cannot drift.

    python scripts/reference.py           # rewrite the three files
    python scripts/reference.py --check   # exit 1, naming each file that differs

- configuration.md: every key the configuration accepts, with its type, default,
  allowed values and meaning, from the configuration's own schema (reference_config.py).
- cli.md: every command, subcommand and option of the argument parser (cli/main.py).
- metrics.md: every family the daemon's /metrics registry shows, with its labels and
  their values (engine/metrics.py, web/metrics_export.py, web/store_gauges.py).

The output is deterministic: the code's order, no timestamps.
"""

from __future__ import annotations

import argparse
import re
import sys
from collections.abc import Callable, Iterator, Mapping, Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
# From a checkout without installing too, and its parts when this file is loaded by path.
sys.path[:0] = [str(ROOT / "src"), str(ROOT / "scripts")]

from reference_config import UNDOCUMENTED, configuration, meanings  # noqa: E402
from reference_markdown import GENERATED, cell, number  # noqa: E402

__all__ = ["FILES", "UNDOCUMENTED", "cli", "configuration", "main", "meanings", "metrics"]


# --- cli.md -----------------------------------------------------------------------------


def _subcommands(parser: argparse.ArgumentParser) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            yield from action.choices.items()


def _usage(prog: str, parser: argparse.ArgumentParser) -> str:
    words = [prog]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            words.append(str(action.metavar or "COMMAND"))
            continue
        flag = _flag(action)
        if action.option_strings:
            words.append(flag if action.required else f"[{flag}]")
        else:
            words.append(f"[{flag}]" if action.nargs == "?" else flag)
    return _wrapped(words, indent=len(prog) + 1)


def _wrapped(words: Sequence[str], indent: int, width: int = 88) -> str:
    """`words` on lines of at most `width` (a word is never split), as argparse wraps a
    usage: the lines after the first indented under the first argument."""
    lines = [words[0]]
    for word in words[1:]:
        if len(lines[-1]) + 1 + len(word) > width:
            lines.append(" " * indent + word)
        else:
            lines[-1] += " " + word
    return "\n".join(lines)


def _flag(action: argparse.Action) -> str:
    metavar = action.metavar or (action.dest.upper() if action.option_strings else action.dest)
    if not action.option_strings:
        return str(metavar)
    takes = action.nargs != 0
    return action.option_strings[-1] + (f" {metavar}" if takes else "")


def _options(parser: argparse.ArgumentParser) -> list[str]:
    rows = ["| Option | Default | Meaning |", "| --- | --- | --- |"]
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            continue
        metavar = action.metavar or (action.dest.upper() if action.option_strings else None)
        if action.option_strings:
            takes = f" {metavar}" if action.nargs != 0 else ""
            names = ", ".join(f"`{o}{takes}`" for o in action.option_strings)
        else:
            names = f"`{action.metavar or action.dest}`"
        default = action.default
        shown = (
            ""
            if default in (None, False, argparse.SUPPRESS) or action.nargs == 0
            else f"`{default}`"
        )
        meaning = action.help or ""
        if action.nargs == "?":
            meaning = f"(optional) {meaning}".strip()
        if isinstance(action, argparse._AppendAction):
            meaning += " (repeatable)" if "repeatable" not in meaning else ""
        rows.append(f"| {cell(names)} | {cell(shown)} | {cell(meaning)} |")
    return rows


def cli() -> str:
    """docs/reference/cli.md."""
    from sebridge.cli import exits
    from sebridge.cli.main import build_parser

    parser = build_parser()
    out = [
        "# Command-line reference",
        "",
        GENERATED,
        "",
        parser.description or "",
        "",
        "```",
        _usage("sebridge", parser),
        "```",
        "",
        *_options(parser),
        "",
        "## Exit codes",
        "",
        "| Code | Meaning |",
        "| --- | --- |",
    ]
    for code, meaning in re.findall(r"(\d+) ([^;]+?)(?:;|\.\s*$)", _first(exits.__doc__)):
        out.append(f"| {code} | {cell(meaning)} |")
    for name, command in _subcommands(parser):
        out += _command(f"sebridge {name}", command, level=2)
    return "\n".join(out) + "\n"


def _first(doc: str | None) -> str:
    """A module docstring's second paragraph (the first is its title line)."""
    return " ".join((doc or "").split("\n\n")[1].split())


def _command(prog: str, parser: argparse.ArgumentParser, level: int) -> list[str]:
    out = [
        "",
        f"{'#' * level} `{prog}`",
        "",
        cell(parser.description or ""),
        "",
        "```",
        _usage(prog, parser),
        "```",
        "",
        *_options(parser),
    ]
    for name, sub in _subcommands(parser):
        out += _command(f"{prog} {name}", sub, level + 1)
    return out


# --- metrics.md -------------------------------------------------------------------------

# Label values no fixed set in the code holds: what they are instead.
_OPEN_LABELS = {
    "sink": "each enabled sink's name: an integration ({}) or a named instance (`slack.dba`)",
    "version": "the running version (`sebridge --version`)",
}


def metrics() -> str:
    """docs/reference/metrics.md."""
    from prometheus_client import Metric

    from sebridge.engine.metrics import OTHER_VIA, Metrics
    from sebridge.integrations.registry import REGISTRY
    from sebridge.store.tallies import Tallies
    from sebridge.web.metrics_export import registry_of
    from sebridge.web.store_gauges import StoreGauges

    sinks = [i.name for i in REGISTRY if i.outbound]
    daemon = Metrics(sinks)
    gauges = StoreGauges(Tallies, sinks)
    registry = registry_of(daemon)
    registry.register(gauges)
    try:
        families: list[Metric] = list(registry.collect())
    finally:
        gauges.stop()
    extra = {"via": [OTHER_VIA]}  # a channel not in VIAS is counted as "other"
    ours = [f for f in families if f.name.startswith("sebridge_")]
    theirs = [f for f in families if not f.name.startswith("sebridge_")]
    sink_names = ", ".join(f"`{s}`" for s in sinks)
    out = [
        "# Metrics reference",
        "",
        GENERATED,
        "",
        "What `GET /metrics` on the daemon's HTTP server shows, in the order it shows it."
        " Every label value comes from a small fixed set: never an event id, a VM name, a"
        " person or an error text.",
        "",
        "## sebridge's metrics",
        "",
        "| Metric | Type | Labels | Meaning |",
        "| --- | --- | --- | --- |",
    ]
    for family in ours:
        labels = _labels(family, extra, sink_names)
        out.append(
            f"| `{_exposed(family)}` | {family.type} | {cell(labels)}"
            f" | {cell(family.documentation)} |"
        )
    out += [
        "",
        "A histogram shows `_bucket` (with `le`), `_sum` and `_count` samples; the buckets of"
        " `sebridge_delivery_seconds` are "
        + ", ".join(f"`{number(b)}`" for b in _buckets(ours))
        + " and `+Inf` seconds.",
        "",
        "## Process metrics",
        "",
        "prometheus_client's own, read from /proc at scrape time (none where there is no /proc).",
        "",
        "| Metric | Type | Meaning |",
        "| --- | --- | --- |",
    ]
    for family in theirs:
        out.append(f"| `{_exposed(family)}` | {family.type} | {cell(family.documentation)} |")
    return "\n".join(out) + "\n"


def _exposed(family: Any) -> str:
    """The name a query uses: a counter's `_total` sample, the family's name otherwise."""
    return f"{family.name}_total" if family.type == "counter" else str(family.name)


def _labels(family: Any, extra: Mapping[str, list[str]], sink_names: str) -> str:
    values: dict[str, list[str]] = {}
    for sample in family.samples:
        for label, value in sample.labels.items():
            if label != "le" and value not in values.setdefault(label, []):
                values[label].append(value)
    names = list(values)
    parts = []
    for label in names:
        if label in _OPEN_LABELS:
            shown = _OPEN_LABELS[label].format(sink_names)
        else:
            found = values.get(label, []) + extra.get(label, [])
            shown = ", ".join(f"`{v}`" for v in found)
        parts.append(f"`{label}`: {shown}")
    return "; ".join(parts) if parts else "none"


def _buckets(families: Sequence[Any]) -> list[float]:
    """The histogram's bucket bounds, as its samples show them (`+Inf` aside)."""
    bounds: list[float] = []
    for family in families:
        for sample in family.samples if family.type == "histogram" else ():
            bound = sample.labels.get("le")
            if bound and bound != "+Inf" and float(bound) not in bounds:
                bounds.append(float(bound))
    return bounds


# --- the command ------------------------------------------------------------------------

FILES: dict[str, Callable[[], str]] = {
    "configuration.md": configuration,
    "cli.md": cli,
    "metrics.md": metrics,
}


def main(argv: Sequence[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    ap.add_argument("--check", action="store_true", help="exit 1 if a file differs; write none")
    ap.add_argument(
        "--out",
        type=Path,
        default=ROOT / "docs" / "reference",
        help="the folder of the references (docs/reference)",
    )
    args = ap.parse_args(argv)
    differ = []
    for name, make in FILES.items():
        path: Path = args.out / name
        text = make()
        old = path.read_text(encoding="utf-8") if path.exists() else None
        if old == text:
            continue
        if args.check:
            differ.append(path)
        else:
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    for path in differ:
        print(f"{path} differs from what scripts/reference.py writes: run it", file=sys.stderr)
    return 1 if differ else 0


if __name__ == "__main__":
    sys.exit(main())

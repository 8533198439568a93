"""`sebridge check`: what it looks at, and how it says what it found.

Each problem is said once, as one `problem:` line; what passed is an `ok:`
line. Check writes nothing it does not say: a SQLite store that does not
exist yet is reported, not created (the daemon creates it).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TextIO

from sebridge import command_format as fmt
from sebridge.config import Config
from sebridge.errors import BridgeError
from sebridge.integrations import registry
from sebridge.integrations.base import Finding
from sebridge.render import Renderer
from sebridge.runtime import build_imds, missing_store, open_store
from sebridge.store import Store
from sebridge.web.link_check import check_links

__all__ = ["Report", "examine", "show"]


@dataclass
class Report:
    """What check found: lines that passed, and problems (each once)."""

    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, findings: list[Finding] | tuple[Finding, ...]) -> None:
        for finding in findings:
            line = f"{finding.target}: {finding.message}"
            kept = self.passed if finding.ok else self.problems
            if line not in kept:
                kept.append(line)


def examine(config: Config, *, credentials: str | None = None) -> Report:
    """Look at the store, the approval links, IMDS's address and each enabled integration."""
    report = Report()
    if credentials:
        report.add(
            [
                Finding(
                    "secrets",
                    True,
                    f"*_file paths under ${{CREDENTIALS_DIRECTORY}} read from {credentials},"
                    " as the unit's LoadCredential= hands them to the service",
                )
            ]
        )
    store = _store(config, report)
    report.add(check_links(config, store))
    if store is not None:
        store.close()
    try:
        build_imds(config).close()
    except ValueError as exc:
        report.problems.append(f"imds: {exc}")
    renderer = Renderer(config.templates.dir or None)
    for integration in registry.enabled(config):
        report.add(list(integration.check(registry.context(integration, config, renderer))))
    return report


def _store(config: Config, report: Report) -> Store | None:
    """The store opened for reading what check needs from it, or None (said in `report`)."""
    absent = missing_store(config)
    if absent is not None:  # said, never created: the daemon creates it
        report.passed.append(f"store: {absent} does not exist yet; `sebridge run` creates it")
        return None
    store = None
    try:
        store = open_store(config)
        store.check_integrity()
    except BridgeError as exc:
        report.problems.append(f"store: {exc}")
        if store is not None:  # opened but corrupt: nothing more to read from it
            store.close()
        return None
    return store


def show(config: Config, report: Report, out: TextIO, *, as_json: bool) -> None:
    """Print the report: for people, or as JSON."""
    if as_json:
        fmt.dump(
            {
                "config": config.redacted(),
                "source": config.source,
                "warnings": list(config.warnings),
                "ok": report.passed,
                "problems": report.problems,
            },
            out,
        )
        return
    print(f"configuration: {config.source}: valid", file=out)
    names = [i.name for i in registry.enabled(config) if i.outbound]
    print(f"sinks: {', '.join(names) or 'none'}", file=out)
    for warning in config.warnings:
        print(f"warning: {warning}", file=out)
    for line in report.passed:
        print(f"ok: {line}", file=out)
    for problem in report.problems:
        print(f"problem: {problem}", file=out)

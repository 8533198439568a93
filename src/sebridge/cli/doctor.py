"""`sebridge check`: what it looks at, and how it says what it found.

Each problem is said once, as one `problem:` line; what passed is an `ok:`
line. Check writes nothing it does not say: a SQLite store that does not
exist yet is reported, not created (the daemon creates it); bringing an
existing store's schema up to date is said when it wrote anything. With
`--send-test`, each enabled integration whose check found no problem posts
one test message (Integration.send_test) and says where it arrived, or
what to fix.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

from sebridge.cli import format as fmt
from sebridge.cli.link_check import check_links
from sebridge.cli.runtime import build_imds, missing_store, open_store, vm_name
from sebridge.config.loader import Config
from sebridge.imds.vm_name import BRIEF_WAIT
from sebridge.integrations import registry
from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.render import Renderer
from sebridge.kernel.errors import BridgeError, ConfigError
from sebridge.kernel.text import visible
from sebridge.store import Store
from sebridge.store.schema import MIGRATIONS

__all__ = ["TEST_TEXT", "Report", "examine", "show"]

TEST_TEXT = "sebridge test message — no action needed (from {vm}: sebridge check --send-test)"


@dataclass
class Report:
    """What check found: lines that passed, and problems (each once)."""

    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)

    def add(self, findings: Sequence[Finding]) -> bool:
        """Keep each finding's line once; whether any was a problem."""
        for finding in findings:
            line = f"{finding.target}: {finding.message}"
            kept = self.passed if finding.ok else self.problems
            if line not in kept:
                kept.append(line)
        return any(not f.ok for f in findings)


def examine(
    config: Config,
    *,
    credentials: str | None = None,
    environment: tuple[str, Sequence[str]] | None = None,
    send_test: bool = False,
    stdout: TextIO | None = None,
) -> Report:
    """Look at the store, the approval links, IMDS's address and each enabled integration.

    Args:
        send_test: then post one test message through each integration that passed.
        stdout: where the console and JSON lines on stdout write their test lines.
    """
    with _libraries_quiet():
        return _examine(config, credentials, environment, send_test, stdout)


def _examine(
    config: Config,
    credentials: str | None,
    environment: tuple[str, Sequence[str]] | None,
    send_test: bool,
    stdout: TextIO | None,
) -> Report:
    report = Report()
    if environment:
        path, names = environment
        report.passed.append(
            f"environment: {', '.join(names)} read from {path},"
            " as the unit's EnvironmentFile= hands them to the service"
        )
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
    vm = config.imds.vm_name
    try:
        build_imds(config).close()
    except ValueError as exc:
        report.problems.append(f"imds: {exc}")
    else:
        vm = _vm_name(config, report)
    renderer = Renderer(config.templates.dir or None)
    passed: list[registry.Instance] = []
    for instance in registry.enabled(config):  # each line names the instance: "slack.dba: ..."
        ctx = registry.context(instance, config, renderer, send_test=send_test)
        failed = report.add(registry.findings(instance, instance.integration.check(ctx)))
        if not failed and instance.outbound:  # a failed one's problem says what to fix
            passed.append(instance)
    if send_test:
        # Never the host name: on a scale set it is not the name Resources list.
        note = TrialNote(TEST_TEXT.format(vm=vm or "a VM whose name is unknown"), vm)
        for instance in passed:
            ctx = registry.context(instance, config, renderer, stdout)
            said = instance.integration.send_test(ctx, note) or [
                Finding(instance.name, True, "no test message: this integration has none")
            ]
            report.add(registry.findings(instance, said))
    return report


@contextmanager
def _libraries_quiet() -> Iterator[None]:
    """Hide libraries' log records below CRITICAL while check looks: their own line
    (slack_sdk's "Failed to send a request") says again what a `problem:` line says
    (docs/ARCHITECTURE.md, "Check"). sebridge's own records still show, and with -v
    (DEBUG) everything does."""
    root = logging.getLogger()
    handlers = [] if root.level <= logging.DEBUG else list(root.handlers)
    for handler in handlers:
        handler.addFilter(_ours_or_critical)
    try:
        yield
    finally:
        for handler in handlers:
            handler.removeFilter(_ours_or_critical)


def _ours_or_critical(record: logging.LogRecord) -> bool:
    ours = record.name == "sebridge" or record.name.startswith("sebridge.")
    return ours or record.levelno >= logging.CRITICAL


def _vm_name(config: Config, report: Report) -> str:
    """This VM's name as `run` learns it (docs/ARCHITECTURE.md, "Agent name"), asked for
    BRIEF_WAIT; "" when IMDS does not say: a problem, as `run` would exit 2."""
    if config.imds.vm_name:
        return config.imds.vm_name
    try:
        name = vm_name(config, wait=BRIEF_WAIT)
    except ConfigError as exc:
        report.problems.append(f"imds.vm_name: not set, and `sebridge run` would exit 2: {exc}")
        return ""
    said = f"this VM's name is {visible(name)} (IMDS's compute name; imds.vm_name is not set)"
    report.passed.append(f"imds: {said}")
    return name


def _store(config: Config, report: Report) -> Store | None:
    """The store opened for reading what check needs from it, or None (said in `report`)."""
    absent = missing_store(config)
    if absent is not None:  # said, never created: the daemon creates it
        report.passed.append(f"store: {absent} does not exist yet; `sebridge run` creates it")
        return None
    store = None
    try:
        store = open_store(config)
        _say_migration(store, report)
        store.check_integrity()
    except BridgeError as exc:
        report.problems.append(f"store: {exc}")
        if store is not None:  # opened but corrupt: nothing more to read from it
            store.close()
        return None
    return store


def _say_migration(store: Store, report: Report) -> None:
    """Opening a store brings its schema up to date: when that wrote anything, say so."""
    was = store.db.migrated_from
    if was is None:
        return
    where = store.db.location
    said = (
        f"created the tables (schema version {len(MIGRATIONS)}) in {where}"
        if was == 0
        else f"moved the schema of {where} from version {was} to {len(MIGRATIONS)}"
    )
    report.passed.append(f"store: {said}, as the daemon does at its start")


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
    names = registry.sink_names(config)
    print(f"sinks: {', '.join(names) or 'none'}", file=out)
    for warning in config.warnings:
        print(f"warning: {warning}", file=out)
    for line in report.passed:
        print(f"ok: {line}", file=out)
    for problem in report.problems:
        print(f"problem: {problem}", file=out)

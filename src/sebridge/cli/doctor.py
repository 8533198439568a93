"""`sebridge check`: what it looks at, and how it says what it found.

Each problem is said once, as one `problem:` line naming the key to look at;
what passed is an `ok:` line; what is worth a look but may be meant is a
`warning:` line. Check writes nothing it does not say: a SQLite store that
does not exist yet is reported, not created (the daemon creates it);
bringing an existing store's schema up to date is said when it wrote
anything. The checks that reach out (the store, IMDS, each integration, and
with `--send-test` each integration's one test message, Integration.send_test)
run side by side under one deadline (`--timeout`, cli/side_by_side.py): one
still running then is a problem line naming its key. See docs/ARCHITECTURE.md,
"Check".
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TextIO

from sebridge.cli import format as fmt
from sebridge.cli.imds_check import Caution, check_imds
from sebridge.cli.link_check import check_links
from sebridge.cli.runtime import missing_store, open_store, template_problems
from sebridge.cli.side_by_side import SideBySide
from sebridge.config.loader import Config
from sebridge.integrations import registry
from sebridge.integrations.base import Finding, TrialNote
from sebridge.integrations.render import Renderer
from sebridge.kernel.errors import BridgeError
from sebridge.store import Store
from sebridge.store.schema import VERSION

__all__ = ["DEFAULT_TIMEOUT", "TEST_TEXT", "Report", "examine", "show"]

TEST_TEXT = "sebridge test message — no action needed (from {vm}: sebridge check --send-test)"

# How long check waits for all its checks together (`--timeout`): a healthy remote answers
# in well under a second; one that has not answered by then is said, not waited for.
DEFAULT_TIMEOUT = 10.0

Said = Finding | Caution
Say = Callable[[Said], None]


@dataclass
class Report:
    """What check found: lines that passed, warnings and problems (each once)."""

    passed: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)

    def add(self, found: Sequence[Said]) -> bool:
        """Keep each line once; whether any was a problem."""
        for item in found:
            line = f"{item.target}: {item.message}"
            if isinstance(item, Caution):
                kept = self.warnings
            else:
                kept = self.passed if item.ok else self.problems
            if line not in kept:
                kept.append(line)
        return any(isinstance(f, Finding) and not f.ok for f in found)


def examine(
    config: Config,
    *,
    credentials: str | None = None,
    environment: tuple[str, Sequence[str]] | None = None,
    send_test: bool = False,
    stdout: TextIO | None = None,
    timeout: float = DEFAULT_TIMEOUT,
) -> Report:
    """Look at the store, the approval links, IMDS and each enabled integration.

    Args:
        send_test: then post one test message through each integration that passed.
        stdout: where the console and JSON lines on stdout write their test lines.
        timeout: seconds all the checks together may take.
    """
    with _libraries_quiet():
        return _examine(
            config,
            credentials=credentials,
            environment=environment,
            send_test=send_test,
            stdout=stdout,
            timeout=timeout,
        )


def _examine(
    config: Config,
    *,
    credentials: str | None,
    environment: tuple[str, Sequence[str]] | None,
    send_test: bool,
    stdout: TextIO | None,
    timeout: float,
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
    if config.http.probe_listen:
        report.add([_probes(config)])
    # The templates as `run` tries them at its start (local: before the deadline starts).
    report.add([Finding("templates.dir", False, said) for said in template_problems(config)])
    checks: SideBySide[Said] = SideBySide()
    name = _Name()
    checks.add("store.url", lambda say: _check_store(config, say), _failed)

    def imds(say: Say) -> None:
        try:
            check_imds(config, timeout, say, name.set)
        finally:
            name.set("")  # a check that stopped early leaves no test message waiting

    checks.add("imds.endpoint", imds, _failed)
    renderer = Renderer(config.templates.dir or None)
    for instance in registry.enabled(config):  # each line names the instance: "slack.dba: ..."
        reaches = instance.integration.reaches
        checks.add(
            instance.said(reaches) if reaches else instance.name,
            _integration_check(
                instance,
                config,
                renderer=renderer,
                stdout=stdout,
                send_test=send_test,
                name=name,
            ),
            _failed,
        )
    for outcome in checks.run(timeout):
        report.add(outcome.said)
        if not outcome.finished:
            report.add([Finding(outcome.key, False, _no_answer(outcome.key, timeout))])
    return report


def _no_answer(key: str, timeout: float) -> str:
    said = f"no answer within {timeout:g} s (check's --timeout)"
    if key == "imds.endpoint":  # IMDS's first request on a VM starts the service
        said += (
            "; IMDS's first Scheduled Events request on a VM may take up to 2 minutes:"
            " try --timeout 120"
        )
    return said


def _failed(key: str, exc: BaseException) -> Said:
    """A check that raised (none should): said as a problem of its key. A BridgeError's
    text is written for people; any other exception's text may quote a secret: its type."""
    if isinstance(exc, BridgeError):
        return Finding(key, False, str(exc))
    said = f"the check stopped on an unexpected {type(exc).__name__} (a bug: please report it)"
    return Finding(key, False, said)


class _Name:
    """This VM's name, told by the IMDS check, waited for by the test messages (their
    text names it). The first value told stays."""

    def __init__(self) -> None:
        self._known = threading.Event()
        self._value = ""

    def set(self, name: str) -> None:
        if not self._known.is_set():
            self._value = name
            self._known.set()

    def wait(self) -> str:
        self._known.wait()  # the IMDS check tells it within half of check's deadline
        return self._value


def _integration_check(
    instance: registry.Instance,
    config: Config,
    *,
    renderer: Renderer,
    stdout: TextIO | None,
    send_test: bool,
    name: _Name,
) -> Callable[[Say], None]:
    """The instance's checks; with `send_test`, then its test message when they passed
    (a failed one's problem says what to fix). Each finding names the instance."""
    integration = instance.integration

    def run(say: Say) -> None:
        ctx = registry.context(instance, config, renderer, send_test=send_test)
        found = registry.findings(instance, integration.check(ctx))
        for finding in found:
            say(finding)
        if not send_test or not instance.outbound or any(not f.ok for f in found):
            return
        vm = name.wait()
        # Never the host name: on a scale set it is not the name Resources list.
        note = TrialNote(TEST_TEXT.format(vm=vm or "a VM whose name is unknown"), vm)
        ctx = registry.context(instance, config, renderer, stdout)
        said = integration.send_test(ctx, note) or [
            Finding(instance.name, True, "no test message: this integration has none")
        ]
        for finding in registry.findings(instance, said):
            say(finding)

    return run


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


def _probes(config: Config) -> Finding:
    """Where the probe listener answers, apart from the traffic port."""
    http = config.http
    return Finding(
        "http.probe_listen",
        True,
        f"probes answer on {http.probe_listen} (/livez, /readyz, /healthz), on a server of"
        f" their own beside {http.listen}",
    )


def _ours_or_critical(record: logging.LogRecord) -> bool:
    ours = record.name == "sebridge" or record.name.startswith("sebridge.")
    return ours or record.levelno >= logging.CRITICAL


def _check_store(config: Config, say: Say) -> None:
    """The store, and the approval links (their key may be kept in it)."""
    store = _store(config, say)
    try:
        for finding in check_links(config, store):
            say(finding)
    finally:
        if store is not None:
            store.close()


def _store(config: Config, say: Say) -> Store | None:
    """The store opened for reading what check needs from it, or None (said)."""
    absent = missing_store(config)
    if absent is not None:  # said, never created: the daemon creates it
        say(Finding("store", True, f"{absent} does not exist yet; `sebridge run` creates it"))
        return None
    store = None
    try:
        store = open_store(config)
        _say_migration(store, say)
        store.check_integrity()
    except BridgeError as exc:
        say(Finding("store", False, str(exc)))
        if store is not None:  # opened but corrupt: nothing more to read from it
            store.close()
        return None
    return store


def _say_migration(store: Store, say: Say) -> None:
    """Opening a store brings its schema up to date: when that wrote anything, say so."""
    was = store.migrated_from
    if was is None:
        return
    where = store.location
    said = (
        f"created the tables (schema version {VERSION}) in {where}"
        if was == 0
        else f"moved the schema of {where} from version {was} to {VERSION}"
    )
    say(Finding("store", True, f"{said}, as the daemon does at its start"))


def show(config: Config, report: Report, out: TextIO, *, as_json: bool) -> None:
    """Print the report: for people, or as JSON."""
    if as_json:
        fmt.dump(
            {
                "config": config.redacted(),
                "source": config.source,
                "warnings": [*config.warnings, *report.warnings],
                "ok": report.passed,
                "problems": report.problems,
            },
            out,
        )
        return
    print(f"configuration: {config.source}: valid", file=out)
    names = registry.sink_names(config)
    print(f"sinks: {', '.join(names) or 'none'}", file=out)
    for warning in [*config.warnings, *report.warnings]:
        print(f"warning: {warning}", file=out)
    for line in report.passed:
        print(f"ok: {line}", file=out)
    for problem in report.problems:
        print(f"problem: {problem}", file=out)

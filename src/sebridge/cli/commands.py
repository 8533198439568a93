"""The commands that run the daemon or look at its setup: `run`, `once`, `check` (the
commands that read the store are cli/reading.py; `approve` is cli/approve.py; the exit
codes cli/exits.py)."""

from __future__ import annotations

import logging
import sys
from collections.abc import Sequence
from typing import TextIO

from sebridge.cli.exits import FAILED, OK
from sebridge.cli.runtime import (
    build_daemon,
    build_runner,
)
from sebridge.config.loader import Config
from sebridge.engine.stop_signals import stop_signals_exit
from sebridge.kernel.errors import BridgeError

__all__ = ["check", "once", "run"]

log = logging.getLogger("sebridge.config")


def run(config: Config) -> int:
    """The daemon, until SIGTERM/SIGINT."""
    _say_warnings(config)
    with stop_signals_exit():  # building waits for IMDS to say this VM's name
        runner = build_runner(config)
    daemon = runner.daemon
    try:
        daemon.store.check_integrity()
    except BridgeError:
        daemon.imds.close()
        daemon.store.close()
        raise
    return runner.run()


def _say_warnings(config: Config) -> None:
    """What `check` says as "warning:", once at start: a daemon started without `check`
    must still tell that a hook never runs or a rule never matches."""
    for warning in config.warnings:
        log.warning("%s", warning)


def once(config: Config, *, as_json: bool, out: TextIO | None = None) -> int:
    """One tick, then deliver what it produced (bounded by the shutdown grace)."""
    from sebridge.cli import format as fmt  # the commands that print alone load it

    out = out or sys.stdout
    _say_warnings(config)
    daemon = build_daemon(config, stdout=sys.stderr if as_json else None)
    try:
        daemon.take_back_claims()
        result = daemon.tick()
        dispatcher = daemon.parts.dispatcher
        dispatcher.start()
        # Delivers what is due within the grace (its flush), then stops its workers.
        dispatcher.stop(timeout=config.dispatch.shutdown_grace_seconds + 1.0)
    finally:
        daemon.imds.close()
        daemon.store.close()
    if as_json:
        fmt.dump(
            {
                "polled": result.polled,
                "error": result.error,
                "transitions": [
                    {"kind": t.kind, "event_id": t.event_id, "event_type": t.event.event_type}
                    for t in result.transitions
                ],
                "approvals_done": result.approvals_done,
            },
            out,
        )
    elif result.error:
        print(f"sebridge: {result.error}", file=sys.stderr)
    return OK if result.polled else FAILED


def check(
    config: Config,
    *,
    as_json: bool,
    out: TextIO | None = None,
    credentials: str | None = None,
    environment: tuple[str, Sequence[str]] | None = None,
    send_test: bool = False,
    timeout: float | None = None,
) -> int:
    """Validate the configuration (done by loading it), look at the store, IMDS and each
    sink (cli/doctor.py).

    Args:
        credentials: the folder the unit's secrets were read from, when check read them
            there itself (config/unit_credentials.py).
        environment: the unit's environment file and the variables read from it
            (config/unit_environment.py).
        send_test: post one test message to each channel that passed.
        timeout: seconds the checks may take together (doctor.DEFAULT_TIMEOUT).
    """
    out = out or sys.stdout
    # With --json, stdout is the report's: the console's test line goes to stderr.
    lines = sys.stderr if as_json else out
    from sebridge.cli import doctor  # `check` alone needs it

    report = doctor.examine(
        config,
        credentials=credentials,
        environment=environment,
        send_test=send_test,
        stdout=lines,
        timeout=doctor.DEFAULT_TIMEOUT if timeout is None else timeout,
    )
    doctor.show(config, report, out, as_json=as_json)
    return FAILED if report.problems else OK

"""The `sebridge` command: parse argv, load the config, call one function."""

from __future__ import annotations

import argparse
import os
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import TYPE_CHECKING

from sebridge import __version__
from sebridge.cli.exits import INTERRUPTED, OUTPUT_GONE
from sebridge.config.unit_credentials import FOLDER as CREDENTIALS_FOLDER
from sebridge.config.unit_credentials import UnitCredentials
from sebridge.config.unit_environment import FILE as ENVIRONMENT_FILE
from sebridge.config.unit_environment import UnitEnvironment, beside_config

if TYPE_CHECKING:
    from sebridge.config.loader import Config

__all__ = ["build_parser", "main"]

USAGE_ERROR = 2


def main(argv: Sequence[str] | None = None) -> int:
    """Run the sebridge command line; returns the process exit code."""
    parser = build_parser()
    args = parser.parse_args(argv)
    if args.command is None:
        parser.print_help(sys.stderr)
        return USAGE_ERROR
    run: Callable[[argparse.Namespace], int] = args.run
    try:
        return run(args)
    except KeyboardInterrupt:
        return INTERRUPTED
    except BrokenPipeError:
        # stdout's reader went away (`sebridge events | head`): not an error worth a
        # traceback; point stdout at devnull so the exit-time flush is quiet too.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return OUTPUT_GONE


def build_parser() -> argparse.ArgumentParser:
    """The whole command line: every command, subcommand and option (scripts/reference.py
    writes docs/reference/cli.md from it)."""
    parser = argparse.ArgumentParser(
        prog="sebridge",
        description="Azure Scheduled Events to Slack, Teams and Jira, with approvals back to IMDS.",
    )
    parser.add_argument("--version", action="version", version=f"sebridge {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument(
        "--config",
        metavar="FILE",
        help="config file (default: $SEBRIDGE_CONFIG, else /etc/sebridge/sebridge.toml)",
    )
    common.add_argument("-v", "--verbose", action="store_true", help="debug logging")
    # Every command but `run` (the service gets it from systemd): config/unit_environment.py.
    shell = argparse.ArgumentParser(add_help=False, parents=[common])
    shell.add_argument(
        "--environment",
        metavar="FILE",
        help="read the variables the unit's EnvironmentFile= gives the service, those your "
        "shell lacks, from FILE (default: `environment` beside the config file, "
        f"{ENVIRONMENT_FILE} as installed; skipped when absent)",
    )
    as_json = argparse.ArgumentParser(add_help=False)
    as_json.add_argument("--json", action="store_true", help="machine-readable output")
    commands = parser.add_subparsers(dest="command", metavar="COMMAND")

    def command(
        name: str, help_text: str, *parents: argparse.ArgumentParser, exits: str = ""
    ) -> argparse.ArgumentParser:
        """A command; `exits`: its exit codes, for its --help (and the CLI reference)."""
        described = f"{help_text}. {exits}" if exits else help_text
        return commands.add_parser(
            name, help=help_text, description=described, parents=list(parents)
        )

    command("run", "run the daemon: poll IMDS, notify, carry out approvals", common).set_defaults(
        run=_with_config(lambda cmd, c, a: cmd.run(c), unit_environment=False)
    )
    command(
        "once",
        "one tick: poll, record, deliver, approve; then exit",
        shell,
        as_json,
        exits="Exit 0 when IMDS answered; 1 when it did not.",
    ).set_defaults(run=_with_config(lambda cmd, c, a: cmd.once(c, as_json=a.json)))
    events = command("events", "current events and their state", shell, as_json)
    events.add_argument("--all", action="store_true", help="also events gone in the last day")
    events.set_defaults(run=_with_config(_events, secrets=False))
    approve = command(
        "approve",
        "approve an event: IMDS may start it now",
        shell,
        as_json,
        exits="Exit 0 carried out (dry run: would be); 1 the store or IMDS failed; 3 refused "
        "(unknown, gone, started, already approved); 4 held, or still waiting at the deadline: "
        "recorded, not carried out.",
    )
    approve.add_argument("event_id", metavar="EVENT_ID")
    approve.add_argument("--as", dest="actor", help="who approves (default: your user name)")
    approve.add_argument(
        "--anyway",
        action="store_true",
        help="carry it out despite failed or unfinished prepare hooks (held or waiting)",
    )
    approve.add_argument(
        "--wait",
        type=_wait,
        default=10.0,
        metavar="SECONDS",
        help='how long to wait for the outcome while prepare hooks run (10; "30s", "5m")',
    )
    approve.set_defaults(
        run=_with_config(
            _approve,
            secrets=False,
        )
    )
    history = command(
        "history",
        "transitions, deliveries and approvals, oldest first",
        shell,
        as_json,
        exits="Exit 0; 1 for an EVENT_ID sebridge has not seen.",
    )
    history.add_argument("event_id", nargs="?", metavar="EVENT_ID", help="only this event")
    history.add_argument(
        "--limit",
        type=_count,
        default=100,
        metavar="N",
        help="show the newest N transitions and refused actions (default 100); history says "
        "when there are more",
    )
    history.set_defaults(
        run=_with_config(
            _history,
            secrets=False,
        )
    )
    check = command(
        "check",
        "validate the configuration and open the store",
        shell,
        as_json,
        exits="Exit 0 when every check passed; 1 when one found a problem; 2 when the "
        "configuration is invalid.",
    )
    check.add_argument(
        "--credentials",
        metavar="DIR",
        default=CREDENTIALS_FOLDER,
        help="outside the service (CREDENTIALS_DIRECTORY unset), read the unit's "
        "${CREDENTIALS_DIRECTORY}/sebridge_NAME secrets as DIR/NAME "
        f"(default: {CREDENTIALS_FOLDER})",
    )
    check.add_argument(
        "--send-test",
        action="store_true",
        help="post one test message to each configured channel and say where it arrived",
    )
    check.add_argument(
        "--timeout",
        type=_seconds,
        default=10.0,
        metavar="SECONDS",
        help="how long the checks (which run side by side) may take together; one still "
        "waiting for an answer then is a problem (10)",
    )
    check.set_defaults(
        run=_with_config(
            lambda cmd, c, a: cmd.check(
                c,
                as_json=a.json,
                credentials=a.credentials_read,
                environment=(a.environment, a.environment_read) if a.environment_read else None,
                send_test=a.send_test,
                timeout=a.timeout,
            ),
            unit_credentials=True,
        )
    )

    _hooks_parser(
        command("hooks", "readiness hooks: run an event's failed prepare hooks again"),
        shell,
        as_json,
    )

    _policy_parser(
        command("policy", "the policy's rules: which one decides an event, and why"),
        shell,
        as_json,
    )

    command(
        "calendar-url",
        "the fleet calendar feed's URL ([web] page), for a team calendar to subscribe to",
        shell,
        exits="Exit 0 printed; 1 the store failed; 2 [web] page is off or [http] public_url "
        "is empty.",
    ).set_defaults(run=_with_config(_calendar_url))

    simulate = command("simulate", "run the IMDS Scheduled Events simulator (test drain logic)")
    simulate.add_argument("--host", default="127.0.0.1", help="address to bind (127.0.0.1)")
    simulate.add_argument("--port", type=int, default=8080, help="port (8080; 0 = any free)")
    simulate.add_argument("--scenario", type=Path, help="TOML or JSON file of events to play")
    simulate.add_argument("--time-scale", type=float, help="run X times faster than real time")
    simulate.add_argument("--vm-name", help="this VM's name (vm0)")
    simulate.add_argument(
        "--tag",
        action="append",
        metavar="NAME=VALUE",
        help="an Azure tag of the VM, in its instance metadata (repeatable)",
    )
    simulate.set_defaults(run=_simulate)

    demo = command("demo", "simulator + daemon + console: the whole flow, no accounts needed")
    demo.add_argument("--time-scale", type=float, default=60.0, help="speed-up (60)")
    demo.add_argument("--yes", action="store_true", help="approve the Redeploy without asking")
    demo.set_defaults(run=_demo)
    return parser


def _seconds(text: str) -> float:
    """A positive, finite number of seconds (argparse's type for --timeout)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number of seconds, got {text!r}") from None
    if not 0 < value < float("inf"):
        raise argparse.ArgumentTypeError(f"must be a positive number of seconds, got {text!r}")
    return value


def _count(text: str) -> int:
    """A positive whole number (argparse's type for history's --limit)."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a whole number, got {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be 1 or more, got {text!r}")
    return value


def _wait(text: str) -> float:
    """Seconds to wait, 0 or more, as a number or a duration ("30s", "5m"): `approve --wait`."""
    from sebridge.config.durations import parse_duration

    try:
        value = float(text)
    except ValueError:
        try:
            value = parse_duration(text)
        except ValueError as exc:
            raise argparse.ArgumentTypeError(str(exc)) from None
    if not 0 <= value <= 86400:
        raise argparse.ArgumentTypeError(f"must be 0 to 86400 seconds (a day), got {text!r}")
    return value


def _with_config(
    command: Callable[..., int],
    *,
    secrets: bool = True,
    unit_credentials: bool = False,
    unit_environment: bool = True,
) -> Callable[[argparse.Namespace], int]:
    """Load the config, then run `command`.

    Args:
        secrets: False for a command that sends nothing: secrets are not read, so
            `events`, `history` and `approve` work where only the service has them.
        unit_credentials: read the unit's credentials from their folder when
            CREDENTIALS_DIRECTORY is unset (`check`; config/unit_credentials.py).
        unit_environment: read the variables the unit's EnvironmentFile= gives the
            service that the shell lacks (every command but `run`;
            config/unit_environment.py).
    """

    def run(args: argparse.Namespace) -> int:
        from sebridge.cli.runtime import configure_logging
        from sebridge.integrations.registry import load_config as load
        from sebridge.kernel.errors import BridgeError, ConfigError

        environ: Mapping[str, str] = os.environ
        locate = None
        args.credentials_read = None
        args.environment_read = []
        try:
            if unit_environment:
                args.environment = args.environment or beside_config(args.config, environ)
                unit_env = UnitEnvironment(args.environment)
                environ, args.environment_read = unit_env.environ(environ)
        except ConfigError as exc:
            print(f"sebridge: configuration error: {exc}", file=sys.stderr)
            return USAGE_ERROR
        if unit_credentials and UnitCredentials(args.credentials).applies(environ):
            unit = UnitCredentials(args.credentials)
            environ, locate, args.credentials_read = unit.environ(environ), unit.locate, unit.folder
        try:
            config = load(args.config, environ=environ, read_secrets=secrets, locate=locate)
        except ConfigError as exc:
            print(f"sebridge: configuration error: {exc}", file=sys.stderr)
            return USAGE_ERROR
        configure_logging(config, verbose=args.verbose)
        # Imported only now, so `--help` and `simulate` stay fast.
        from sebridge.cli import commands

        try:
            return command(commands, config, args)
        except ConfigError as exc:  # found while building (a broken template)
            print(f"sebridge: configuration error: {exc}", file=sys.stderr)
            return USAGE_ERROR
        except BridgeError as exc:
            print(f"sebridge: {exc}", file=sys.stderr)
            return 1

    return run


def _policy_parser(
    policy: argparse.ArgumentParser,
    shell: argparse.ArgumentParser,
    as_json: argparse.ArgumentParser,
) -> None:
    """`sebridge policy explain`."""
    policy_commands = policy.add_subparsers(
        dest="policy_command", metavar="SUBCOMMAND", required=True
    )
    explain = policy_commands.add_parser(
        "explain",
        help="the decision recorded for an event, and why: which rule matched, why earlier"
        " ones did not",
        description="For an event in the store: the decision recorded when it was first "
        "seen (which rule, which action), explained as of that moment (--now: as of now). "
        "For an event from a file: which rule matches it now. Each rule looked at says why "
        "it did or did not match. Exit 0; 2 on bad input.",
        parents=[shell, as_json],
    )
    explain.add_argument("event_id", nargs="?", metavar="EVENT_ID", help="an event in the store")
    explain.add_argument(
        "--event",
        dest="event_file",
        type=Path,
        metavar="FILE.json",
        help="one event object as IMDS sends it, or a Scheduled Events document with one event",
    )
    explain.add_argument("--vm-name", help="this VM's name (default: [imds] vm_name, else learnt)")
    moment = explain.add_mutually_exclusive_group()
    moment.add_argument(
        "--at",
        metavar="TIME",
        help="evaluate at this ISO 8601 time (default: when the event was first seen; "
        "from a file: now)",
    )
    moment.add_argument(
        "--now",
        action="store_true",
        help="evaluate the event as it is now, at this moment, not as first seen",
    )
    explain.set_defaults(run=_with_config(_policy_explain, secrets=False))


def _hooks_parser(hooks: argparse.ArgumentParser, *parents: argparse.ArgumentParser) -> None:
    """`sebridge hooks retry` (cli/hooks.py)."""
    hooks_commands = hooks.add_subparsers(dest="hooks_command", metavar="SUBCOMMAND", required=True)
    retry = hooks_commands.add_parser(
        "retry",
        help="run an event's failed prepare hooks again, on every VM where they failed",
        description="Run an event's failed prepare hooks again on every VM where they "
        "failed (each VM's daemon picks the request up from the store); a held approval "
        "is carried out once they succeed. Exit 0 requested, 1 the store failed, 3 refused "
        "(unknown, gone or started event, no failed prepare hook).",
        parents=list(parents),
    )
    retry.add_argument("event_id", metavar="EVENT_ID")
    retry.add_argument("--as", dest="actor", help="who asks (default: your user name)")
    retry.set_defaults(run=_with_config(_hooks_retry, secrets=False))


def _events(_commands: object, config: Config, args: argparse.Namespace) -> int:
    from sebridge.cli.reading import events

    return events(config, as_json=args.json, show_all=args.all)


def _history(_commands: object, config: Config, args: argparse.Namespace) -> int:
    from sebridge.cli.reading import history

    return history(config, event_id=args.event_id, limit=args.limit, as_json=args.json)


def _approve(_commands: object, config: Config, args: argparse.Namespace) -> int:
    from sebridge.cli.approve import approve

    return approve(
        config,
        args.event_id,
        actor=args.actor,
        as_json=args.json,
        anyway=args.anyway,
        wait=args.wait,
    )


def _hooks_retry(_commands: object, config: Config, args: argparse.Namespace) -> int:
    from sebridge.cli.hooks import retry

    return retry(config, args.event_id, actor=args.actor, as_json=args.json)


def _policy_explain(_commands: object, config: Config, args: argparse.Namespace) -> int:
    from sebridge.cli.policy import explain

    return explain(
        config,
        event_id=args.event_id,
        event_file=args.event_file,
        vm_name=args.vm_name,
        at=args.at,
        now=args.now,
        as_json=args.json,
    )


def _calendar_url(_commands: object, config: Config, _args: argparse.Namespace) -> int:
    from sebridge.cli.calendar import calendar_url

    return calendar_url(config)


def _simulate(args: argparse.Namespace) -> int:
    from sebridge.imds.simulator import serve

    return serve(
        host=args.host,
        port=args.port,
        scenario_path=args.scenario,
        time_scale=args.time_scale,
        vm_name=args.vm_name,
        tags=dict(t.partition("=")[::2] for t in args.tag) if args.tag else None,
    )


def _demo(args: argparse.Namespace) -> int:
    from sebridge.cli.demo import run_demo

    return run_demo(time_scale=args.time_scale, assume_yes=args.yes)

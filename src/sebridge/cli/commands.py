"""What each `sebridge` subcommand does, given a loaded Config.

Exit codes: 0 done; 1 something failed at run time (IMDS, store); 2 bad
usage or configuration; 3 an approval was refused (unknown, gone, started, already
approved); 4 an approval was recorded and held (waiting for readiness, held by a
failed hook, or not carried out yet).
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable, Sequence
from datetime import datetime, timedelta
from typing import TextIO

from sebridge.approval.request import ApprovalRequest, Outcome
from sebridge.cli.runtime import (
    build_daemon,
    build_desk,
    build_imds,
    build_runner,
    missing_store,
    open_store,
)
from sebridge.config.loader import Config
from sebridge.engine.runner import stop_signals_exit
from sebridge.hooks.readiness import readiness
from sebridge.integrations.registry import load_config
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import BridgeError, ConfigError
from sebridge.kernel.text import visible
from sebridge.model import ScheduledEvent
from sebridge.model.approval import ApprovalState, OutcomeKind
from sebridge.model.outlook import not_ready, ways_out
from sebridge.model.readiness import VmReadiness
from sebridge.store import ApprovalRecord, EventRecord, Store

__all__ = ["approve", "check", "events", "history", "once", "run"]

OK, FAILED, USAGE, REFUSED, HELD = 0, 1, 2, 3, 4
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
        daemon.dispatcher.start()
        # Delivers what is due within the grace (its flush), then stops its workers.
        daemon.dispatcher.stop(timeout=config.dispatch.shutdown_grace_seconds + 1.0)
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


def events(config: Config, *, as_json: bool, show_all: bool, out: TextIO | None = None) -> int:
    """The events in the latest document (and, with --all, those gone in the last day)."""
    from sebridge.cli import format as fmt  # the commands that print alone load it

    out = out or sys.stdout
    if missing_store(config) is not None:  # looked at, never created
        print("[]" if as_json else f"no events: {_not_yet(config)}", file=out)
        return OK
    store = open_store(config, migrate=False)  # reads: an older schema is refused, not moved
    now = utcnow()
    try:
        records = store.events(include_gone_since=now - timedelta(days=1) if show_all else None)
        polled = store.polled()
        vms = _readiness(store, records, now, config)
        link = _approval_link(config, store)
    finally:
        store.close()
    later = {r.event.event_id: fmt.next_of(r, vms.get(r.event.event_id, ()), now) for r in records}
    if as_json:
        fmt.dump(
            [
                fmt.event_json(
                    r,
                    later=later[r.event.event_id],
                    not_ready=not_ready(vms.get(r.event.event_id, ())),
                    approve_url=link(r.event) if link else None,
                )
                for r in records
            ],
            out,
        )
        return OK
    if not records:
        said = (
            "no events (IMDS's latest document is empty)"
            if polled
            else "no events: sebridge has not polled IMDS yet (is `sebridge run` running?)"
        )
        print(said, file=out)
        return OK
    rows = [
        [
            r.event.event_id,
            r.event.event_type,
            r.state if r.present else f"{r.state} (gone)",
            fmt.when(r, now),
            r.event.source or "-",
            ",".join(r.event.resources) or "-",
            r.policy,
            f"{r.approval.actor} ({r.approval.state})" if r.approval else "-",
            " ".join(f"{d.sink}:{d.state}" for d in r.deliveries) or "-",
        ]
        for r in records
    ]
    head = [
        "EVENT ID",
        "TYPE",
        "STATE",
        "NOT BEFORE",
        "SOURCE",
        "RESOURCES",
        "POLICY",
        "APPROVED BY",
        "DELIVERIES",
    ]
    fmt.table(head, rows, out)
    for r in records:
        if later[r.event.event_id].held:
            for line in fmt.held_lines(r, later[r.event.event_id]):
                print(line, file=out)
        for d in r.deliveries:
            if d.state == "failed":
                print(visible(f"! {r.event.event_id} {d.sink}: {d.last_error}"), file=out)
    return OK


def approve(
    config: Config,
    event_id: str,
    *,
    actor: str | None,
    as_json: bool,
    anyway: bool = False,
    out: TextIO | None = None,
) -> int:
    """Approve an event and show what became of it: the daemon carries it out (or this
    process, when no daemon holds the store); the daemon retries a POST that failed.
    `anyway`: despite failed or unfinished prepare hooks. Exit: 0 carried out (dry run:
    would be), 1 IMDS or the store failed, 3 refused, 4 held (the line says which)."""
    import getpass

    from sebridge.cli import format as fmt  # the commands that print alone load it

    out = out or sys.stdout
    who = actor or os.environ.get("SUDO_USER") or getpass.getuser()
    if missing_store(config) is not None:
        print(
            visible(f"sebridge: approval refused: unknown event {event_id}: {_not_yet(config)}"),
            file=sys.stderr,
        )
        return REFUSED
    imds = build_imds(config)
    try:
        desk, store = build_desk(config, imds)
    except BaseException:
        imds.close()
        raise
    try:
        request = ApprovalRequest(_as_stored(store, event_id), who, "cli", anyway=anyway)
        outcome = desk.request(request)
        if outcome.approval is None:  # refused before anything was recorded
            # Kept beside Slack's refused clicks: `sebridge history` shows both.
            desk.refuse(request, outcome.reason)
    finally:
        imds.close()
        store.close()
    final = outcome.approval
    if final is None:
        print(visible(f"sebridge: approval refused: {outcome.reason}"), file=sys.stderr)
        return REFUSED
    new = outcome.kind != OutcomeKind.ALREADY
    if as_json:
        fmt.dump(
            {
                "event_id": final.event_id,
                "actor": final.actor,
                "via": final.via,
                "state": final.state,
                "new": new,
                "error": final.last_error,
                "anyway_by": final.anyway_by,
            },
            out,
        )
    else:
        # IMDS's text as `events` shows it: no terminal escape or line break acts here.
        print(visible(_approval_line(final, outcome, new=new, asked_by=who)), file=out)
    return _exit_code(outcome, final)


def _exit_code(outcome: Outcome, final: ApprovalRecord) -> int:
    """0 carried out (dry run: would be); 1 IMDS refused it or did not answer; 3 refused
    (already approved, or the event went first); 4 held: recorded, not carried out (waiting
    for readiness, held by a failed hook, or no agent carried it out yet)."""
    if outcome.kind == OutcomeKind.APPROVED:
        return OK
    if outcome.kind == OutcomeKind.ALREADY or final.state == ApprovalState.ABANDONED:
        return REFUSED
    unanswered = final.last_error is not None and final.state == ApprovalState.PENDING
    if final.state == ApprovalState.FAILED or unanswered:  # IMDS refused, or did not answer
        return FAILED
    return HELD


def _readiness(
    store: Store, records: list[EventRecord], now: datetime, config: Config
) -> dict[str, tuple[VmReadiness, ...]]:
    """Each listed VM's readiness, by event, for the events whose rule names prepare hooks
    (what the daemon's messages show: hooks/readiness.py)."""
    with_hooks = [r for r in records if r.decision.prepare and r.present]
    if not with_hooks:
        return {}
    from sebridge.hooks.agent import timeouts

    live = store.live_agents(now)
    return {
        r.event.event_id: readiness(
            r.event,
            r.decision.prepare,
            store.hook_runs(r.event.event_id),
            live=live,
            now=now,
            timeout_of=timeouts(config.hooks),
            dry_run=config.policy.dry_run,
        ).vms
        for r in with_hooks
    }


def _approval_link(config: Config, store: Store) -> Callable[[ScheduledEvent], str] | None:
    """Each event's approval link, when links are on (`[http] public_url`) and their key
    is known: `link_secret`, or the one the daemon generated and kept in the store (never
    made here). `events` loads no secrets (it works where only the service can read
    them), so a configured `link_secret` is read now, with the config's other secrets;
    when this user cannot read them, there is no link (the command still works)."""
    if not config.http.public_url:
        return None
    from sebridge.web.links import LINK_KEY_SETTING, LinkSigner, approval_link  # links on

    secret = config.http.link_secret
    if secret.is_unread:
        try:
            secret = load_config(config.source).http.link_secret
        except ConfigError:
            return None
    key = secret.reveal() or store.setting(LINK_KEY_SETTING)
    return approval_link(config.http.public_url, LinkSigner(key)) if key else None


def _as_stored(store: Store, typed: str) -> str:
    """The event id as stored, when `typed` is how `events` showed it (escaped: an id
    holding a control or a line break); else `typed` as it is."""
    if store.event(typed) is not None:
        return typed
    shown = [r.event.event_id for r in store.events() if visible(r.event.event_id) == typed]
    return shown[0] if len(shown) == 1 else typed


def _approval_line(final: ApprovalRecord, outcome: Outcome, *, new: bool, asked_by: str) -> str:
    """What `sebridge approve` says of the approval it made (or found)."""
    event_id, who = final.event_id, final.actor
    if final.state in (ApprovalState.HELD, ApprovalState.WAITING):  # readiness hooks
        first = "" if who == asked_by else f" (approved by {who} first)"
        out = ways_out(event_id, held=final.state == ApprovalState.HELD)
        return f"approval of {event_id} by {asked_by}: {outcome.reason}{first}. {out}"
    if not new:
        if final.anyway_by is not None and final.anyway_by != who:
            who = f"{who}, approved anyway by {final.anyway_by}"
        return f"{event_id} was already approved by {who} ({final.state})"
    anyway = " anyway" if final.anyway_by is not None else ""
    if final.anyway_by is not None:
        who = final.anyway_by
    if final.state == ApprovalState.POSTED:
        return f"approved {event_id}{anyway} as {who}: StartRequests sent to IMDS"
    if final.state == ApprovalState.DRY_RUN:
        return (
            f"would approve {event_id}{anyway} as {who}: dry run (policy.dry_run), "
            "nothing sent to IMDS"
        )
    if outcome.kind == OutcomeKind.REFUSED:  # IMDS refused it, or the event went first
        why = outcome.reason
    elif final.last_error is None:  # this VM's IMDS does not list it: a daemon's that does POSTs
        why = "a daemon whose IMDS lists the event sends StartRequests"
    else:
        why = f"{final.last_error}; the daemon retries it"
    return f"approval of {event_id}{anyway} recorded ({final.state}): {why}"


def history(
    config: Config, *, event_id: str | None, limit: int, as_json: bool, out: TextIO | None = None
) -> int:
    """Transitions with their deliveries and refused actions, in time order, oldest first."""
    from sebridge.cli import format as fmt  # the commands that print alone load it

    out = out or sys.stdout
    if missing_store(config) is not None:
        if event_id is not None:
            print(f"sebridge: unknown event {event_id}: {_not_yet(config)}", file=sys.stderr)
            return FAILED
        print("[]" if as_json else f"no history yet: {_not_yet(config)}", file=out)
        return OK
    store = open_store(config, migrate=False)
    try:
        known = event_id is None or store.event(event_id) is not None
        entries = store.history(event_id=event_id, limit=limit)
        audit = store.audit_entries(event_id=event_id, limit=limit)
    finally:
        store.close()
    if not known:
        print(
            f"sebridge: unknown event {event_id}: sebridge has not seen it in any IMDS document "
            "(see `sebridge events --all`)",
            file=sys.stderr,
        )
        return FAILED
    if as_json:
        fmt.dump([fmt.history_json(e) for e in entries], out)
        return OK
    for line in fmt.history_lines(entries, audit):
        print(line, file=out)
    if not entries and not audit:
        print("no history yet", file=out)
    return OK


def _not_yet(config: Config) -> str:
    return (
        f"sebridge has not polled IMDS yet: there is no store at {missing_store(config)}"
        " (is `sebridge run` running?)"
    )


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

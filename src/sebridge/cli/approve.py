"""`sebridge approve`: approve an event from a shell, and say what became of it.

The daemon carries the approval out (this process does when no daemon holds the
store); the command waits for the outcome up to `--wait` seconds (10), the prepare
hooks' run included, and exits 0 carried out, 1 IMDS or the store failed, 3 refused,
4 held or still waiting at the deadline, its line saying which (cli/exits.py). See
docs/ARCHITECTURE.md, "Approve".
"""

from __future__ import annotations

import os
import sys
from typing import TextIO

from sebridge.approval.usecase import DEFAULT_WAIT
from sebridge.cli.exits import FAILED, HELD, OK, REFUSED
from sebridge.cli.format import as_stored, not_yet
from sebridge.cli.imds_client import build_imds
from sebridge.cli.runtime import build_desk, missing_store
from sebridge.config.loader import Config
from sebridge.kernel.text import visible
from sebridge.model.approval import ApprovalState, OutcomeKind
from sebridge.model.approval_request import ApprovalRequest, Outcome
from sebridge.model.records import ApprovalRecord
from sebridge.model.wording.outlook import ways_out, ways_out_of

__all__ = ["approve"]

# Recorded, not carried out: held (a failed hook, a silent agent), or still waiting for the
# VMs' prepare hooks when the wait ended.
_NOT_CARRIED_OUT = (ApprovalState.HELD, ApprovalState.WAITING)


def approve(
    config: Config,
    event_id: str,
    *,
    actor: str | None,
    as_json: bool,
    anyway: bool = False,
    wait: float = DEFAULT_WAIT,
    out: TextIO | None = None,
) -> int:
    """Approve an event and show what became of it: the daemon carries it out (or this
    process, when no daemon holds the store); the daemon retries a POST that failed.
    `anyway`: despite failed or unfinished prepare hooks. `wait`: how long to wait for the
    outcome, prepare hooks running included. Exit: 0 carried out (dry run: would be), 1
    IMDS or the store failed, 3 refused, 4 held or still waiting at the deadline (the line
    says which)."""
    import getpass

    from sebridge.cli import format as fmt  # the commands that print alone load it

    out = out or sys.stdout
    who = actor or os.environ.get("SUDO_USER") or getpass.getuser()
    if missing_store(config) is not None:
        why = not_yet(missing_store(config))
        print(
            visible(f"sebridge: approval refused: unknown event {event_id}: {why}"),
            file=sys.stderr,
        )
        return REFUSED
    imds = build_imds(config)
    try:
        desk, store, gate, stop_carrier = build_desk(config, imds)
    except BaseException:
        imds.close()
        raise
    ways = ""
    try:
        request = ApprovalRequest(as_stored(store, event_id), who, "cli", anyway=anyway)
        # A daemon runs the prepare hooks: wait for them. Without one (this process holds
        # the store) none runs here: the wait would change nothing.
        through = not desk.carries
        outcome = desk.request(request, wait=wait, through_readiness=through)
        if outcome.approval is None:  # refused before anything was recorded
            # Kept beside Slack's refused clicks: `sebridge history` shows both.
            desk.refuse(request, outcome.reason)
        elif outcome.record is not None and outcome.approval.state in _NOT_CARRIED_OUT:
            vms = gate.readiness(outcome.record).vms
            held = outcome.approval.state == ApprovalState.HELD
            ways = ways_out_of(outcome.record.event.event_id, vms, held=held)
    finally:
        stop_carrier()
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
        waited = wait if through else None
        line = _approval_line(final, outcome, new=new, asked_by=who, wait=waited, ways=ways)
        print(visible(line), file=out)
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


def _approval_line(
    final: ApprovalRecord,
    outcome: Outcome,
    *,
    new: bool,
    asked_by: str,
    wait: float | None = None,
    ways: str = "",
) -> str:
    """What `sebridge approve` says of the approval it made (or found)."""
    event_id, who = final.event_id, final.actor
    if final.state in _NOT_CARRIED_OUT:  # readiness: held, or still waiting at the deadline
        first = "" if who == asked_by else f" (approved by {who} first)"
        out = ways or ways_out(event_id, held=final.state == ApprovalState.HELD)
        waiting = final.state == ApprovalState.WAITING and wait is not None
        still = f" still waiting after {wait:g} s" if waiting else ""
        return f"approval of {event_id} by {asked_by}{still}: {outcome.reason}{first}. {out}"
    if not new:
        if final.anyway_by is not None and final.anyway_by != who:
            who = f"{who}, approved anyway by {final.anyway_by}"
        return f"{event_id} was already approved by {who} ({final.state})"
    anyway = " anyway" if final.anyway_by is not None else ""
    if final.anyway_by is not None:
        who = final.anyway_by
    if final.state == ApprovalState.POSTED:
        return f"approved {event_id}{anyway} as {who}: StartRequests sent to Azure"
    if final.state == ApprovalState.DRY_RUN:
        return (
            f"would approve {event_id}{anyway} as {who}: dry run (policy.dry_run), "
            "nothing sent to Azure"
        )
    if outcome.kind == OutcomeKind.REFUSED:  # IMDS refused it, or the event went first
        why = outcome.reason
    elif final.last_error is None:  # this VM's IMDS does not list it: a daemon's that does POSTs
        why = "a daemon whose IMDS lists the event sends StartRequests"
    else:
        why = f"{final.last_error}; the daemon retries it"
    return f"approval of {event_id}{anyway} recorded ({final.state}): {why}"

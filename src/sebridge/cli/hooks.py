"""`sebridge hooks retry EVENT_ID`: run an event's failed prepare hooks again.

The request is written into the store (store/hook_retries.py), never run
here: the agent of each VM whose prepare hook failed runs it again (a
fleet's agents hear it on PostgreSQL at once; on SQLite the daemon sees it
at its next look), and a held approval goes back to waiting for readiness,
carried out once every listed VM succeeded. With no daemon running, the
request waits for the next start. Exit 0 requested, 1 the store failed, 3
refused (unknown, gone or started event, or no failed prepare hook). See
docs/ARCHITECTURE.md, "Readiness hooks".
"""

from __future__ import annotations

import getpass
import os
import sys
from typing import TextIO

from sebridge.cli import format as fmt
from sebridge.cli.format import as_stored
from sebridge.cli.runtime import missing_store, open_store
from sebridge.config.loader import Config
from sebridge.integrations import registry
from sebridge.kernel.clock import utcnow
from sebridge.kernel.errors import StoreError
from sebridge.kernel.text import visible
from sebridge.model.records import AuditEntry, EventRecord
from sebridge.store.hook_retries import RetryAnswer

__all__ = ["retry"]

OK, FAILED, REFUSED = 0, 1, 3
VIA = "cli"


def retry(
    config: Config, event_id: str, *, actor: str | None, as_json: bool, out: TextIO | None = None
) -> int:
    """Ask for the event's failed prepare hooks to run again, and say which will."""
    out = out or sys.stdout
    who = actor or os.environ.get("SUDO_USER") or getpass.getuser()
    if missing_store(config) is not None:
        return _refused(f"unknown event {event_id}: no store yet (`sebridge run` creates it)")
    audience = registry.audience(config)

    def sinks(record: EventRecord) -> tuple[str, ...]:
        return audience(record.decision)

    try:
        store = open_store(config)
        try:
            answer = store.hook_retries.request(
                as_stored(store, event_id), actor=who, via=VIA, now=utcnow(), sinks_for=sinks
            )
            if answer.refused:  # kept beside the history, as a refused approval is
                detail = f"hooks retry: {answer.refused}"
                store.history.audit(
                    AuditEntry(utcnow(), answer.event_id, who, VIA, "refused", detail)
                )
        finally:
            store.close()
    except StoreError as exc:
        print(visible(f"sebridge: hooks retry not recorded: {exc}"), file=sys.stderr)
        return FAILED
    if answer.refused:
        return _refused(answer.refused)
    if as_json:
        fmt.dump(
            {
                "event_id": answer.event_id,
                "actor": who,
                "runs": [{"vm": vm, "hook": hook} for vm, hook in answer.runs],
                "released": answer.released,
            },
            out,
        )
    else:
        # IMDS's text as `events` shows it: no terminal escape or line break acts here.
        print(visible(_line(answer, who)), file=out)
    return OK


def _line(answer: RetryAnswer, who: str) -> str:
    what = ", ".join(f"{hook} on {vm}" for vm, hook in answer.runs)
    line = f"hooks retry of {answer.event_id} requested by {who}: {what} will run again"
    if answer.released:
        line += "; the held approval is carried out once they succeed on every listed VM"
    return line + (
        ". A running daemon on each of these VMs picks it up (with none running, "
        "at its next start)."
    )


def _refused(why: str) -> int:
    print(visible(f"sebridge: hooks retry refused: {why}"), file=sys.stderr)
    return REFUSED

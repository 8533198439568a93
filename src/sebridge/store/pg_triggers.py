"""The NOTIFY triggers: which commits on PostgreSQL wake another agent, and which do not.

Renewed in the transaction of every migration (PostgresDatabase._migrated), so
a database upgraded from any older version ends with exactly these.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from sebridge.store.pg_listen import CHANNEL
from sebridge.store.schema import TABLES

__all__ = ["renew_triggers"]

# Every table the schema creates (TABLES); those there lose any trigger of ours
# (a database may hold other applications' tables too: never touch those), and
# the tables someone waits for (pg_listen.EVERY_TABLE) get the triggers below, which NOTIFY
# their name for the writes that give another agent something to do, and for no
# other: claims, "begun" marks and acks would wake the whole fleet for nothing, and
# an approval put back after a failed POST would wake its own agent into retrying
# at once (it retries at its next poll; the heartbeat tells the others).
_TRIGGERS = {
    "outbox": (
        "AFTER INSERT ON outbox FOR EACH STATEMENT",  # new rows to deliver
        # a row released for anyone to take: a retry, a restarted agent's claims
        "AFTER UPDATE ON outbox FOR EACH ROW "
        "WHEN (NEW.state = 'pending' AND NEW.claimed_by IS NULL)",
    ),
    "approvals": (
        "AFTER INSERT ON approvals FOR EACH STATEMENT",  # new approvals
        # approve anyway: an approval held (or waiting) for unready VMs may now be carried out
        "AFTER UPDATE ON approvals FOR EACH ROW "
        "WHEN (NEW.anyway_by IS NOT NULL AND OLD.anyway_by IS NULL)",
    ),
    # a VM's readiness changed: a hook ended (the carrier may now POST, or hold)
    "hook_runs": ("AFTER UPDATE ON hook_runs FOR EACH ROW WHEN (NEW.state <> 'running')",),
    # a person asked failed prepare hooks to run again (`sebridge hooks retry`)
    "hook_retries": ("AFTER INSERT OR UPDATE ON hook_retries FOR EACH ROW",),
}
_EXISTING = "SELECT tablename FROM pg_tables WHERE schemaname = current_schema() ORDER BY 1"
_NOTIFY_FUNCTION = (
    "CREATE OR REPLACE FUNCTION sebridge_notify() RETURNS trigger LANGUAGE plpgsql AS "
    f"$$ BEGIN PERFORM pg_notify('{CHANNEL}', TG_TABLE_NAME); RETURN NULL; END $$"
)


def renew_triggers(
    run: Callable[[str], Any], rows: Callable[[str], Sequence[tuple[Any, ...]]]
) -> None:
    """Drop every trigger of ours, then create today's (run and rows: the dialect's own)."""
    run(_NOTIFY_FUNCTION)
    # Migrations may have renamed or dropped some of ours.
    existing = {str(r[0]) for r in rows(_EXISTING)}
    for table in (t for t in TABLES if t in existing):
        for n in range(2):  # every trigger name we ever used
            run(f"DROP TRIGGER IF EXISTS sebridge_notify{n or ''} ON {table}")
        for n, when in enumerate(_TRIGGERS.get(table, ())):
            run(
                f"CREATE TRIGGER sebridge_notify{n or ''} {when} EXECUTE FUNCTION sebridge_notify()"
            )

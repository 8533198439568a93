"""The versioned schema: the 0.1.0 baseline, then one migration per released change.

The baseline is the schema sebridge's first release, 0.1.0, creates: schema version 18,
which the 18 migrations written before that release built one by one (their text is in
git's history, and in tests/schema_chain.sql, which proves the baseline builds the same
tables, columns and indexes). It is one CREATE script per dialect. A store with no tables
gets the baseline, then every migration after it; a store at the baseline's version or
later runs the migrations it lacks, in order, all in one transaction. A store older
than the baseline (versions 1 to 17, left by a build from before 0.1.0) is refused, saying
what to do (docs/operations/upgrading.md).

Times are ISO 8601 UTC text with a fixed width, so they sort and compare as text in both
dialects. Each script's statements are separated by `;` (none appears inside one).
"""

from __future__ import annotations

import re
from collections.abc import Mapping

from sebridge.kernel.errors import StoreError

__all__ = [
    "BASELINE",
    "BASELINE_VERSION",
    "MIGRATIONS",
    "RELEASE",
    "TABLES",
    "VERSION",
    "refuse_unknown",
    "upgrade",
]

# The release whose schema is the baseline, and that schema's version.
RELEASE = "0.1.0"
BASELINE_VERSION = 18

# {id} is each dialect's auto-increment primary key. Why each table, column and index is
# there: docs/ARCHITECTURE.md, "Seams", and each store/ module's docstring. Columns are in
# the order the 18 migrations left them (a migration's ADD COLUMN goes last), so a store
# created here and one migrated to 18 answer `SELECT *` alike.
_BASELINE = """
CREATE TABLE documents (
    agent TEXT PRIMARY KEY,
    incarnation TEXT NOT NULL,
    seen_at TEXT NOT NULL,
    stopped_at TEXT
);
CREATE TABLE events (
    event_id TEXT PRIMARY KEY,
    event_type TEXT NOT NULL,
    status TEXT NOT NULL,
    state TEXT NOT NULL,
    policy TEXT NOT NULL,
    data TEXT NOT NULL,
    present INTEGER NOT NULL,
    first_seen TEXT NOT NULL,
    last_seen TEXT NOT NULL,
    gone_at TEXT,
    decision TEXT NOT NULL DEFAULT ''
);
CREATE INDEX events_lower_id ON events (lower(event_id));
CREATE INDEX events_present ON events (first_seen, event_id) WHERE present = 1;
CREATE INDEX events_gone ON events (gone_at) WHERE present = 0;
CREATE TABLE transitions (
    id {id},
    event_id TEXT NOT NULL REFERENCES events (event_id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL,
    content TEXT NOT NULL DEFAULT ''
);
CREATE INDEX transitions_event ON transitions (event_id, id);
CREATE UNIQUE INDEX transitions_said ON transitions (event_id, kind, content);
CREATE TABLE outbox (
    id {id},
    transition_id BIGINT NOT NULL REFERENCES transitions (id) ON DELETE CASCADE,
    event_id TEXT NOT NULL,
    sink TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT NOT NULL,
    claimed_by TEXT,
    claimed_until TEXT,
    last_error TEXT,
    delivered_at TEXT,
    begun INTEGER NOT NULL DEFAULT 0,
    begun_by TEXT,
    claim_token TEXT,
    UNIQUE (transition_id, sink)
);
CREATE INDEX outbox_pending ON outbox (sink, id) WHERE state = 'pending';
CREATE INDEX outbox_pending_event ON outbox (sink, event_id, id) WHERE state = 'pending';
CREATE INDEX outbox_event ON outbox (event_id, id);
CREATE TABLE receipts (
    event_id TEXT NOT NULL REFERENCES events (event_id) ON DELETE CASCADE,
    sink TEXT NOT NULL,
    external_id TEXT NOT NULL,
    data TEXT NOT NULL,
    PRIMARY KEY (event_id, sink)
);
CREATE TABLE approvals (
    event_id TEXT PRIMARY KEY REFERENCES events (event_id) ON DELETE CASCADE,
    actor TEXT NOT NULL,
    via TEXT NOT NULL,
    at TEXT NOT NULL,
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    claimed_until TEXT,
    last_error TEXT,
    done_at TEXT,
    claimed_by TEXT,
    claim_token TEXT,
    unanswered INTEGER NOT NULL DEFAULT 0,
    anyway_by TEXT,
    anyway_via TEXT,
    actor_id TEXT,
    anyway_id TEXT
);
CREATE INDEX approvals_open ON approvals (at) WHERE state IN ('pending', 'posting', 'waiting');
CREATE TABLE audit (
    id {id},
    at TEXT NOT NULL,
    event_id TEXT NOT NULL,
    actor TEXT NOT NULL,
    via TEXT NOT NULL,
    action TEXT NOT NULL,
    detail TEXT NOT NULL
);
CREATE INDEX audit_at ON audit (at);
CREATE TABLE sightings (
    agent TEXT NOT NULL,
    event_id TEXT NOT NULL REFERENCES events (event_id) ON DELETE CASCADE,
    incarnation TEXT NOT NULL,
    present INTEGER NOT NULL,
    last_seen TEXT NOT NULL,
    PRIMARY KEY (agent, event_id)
);
CREATE INDEX sightings_event ON sightings (event_id, present);
CREATE INDEX sightings_present ON sightings (agent, event_id) WHERE present = 1;
CREATE TABLE hook_runs (
    event_id TEXT NOT NULL REFERENCES events (event_id) ON DELETE CASCADE,
    vm TEXT NOT NULL,
    stage TEXT NOT NULL,
    hook TEXT NOT NULL,
    attempt INTEGER NOT NULL,
    state TEXT NOT NULL,
    started_at TEXT NOT NULL,
    finished_at TEXT,
    exit_code INTEGER,
    timed_out INTEGER NOT NULL DEFAULT 0,
    seconds REAL,
    output TEXT NOT NULL DEFAULT '',
    why TEXT NOT NULL DEFAULT '',
    tries INTEGER NOT NULL DEFAULT 0,
    retry_at TEXT,
    retry_asked INTEGER NOT NULL DEFAULT 0,
    pgid INTEGER,
    pgid_start TEXT,
    PRIMARY KEY (event_id, vm, stage, hook)
);
CREATE TABLE hook_retries (
    event_id TEXT PRIMARY KEY REFERENCES events (event_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    actor TEXT NOT NULL,
    via TEXT NOT NULL,
    at TEXT NOT NULL
);
CREATE TABLE vm_tags (
    vm TEXT PRIMARY KEY,
    tags TEXT NOT NULL,
    read_at TEXT NOT NULL
)
"""

# The baseline's script for each dialect, by the name store.url's scheme gives it.
BASELINE: Mapping[str, str] = {
    "sqlite": _BASELINE.replace("{id}", "INTEGER PRIMARY KEY AUTOINCREMENT"),
    "postgresql": _BASELINE.replace("{id}", "BIGINT GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY"),
}

# One migration per released change after the baseline, oldest first: MIGRATIONS[i] brings a
# store from version BASELINE_VERSION + i to BASELINE_VERSION + i + 1, as a script per
# dialect (as BASELINE). Say above each why it is there and what it does to existing rows.
MIGRATIONS: tuple[Mapping[str, str], ...] = ()

# The schema version this sebridge writes and reads.
VERSION = BASELINE_VERSION + len(MIGRATIONS)

# Every table the schema creates (the PostgreSQL triggers are renewed on those there).
TABLES: tuple[str, ...] = tuple(
    name
    for script in (BASELINE["postgresql"], *(m["postgresql"] for m in MIGRATIONS))
    for name in re.findall(r"CREATE TABLE (\w+)", script)
)


def upgrade(version: int, dialect: str, location: str) -> list[str]:
    """The statements that bring a store at schema `version` (0: no tables yet) to VERSION,
    in order (none when it is there); StoreError for a version this sebridge cannot move.

    dialect: a key of BASELINE; location: the store, as messages name it (no password)."""
    refuse_unknown(version, location)
    if version == 0:
        scripts = [BASELINE[dialect], *(m[dialect] for m in MIGRATIONS)]
    else:
        scripts = [m[dialect] for m in MIGRATIONS[version - BASELINE_VERSION :]]
    return [statement for script in scripts for statement in script.split(";") if statement.strip()]


def refuse_unknown(version: int, location: str) -> None:
    """StoreError for a schema version this sebridge neither reads nor moves: one newer than
    it knows, or one older than the baseline (between 0, no tables, and the baseline's)."""
    if version > VERSION:
        raise StoreError(
            f"the store at {location} has schema version {version}, newer than "
            f"this sebridge knows ({VERSION}): upgrade sebridge"
        )
    if 0 < version < BASELINE_VERSION:
        raise StoreError(
            f"the store at {location} has schema version {version}, from a sebridge built "
            f"before release {RELEASE}; this sebridge starts from the {RELEASE} baseline "
            f"(schema version {BASELINE_VERSION}) and cannot move an older store. Either run "
            f"a build from before {RELEASE} that knows schema version {BASELINE_VERSION} once "
            "(`sebridge check`), which moves it there, then this one; or move the store aside "
            "and let sebridge start a new one: a store holds only the live events, which the "
            "next poll finds again, and their history (docs: Upgrading)"
        )

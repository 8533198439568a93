"""The versioned schema. Migration N brings a database from version N-1 to N.

DDL is written once for SQLite and PostgreSQL: `{id}` stands for each
dialect's auto-increment primary key. Times are ISO 8601 UTC text with a
fixed width, so they sort and compare as text in both.
"""

from __future__ import annotations

__all__ = ["MIGRATIONS"]

_V1 = """
CREATE TABLE documents (
    agent TEXT PRIMARY KEY,
    incarnation BIGINT NOT NULL,
    seen_at TEXT NOT NULL
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
    gone_at TEXT
);
CREATE TABLE transitions (
    id {id},
    event_id TEXT NOT NULL REFERENCES events (event_id) ON DELETE CASCADE,
    kind TEXT NOT NULL,
    at TEXT NOT NULL,
    data TEXT NOT NULL
);
CREATE INDEX transitions_event ON transitions (event_id, id);
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
    UNIQUE (transition_id, sink)
);
CREATE INDEX outbox_due ON outbox (sink, state, next_attempt_at);
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
    done_at TEXT
);
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
"""

# An attempt is recorded as begun (its own commit) before the sink is called:
# after a crash between the send and the ack, the next attempt knows an earlier
# one may have landed and has the sink look for it first. Rows retried before
# this version count their finished attempts as begun.
_V2 = """
ALTER TABLE outbox ADD COLUMN begun INTEGER NOT NULL DEFAULT 0;
UPDATE outbox SET begun = attempts
"""

# Many agents on one database. An event stays one row; what each agent saw is its
# own sighting, so one agent's document never marks another's events gone: the
# event leaves when no agent sees it. A transition is keyed by what it says
# (event, kind, a hash of its content: see codec.transition_key and
# Store._add_transition), so when several
# agents derive it the first insert wins and only it writes outbox rows.
# Existing transitions keep a key of their own (their id); existing events become
# sightings of the agent that wrote the latest document (an older name of this
# VM must not keep them present forever). DocumentIncarnation is an opaque
# token (any JSON scalar, kept as JSON text), so its columns become TEXT.
_V3 = """
CREATE TABLE sightings (
    agent TEXT NOT NULL,
    event_id TEXT NOT NULL REFERENCES events (event_id) ON DELETE CASCADE,
    incarnation TEXT NOT NULL,
    present INTEGER NOT NULL,
    last_seen TEXT NOT NULL,
    PRIMARY KEY (agent, event_id)
);
INSERT INTO sightings (agent, event_id, incarnation, present, last_seen)
    SELECT d.agent, e.event_id, CAST(d.incarnation AS TEXT), e.present, e.last_seen
    FROM events e CROSS JOIN documents d
    WHERE d.seen_at = (SELECT MAX(seen_at) FROM documents);
CREATE TABLE documents_v3 (
    agent TEXT PRIMARY KEY,
    incarnation TEXT NOT NULL,
    seen_at TEXT NOT NULL
);
INSERT INTO documents_v3 (agent, incarnation, seen_at)
    SELECT agent, CAST(incarnation AS TEXT), seen_at FROM documents;
DROP TABLE documents;
ALTER TABLE documents_v3 RENAME TO documents;
ALTER TABLE transitions ADD COLUMN content TEXT NOT NULL DEFAULT '';
UPDATE transitions SET content = CAST(id AS TEXT);
CREATE UNIQUE INDEX transitions_said ON transitions (event_id, kind, content)
"""

# Agents losing sight of an event look for other agents' sightings of it, and an
# agent claiming an approval for its own: by event. (On PostgreSQL, migrating
# also renews the NOTIFY triggers: from this version each names its table, and
# only the outbox and approvals have one.)
_V4 = """
CREATE INDEX sightings_event ON sightings (event_id, present)
"""

# A claimed approval names its claimant, as outbox rows do: when the claimant dies
# (kill -9 in the middle of a POST) its claim is void at once (PostgreSQL: its
# session's advisory lock is gone; SQLite: the restarted daemon lets its own claims
# go), and the approval is sent again instead of waiting for the lease to end.
_V5 = """
ALTER TABLE approvals ADD COLUMN claimed_by TEXT
"""

# Claiming the next delivery walks a sink's pending rows in id order and stops at its
# LIMIT; whether an earlier row of the same event still waits is one index probe. Both
# indexes hold pending rows only (partial), so delivered history never slows a claim: a
# claim costs the same at 100 pending rows as at 10,000 (bench/big_backlog.py). The
# old (sink, state, next_attempt_at) index goes: a planner that picked it had to sort
# every pending row of the sink to find the oldest.
_V6 = """
CREATE INDEX outbox_pending ON outbox (sink, id) WHERE state = 'pending';
CREATE INDEX outbox_pending_event ON outbox (sink, event_id, id) WHERE state = 'pending';
DROP INDEX outbox_due
"""

# Policy rules: the whole decision (action, rule, hooks, reminders) is kept with the
# event as JSON (store/codec.py); `policy` keeps the action alone, for SQL. "notify"
# became "ask". Events recorded before say so as their rule.
_V7 = """
ALTER TABLE events ADD COLUMN decision TEXT NOT NULL DEFAULT '';
UPDATE events SET policy = 'ask' WHERE policy = 'notify';
UPDATE events SET decision = '{"action":"' || policy || '","rule":"decided before policy rules"}'
"""

# Readiness hooks: one row per (event, VM, stage, hook), written by that VM's agent
# only. `running` when a restart finds it means the run was interrupted: it runs
# again as the next attempt. The carrier reads every VM's rows to know whether an
# event's listed VMs are ready.
_V8 = """
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
    PRIMARY KEY (event_id, vm, stage, hook)
)
"""

# Which agent began a delivery's latest attempt. A console or a JSON lines file is its
# host's own: an agent taking over a dead agent's delivery cannot look at what that
# attempt left there, so its line says it may repeat one (engine/dispatch.py, Message).
_V9 = """
ALTER TABLE outbox ADD COLUMN begun_by TEXT
"""

# Reads a delivery makes per event (its record, as people type its id, and the state of
# its deliveries) by index, not by a scan of every event and every outbox row: with
# 10,000 events listed those scans made each delivery cost a few milliseconds more per
# thousand events (bench/big_backlog.py).
_V10 = """
CREATE INDEX events_lower_id ON events (lower(event_id));
CREATE INDEX outbox_event ON outbox (event_id, id)
"""

# A claim is owned: each claim writes a token of its own (store/claims.py), and every later
# write of the row (begin, renew, ack, retry, fail; an approval's POST and outcome) names
# it, so a holder whose lease ran out and passed to another agent changes nothing. An
# approval counts its POSTs that IMDS never answered (one begun is counted, committed,
# before it goes out; its answer takes it off): after a crash or a timeout, `unanswered`
# says one may have reached IMDS, whatever state the row was put back in. One being
# posted at the upgrade may have gone out.
_V11 = """
ALTER TABLE outbox ADD COLUMN claim_token TEXT;
ALTER TABLE approvals ADD COLUMN claim_token TEXT;
ALTER TABLE approvals ADD COLUMN unanswered INTEGER NOT NULL DEFAULT 0;
UPDATE approvals SET unanswered = 1 WHERE state = 'posting'
"""

# What the periodic rounds read (the carrier's open-approval checks and claim, the heartbeat,
# the hook worker, reminders, the Jira search, a tick's sightings) is open rows only, each
# through an index that holds nothing else (partial): past events, their sightings and
# closed approvals never slow a round, which costs the same with 20 past events as with
# 20,000 (bench/idle_round.py). Before, the open-approval checks read every approval. The
# queries state each index's condition as written here (a planner uses a partial index only
# for a query that states it): approvals.py's OPEN_STATES, events.py's arms.
_V12 = """
CREATE INDEX approvals_open ON approvals (at) WHERE state IN ('pending', 'posting', 'waiting');
CREATE INDEX events_present ON events (first_seen, event_id) WHERE present = 1;
CREATE INDEX events_gone ON events (gone_at) WHERE present = 0;
CREATE INDEX sightings_present ON sightings (agent, event_id) WHERE present = 1
"""

# Retries of a failed prepare hook. A run counts its failures against the hook's `retries`
# (`tries`) and says when it runs again (`retry_at`; NULL: its failure is final). A person's
# `sebridge hooks retry` is one row per event, its `seq` counting the requests: each VM's
# agent runs again a failed row whose `retry_asked` is below it, with a budget afresh.
_V13 = """
ALTER TABLE hook_runs ADD COLUMN tries INTEGER NOT NULL DEFAULT 0;
ALTER TABLE hook_runs ADD COLUMN retry_at TEXT;
ALTER TABLE hook_runs ADD COLUMN retry_asked INTEGER NOT NULL DEFAULT 0;
UPDATE hook_runs SET tries = 1 WHERE state = 'failed';
CREATE TABLE hook_retries (
    event_id TEXT PRIMARY KEY REFERENCES events (event_id) ON DELETE CASCADE,
    seq INTEGER NOT NULL,
    actor TEXT NOT NULL,
    via TEXT NOT NULL,
    at TEXT NOT NULL
)
"""

# Approve anyway (`sebridge approve --anyway`, the page's and Slack's "Approve anyway"): who
# asked that the approval be carried out despite failed or unfinished prepare hooks, and
# through what. The carrier (on any agent of a fleet) reads it from the row it claims and
# lets the readiness gate's "wait" or "hold" pass. Depends on version 12's tables only.
_V14 = """
ALTER TABLE approvals ADD COLUMN anyway_by TEXT;
ALTER TABLE approvals ADD COLUMN anyway_via TEXT
"""

# The process group a hook's attempt runs in, as the agent that started it recorded it:
# its id and its leader's identity (the boot and the start time, /proc/<pid>/stat's field
# 22), so a restart ends exactly that group, whatever environment the hook's processes
# keep, and never a later process given the same id (hooks/leftovers.py).
_V15 = """
ALTER TABLE hook_runs ADD COLUMN pgid INTEGER;
ALTER TABLE hook_runs ADD COLUMN pgid_start TEXT
"""

# Names, not ids: who approved is stored as people call them (`actor`, `anyway_by`: a Slack
# approver's name, from the click or users.info), so every agent of a fleet shows the same
# name; beside it the channel's own id of that person (a Slack member id, NULL elsewhere), so
# Slack can still say it as a mention. Rows written before keep their ids as their names.
_V16 = """
ALTER TABLE approvals ADD COLUMN actor_id TEXT;
ALTER TABLE approvals ADD COLUMN anyway_id TEXT
"""

# Each agent's VM's Azure tags, as it read them from IMDS's instance metadata at start
# (imds/tags.py): a rule's `tags` matches an event by the tags of the VMs it lists, so every
# agent of a fleet reads every VM's here (store/vm_tags.py). JSON object of strings.
_V17 = """
CREATE TABLE vm_tags (
    vm TEXT PRIMARY KEY,
    tags TEXT NOT NULL,
    read_at TEXT NOT NULL
)
"""

# When an agent stopped (a clean `sebridge run` shutdown): the fleet takes it for silent at
# once, not after [fleet] silent_after, and keeps its row (it stays known: its VMs' approvals
# are held, not released un-drained). Its next beat or document clears it.
_V18 = """
ALTER TABLE documents ADD COLUMN stopped_at TEXT
"""

# Index i holds the statements of schema version i + 1.
MIGRATIONS: tuple[str, ...] = (
    _V1,
    _V2,
    _V3,
    _V4,
    _V5,
    _V6,
    _V7,
    _V8,
    _V9,
    _V10,
    _V11,
    _V12,
    _V13,
    _V14,
    _V15,
    _V16,
    _V17,
    _V18,
)

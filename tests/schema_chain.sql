-- The 18 migrations sebridge ran before release 0.1.0, as store/schema.py held them at
-- commit 2906851 (why each: that file's comments, in git's history). Version 18 is the
-- 0.1.0 baseline; tests/test_schema_baseline.py runs these on an empty database to build
-- a store as one migrated to 18 looks, and stores left at older versions.
-- {id} is each dialect's auto-increment primary key; statements end with `;`.
-- version 1
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
CREATE INDEX audit_at ON audit (at);;
-- version 2
ALTER TABLE outbox ADD COLUMN begun INTEGER NOT NULL DEFAULT 0;
UPDATE outbox SET begun = attempts;
-- version 3
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
CREATE UNIQUE INDEX transitions_said ON transitions (event_id, kind, content);
-- version 4
CREATE INDEX sightings_event ON sightings (event_id, present);
-- version 5
ALTER TABLE approvals ADD COLUMN claimed_by TEXT;
-- version 6
CREATE INDEX outbox_pending ON outbox (sink, id) WHERE state = 'pending';
CREATE INDEX outbox_pending_event ON outbox (sink, event_id, id) WHERE state = 'pending';
DROP INDEX outbox_due;
-- version 7
ALTER TABLE events ADD COLUMN decision TEXT NOT NULL DEFAULT '';
UPDATE events SET policy = 'ask' WHERE policy = 'notify';
UPDATE events SET decision = '{"action":"' || policy || '","rule":"decided before policy rules"}';
-- version 8
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
);
-- version 9
ALTER TABLE outbox ADD COLUMN begun_by TEXT;
-- version 10
CREATE INDEX events_lower_id ON events (lower(event_id));
CREATE INDEX outbox_event ON outbox (event_id, id);
-- version 11
ALTER TABLE outbox ADD COLUMN claim_token TEXT;
ALTER TABLE approvals ADD COLUMN claim_token TEXT;
ALTER TABLE approvals ADD COLUMN unanswered INTEGER NOT NULL DEFAULT 0;
UPDATE approvals SET unanswered = 1 WHERE state = 'posting';
-- version 12
CREATE INDEX approvals_open ON approvals (at) WHERE state IN ('pending', 'posting', 'waiting');
CREATE INDEX events_present ON events (first_seen, event_id) WHERE present = 1;
CREATE INDEX events_gone ON events (gone_at) WHERE present = 0;
CREATE INDEX sightings_present ON sightings (agent, event_id) WHERE present = 1;
-- version 13
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
);
-- version 14
ALTER TABLE approvals ADD COLUMN anyway_by TEXT;
ALTER TABLE approvals ADD COLUMN anyway_via TEXT;
-- version 15
ALTER TABLE hook_runs ADD COLUMN pgid INTEGER;
ALTER TABLE hook_runs ADD COLUMN pgid_start TEXT;
-- version 16
ALTER TABLE approvals ADD COLUMN actor_id TEXT;
ALTER TABLE approvals ADD COLUMN anyway_id TEXT;
-- version 17
CREATE TABLE vm_tags (
    vm TEXT PRIMARY KEY,
    tags TEXT NOT NULL,
    read_at TEXT NOT NULL
);
-- version 18
ALTER TABLE documents ADD COLUMN stopped_at TEXT;

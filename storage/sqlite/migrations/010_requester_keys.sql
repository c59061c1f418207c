-- 010_requester_keys: an idempotency key is its requester's. The same key
-- from two requesters names two runs, so that no proposer can take a key
-- another one will use and lock it out; runs.idempotency_key is unique per
-- requester_id instead of across every run. Keys stored before stay where
-- they are: a key was unique across all runs, so it is unique per requester.
-- The same version, name and encoding as storage/postgres's 010_requester_keys.
--
-- SQLite cannot drop a column's UNIQUE constraint, so runs is rebuilt as
-- SQLite's documentation says (copy, drop, create, copy back, indexes).
-- Foreign keys stay on and are deferred: dropping runs leaves the records
-- that refer to it without their run until the rows are back, and the
-- commit checks that each one has it again.

PRAGMA defer_foreign_keys = ON;

CREATE TEMP TABLE runs_before_010 AS SELECT * FROM runs;

DROP TABLE runs;

CREATE TABLE runs (
    id              TEXT    NOT NULL PRIMARY KEY,
    workflow        TEXT    NOT NULL DEFAULT '',
    task_id         TEXT    NOT NULL DEFAULT '',
    status          TEXT    NOT NULL,
    step            INTEGER NOT NULL DEFAULT 0,
    seq             INTEGER NOT NULL DEFAULT 0,
    version         INTEGER NOT NULL,
    requester_id    TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT,
    fingerprint     TEXT    NOT NULL DEFAULT '',
    reason          TEXT    NOT NULL DEFAULT '',
    deadline        INTEGER NOT NULL DEFAULT 0,
    parent_id       TEXT    NOT NULL DEFAULT '',
    parent_seq      INTEGER NOT NULL DEFAULT 0,
    lease_owner     TEXT    NOT NULL DEFAULT '',
    lease_until     INTEGER NOT NULL DEFAULT 0,
    fence           INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL DEFAULT 0,
    updated_at      INTEGER NOT NULL DEFAULT 0,
    pruned_at       INTEGER NOT NULL DEFAULT 0,
    callback_url    TEXT    NOT NULL DEFAULT ''
);

INSERT INTO runs (id, workflow, task_id, status, step, seq, version, requester_id, idempotency_key,
        fingerprint, reason, deadline, parent_id, parent_seq, lease_owner, lease_until, fence,
        created_at, updated_at, pruned_at, callback_url)
    SELECT id, workflow, task_id, status, step, seq, version, requester_id, idempotency_key,
        fingerprint, reason, deadline, parent_id, parent_seq, lease_owner, lease_until, fence,
        created_at, updated_at, pruned_at, callback_url
    FROM runs_before_010;

DROP TABLE runs_before_010;

-- NULL keys (runs submitted without one) never collide.
CREATE UNIQUE INDEX runs_requester_key ON runs (requester_id, idempotency_key);

-- The indexes of 001, 004 and 006, which went with the old table.
CREATE INDEX runs_status_created ON runs (status, created_at, id);
CREATE INDEX runs_deadline ON runs (status, deadline) WHERE deadline <> 0;
CREATE INDEX runs_prunable ON runs (created_at, id)
    WHERE pruned_at = 0 AND status IN ('done', 'failed', 'rejected', 'expired', 'cancelled');
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_task_created ON runs (task_id, created_at, id);
CREATE INDEX runs_requester_created ON runs (requester_id, created_at, id);

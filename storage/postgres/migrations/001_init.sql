-- 001_init: every record of the workflow contract.
--
-- The same version and name as storage/sqlite's 001_init, and the same encoding,
-- so that a store moved between drivers means the same thing:
--   * times are BIGINT unix milliseconds in UTC; 0 stands for the zero time.Time,
--     so the instant 1970-01-01T00:00:00.000Z itself reads back as the zero time;
--   * byte and JSON columns are BYTEA, stored byte for byte: a nil slice is NULL and
--     an empty one is a zero-length BYTEA, so nil and empty both round-trip (JSONB
--     would reorder keys and drop duplicates, and the hashes cover the exact bytes);
--   * optional strings are '' (NOT NULL), except runs.idempotency_key, which is
--     NULL when empty so that UNIQUE applies only to keys a submitter gave.
-- Unlike SQLite, TEXT refuses a NUL character and invalid UTF-8: such a value is
-- an error here, where SQLite stores it.
-- This file is append-only history: change the schema in a new numbered file.

CREATE TABLE runs (
    id              TEXT    NOT NULL PRIMARY KEY,
    workflow        TEXT    NOT NULL DEFAULT '',
    task_id         TEXT    NOT NULL DEFAULT '',
    status          TEXT    NOT NULL,
    step            INTEGER NOT NULL DEFAULT 0,
    seq             BIGINT  NOT NULL DEFAULT 0,
    version         BIGINT  NOT NULL,
    requester_id    TEXT    NOT NULL DEFAULT '',
    idempotency_key TEXT    UNIQUE,
    fingerprint     TEXT    NOT NULL DEFAULT '',
    reason          TEXT    NOT NULL DEFAULT '',
    deadline        BIGINT  NOT NULL DEFAULT 0,
    parent_id       TEXT    NOT NULL DEFAULT '',
    parent_seq      BIGINT  NOT NULL DEFAULT 0,
    lease_owner     TEXT    NOT NULL DEFAULT '',
    lease_until     BIGINT  NOT NULL DEFAULT 0,
    fence           BIGINT  NOT NULL DEFAULT 0,
    created_at      BIGINT  NOT NULL DEFAULT 0,
    updated_at      BIGINT  NOT NULL DEFAULT 0
);

-- The pending list (status = waiting_approval, oldest first, paginated on
-- (created_at, id)) and every other per-status listing walk this index in order.
-- ClaimRuns finds the few active runs through it too. updated_at is left out of
-- every index on purpose: an update that changes no indexed column is a HOT
-- update, which is most of a run's writes while it stays in one status.
CREATE INDEX runs_status_created ON runs (status, created_at, id);

-- Deadline sweeps (waiting runs past their deadline) read a range of this index,
-- which holds only runs that have a deadline.
CREATE INDEX runs_deadline ON runs (status, deadline) WHERE deadline <> 0;

CREATE TABLE checkpoints (
    run_id         TEXT    NOT NULL REFERENCES runs (id),
    seq            BIGINT  NOT NULL,
    schema_version INTEGER NOT NULL,
    state          BYTEA,
    prev_hash      TEXT    NOT NULL DEFAULT '',
    hash           TEXT    NOT NULL DEFAULT '',
    created_at     BIGINT  NOT NULL DEFAULT 0,
    PRIMARY KEY (run_id, seq)
);

CREATE TABLE approval_requests (
    id              TEXT    NOT NULL PRIMARY KEY,
    run_id          TEXT    NOT NULL REFERENCES runs (id),
    fingerprint     TEXT    NOT NULL DEFAULT '',
    rule            TEXT    NOT NULL DEFAULT '',
    policy_revision TEXT    NOT NULL DEFAULT '',
    risk            TEXT    NOT NULL DEFAULT '',
    role            TEXT    NOT NULL DEFAULT '',
    count           INTEGER NOT NULL DEFAULT 0,
    self_approval   BOOLEAN NOT NULL DEFAULT false,
    edit            BOOLEAN NOT NULL DEFAULT false,
    requester_id    TEXT    NOT NULL DEFAULT '',
    deadline        BIGINT  NOT NULL DEFAULT 0,
    status          TEXT    NOT NULL,
    decided_by      TEXT    NOT NULL DEFAULT '',
    decided_at      BIGINT  NOT NULL DEFAULT 0,
    channel         TEXT    NOT NULL DEFAULT '',
    message_ts      TEXT    NOT NULL DEFAULT '',
    version         BIGINT  NOT NULL,
    created_at      BIGINT  NOT NULL DEFAULT 0
);

CREATE INDEX approval_requests_run ON approval_requests (run_id, created_at, id);

-- An identity column draws from a sequence, which never hands out a number twice,
-- not even one of a rolled-back transaction: a decision id quoted in a message or
-- log always means the same decision. Ids follow insert order, not commit order.
CREATE TABLE decisions (
    id             BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    request_id     TEXT    NOT NULL REFERENCES approval_requests (id),
    run_id         TEXT    NOT NULL REFERENCES runs (id),
    approver_id    TEXT    NOT NULL,
    approver_name  TEXT    NOT NULL DEFAULT '',
    role           TEXT    NOT NULL DEFAULT '',
    verdict        TEXT    NOT NULL,
    reason         TEXT    NOT NULL DEFAULT '',
    edited_args    BYTEA,
    via            TEXT    NOT NULL DEFAULT '',
    payload_digest TEXT    NOT NULL DEFAULT '',
    at             BIGINT  NOT NULL DEFAULT 0,
    UNIQUE (request_id, approver_id)
);

CREATE INDEX decisions_run ON decisions (run_id, id);

CREATE TABLE operations (
    op_key      TEXT    NOT NULL PRIMARY KEY,
    run_id      TEXT    NOT NULL REFERENCES runs (id),
    idx         INTEGER NOT NULL,
    action      TEXT    NOT NULL DEFAULT '',
    args_digest TEXT    NOT NULL DEFAULT '',
    status      TEXT    NOT NULL,
    attempts    INTEGER NOT NULL DEFAULT 0,
    receipt     BYTEA,
    error       TEXT    NOT NULL DEFAULT '',
    version     BIGINT  NOT NULL,
    created_at  BIGINT  NOT NULL DEFAULT 0,
    updated_at  BIGINT  NOT NULL DEFAULT 0
);

CREATE INDEX operations_run ON operations (run_id, idx);

-- No foreign key to runs: a message may concern no run, and the outbox must be
-- able to say something about a run that was refused before it existed.
-- Ids come from a sequence in insert order; two transactions may commit in the
-- other order, so an id is an order, never a cursor.
CREATE TABLE outbox (
    id           BIGINT  GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    run_id       TEXT    NOT NULL DEFAULT '',
    kind         TEXT    NOT NULL,
    payload      BYTEA,
    attempts     INTEGER NOT NULL DEFAULT 0,
    next_attempt BIGINT  NOT NULL DEFAULT 0,
    delivered_at BIGINT  NOT NULL DEFAULT 0,
    last_error   TEXT    NOT NULL DEFAULT '',
    version      BIGINT  NOT NULL,
    created_at   BIGINT  NOT NULL DEFAULT 0
);

-- The dispatcher's poll reads only undelivered rows; delivered ones leave the index.
CREATE INDEX outbox_due ON outbox (next_attempt, id) WHERE delivered_at = 0;

-- One global hash chain. No foreign key to runs, for the same reason as the
-- outbox: refusals are audited even when no run was created.
CREATE TABLE audit (
    seq       BIGINT  NOT NULL PRIMARY KEY,
    run_id    TEXT    NOT NULL DEFAULT '',
    actor     TEXT    NOT NULL DEFAULT '',
    action    TEXT    NOT NULL,
    detail    BYTEA,
    at        BIGINT  NOT NULL DEFAULT 0,
    prev_hash TEXT    NOT NULL,
    hash      TEXT    NOT NULL
);

CREATE INDEX audit_run ON audit (run_id, seq);

-- The head of the audit chain: one row, locked (SELECT … FOR UPDATE) by every
-- append until its transaction ends, so that two transactions never take the
-- same seq or the same previous hash. SQLite needs no such row: its single
-- writer already serialises appends. The head always equals the last audit row.
CREATE TABLE audit_head (
    id   BOOLEAN NOT NULL PRIMARY KEY DEFAULT true CHECK (id),
    seq  BIGINT  NOT NULL,
    hash TEXT    NOT NULL
);

INSERT INTO audit_head (id, seq, hash) VALUES (true, 0, '');

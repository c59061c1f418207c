-- 008_audit_per_run: the audit log is chained per run instead of globally,
-- so that appending no longer takes one lock every replica waits for.
--
-- Events written before this migration keep format 1: one global chain by
-- seq, whose end integrity_head.seq/hash still seals. New events are format 2:
-- prev_hash is the hash of the previous event of the same run (by seq), and
-- audit_heads holds each run's last event, sealed, locked only by appends to
-- that run. seq comes from a sequence: unique and increasing, with gaps where
-- a transaction rolled back.
--
-- audit_anchors is a chain of sealed records, each naming the heads that moved
-- since the one before (audit_heads.anchored says up to where a head was
-- anchored): every anchor commits to every run's events up to its time, and
-- integrity_head names the newest one. Row 0 is the lock anchor writers take.

ALTER TABLE audit ADD COLUMN format INTEGER NOT NULL DEFAULT 1;

CREATE SEQUENCE audit_seq;
SELECT setval('audit_seq', COALESCE((SELECT max(seq) FROM audit), 0) + 1, false);

CREATE TABLE audit_heads (
    run_id   TEXT   NOT NULL PRIMARY KEY,
    seq      BIGINT NOT NULL,
    hash     TEXT   NOT NULL,
    anchored BIGINT NOT NULL DEFAULT 0,
    key_id   TEXT   NOT NULL DEFAULT '',
    mac      TEXT   NOT NULL DEFAULT ''
);

CREATE INDEX audit_heads_unanchored ON audit_heads (run_id) WHERE anchored <> seq;

CREATE TABLE audit_anchors (
    id        BIGINT NOT NULL PRIMARY KEY,
    at        BIGINT NOT NULL,
    heads     BYTEA,
    prev_hash TEXT   NOT NULL,
    hash      TEXT   NOT NULL,
    key_id    TEXT   NOT NULL DEFAULT '',
    mac       TEXT   NOT NULL DEFAULT ''
);

INSERT INTO audit_anchors (id, at, prev_hash, hash) VALUES (0, 0, '', '');

ALTER TABLE integrity_head ADD COLUMN anchor_id BIGINT NOT NULL DEFAULT 0;
ALTER TABLE integrity_head ADD COLUMN anchor_hash TEXT NOT NULL DEFAULT '';

-- The global head row only serialised global appends.
DROP TABLE audit_head;

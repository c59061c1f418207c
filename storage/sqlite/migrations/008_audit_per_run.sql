-- 008_audit_per_run: the audit log is chained per run instead of globally,
-- so that appending no longer takes one lock every writer waits for (see the
-- PostgreSQL migration of the same number, which this one mirrors).
--
-- Events written before this migration keep format 1: one global chain by
-- seq, whose end integrity_head.seq/hash still seals. New events are format 2:
-- prev_hash is the hash of the previous event of the same run (by seq), and
-- audit_heads holds each run's last event, sealed. seq stays the last seq + 1
-- (the single writer makes that safe).
--
-- audit_anchors is a chain of sealed records, each naming the heads that moved
-- since the one before (audit_heads.anchored says up to where a head was
-- anchored); integrity_head names the newest. Row 0 starts the chain.

ALTER TABLE audit ADD COLUMN format INTEGER NOT NULL DEFAULT 1;

CREATE TABLE audit_heads (
    run_id   TEXT    NOT NULL PRIMARY KEY,
    seq      INTEGER NOT NULL,
    hash     TEXT    NOT NULL,
    anchored INTEGER NOT NULL DEFAULT 0,
    key_id   TEXT    NOT NULL DEFAULT '',
    mac      TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX audit_heads_unanchored ON audit_heads (run_id) WHERE anchored <> seq;

CREATE TABLE audit_anchors (
    id        INTEGER NOT NULL PRIMARY KEY,
    at        INTEGER NOT NULL,
    heads     BLOB,
    prev_hash TEXT    NOT NULL,
    hash      TEXT    NOT NULL,
    key_id    TEXT    NOT NULL DEFAULT '',
    mac       TEXT    NOT NULL DEFAULT ''
);

INSERT INTO audit_anchors (id, at, prev_hash, hash) VALUES (0, 0, '', '');

ALTER TABLE integrity_head ADD COLUMN anchor_id INTEGER NOT NULL DEFAULT 0;
ALTER TABLE integrity_head ADD COLUMN anchor_hash TEXT NOT NULL DEFAULT '';

-- 014_run_audit_head: a run's audit head (its last event: seq, hash, seal,
-- and up to where an anchor took it) is kept in its run row, which every
-- transition writes anyway, instead of a row of audit_heads moved once a
-- transition: the transition's events and the head they move are written
-- with it. audit_heads keeps the heads of events about no run, and of runs
-- that do not exist (a refusal that names one).
-- storage/postgres's 014_run_audit_head adds the same columns.

ALTER TABLE runs ADD COLUMN audit_seq      INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN audit_hash     TEXT    NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN audit_anchored INTEGER NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN audit_key_id   TEXT    NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN audit_mac      TEXT    NOT NULL DEFAULT '';

UPDATE runs SET (audit_seq, audit_hash, audit_anchored, audit_key_id, audit_mac) =
    (SELECT seq, hash, anchored, key_id, mac FROM audit_heads WHERE audit_heads.run_id = runs.id)
    WHERE id IN (SELECT run_id FROM audit_heads WHERE seq > 0);
DELETE FROM audit_heads WHERE run_id IN (SELECT id FROM runs);

CREATE INDEX runs_audit_unanchored ON runs (id) WHERE audit_anchored <> audit_seq;

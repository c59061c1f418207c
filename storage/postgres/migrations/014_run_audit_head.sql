-- 014_run_audit_head: the columns storage/sqlite's 014_run_audit_head adds
-- to runs, to keep a run's audit head in its run row. SQLite keeps its heads
-- there from this version on; PostgreSQL still keeps them in audit_heads
-- (its transition writes its run row before it has read the head, in the
-- same round trip), so here they stay at their defaults, and the index,
-- empty, answers an anchor's look for them at once.

ALTER TABLE runs ADD COLUMN audit_seq      BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN audit_hash     TEXT   NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN audit_anchored BIGINT NOT NULL DEFAULT 0;
ALTER TABLE runs ADD COLUMN audit_key_id   TEXT   NOT NULL DEFAULT '';
ALTER TABLE runs ADD COLUMN audit_mac      TEXT   NOT NULL DEFAULT '';

CREATE INDEX runs_audit_unanchored ON runs (id) WHERE audit_anchored <> audit_seq;

-- 004_retention: signoff prune removes the bulky records of runs that ended
-- long ago and keeps what the audit needs (see workflow.Engine.Prune).
--
--   * runs.pruned_at is when the run was pruned (0: never), so that a prune
--     skips what an earlier one did and can be stopped and run again;
--   * checkpoints.pruned_at is when the checkpoint's state was removed (its
--     state is then NULL); the row keeps its seq, hashes and seal, so that
--     the chain and the audit events that name it still verify;
--   * runs_prunable holds only ended runs not pruned yet: a prune reads a
--     range of it instead of every run. It leaves updated_at out, as every
--     index does (PostgreSQL's HOT updates);
--   * outbox_run finds a run's outbox rows, which a prune deletes once delivered.
--
-- The same version, name and encoding as storage/sqlite's 004_retention.
-- Space: PostgreSQL gives the freed space back to the table through
-- autovacuum; nothing here changes how it runs.

ALTER TABLE runs ADD COLUMN pruned_at BIGINT NOT NULL DEFAULT 0;
ALTER TABLE checkpoints ADD COLUMN pruned_at BIGINT NOT NULL DEFAULT 0;

CREATE INDEX runs_prunable ON runs (created_at, id)
    WHERE pruned_at = 0 AND status IN ('done', 'failed', 'rejected', 'expired', 'cancelled');

CREATE INDEX outbox_run ON outbox (run_id, id);

-- 015_checkpoint_events: the columns storage/sqlite's 015_checkpoint_events
-- adds to checkpoints, to keep a transition's audit events in its
-- checkpoint's row. PostgreSQL keeps its events in audit still (see
-- 014_run_audit_head): here they stay empty, and the index with them.

ALTER TABLE checkpoints ADD COLUMN events BYTEA;
ALTER TABLE checkpoints ADD COLUMN last_event_seq BIGINT NOT NULL DEFAULT 0;

CREATE INDEX checkpoints_last_event_seq ON checkpoints (last_event_seq) WHERE last_event_seq > 0;

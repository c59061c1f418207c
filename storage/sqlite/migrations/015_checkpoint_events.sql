-- 015_checkpoint_events: a transition's audit events are kept in the row of
-- the checkpoint it wrote, which names the run and the checkpoint they
-- would otherwise each repeat, instead of a row of audit each. events holds
-- them in order (storage/sqlstore's EncodeEvents); last_event_seq is the seq
-- of the last, so that the log read by seq, and the next seq, find them by
-- its index. Events of no checkpoint (a refusal, a note, a delegation) and
-- those written before this version stay in audit.
-- storage/postgres's 015_checkpoint_events adds the same columns.

ALTER TABLE checkpoints ADD COLUMN events BLOB;
ALTER TABLE checkpoints ADD COLUMN last_event_seq INTEGER NOT NULL DEFAULT 0;

CREATE INDEX checkpoints_last_event_seq ON checkpoints (last_event_seq) WHERE last_event_seq > 0;

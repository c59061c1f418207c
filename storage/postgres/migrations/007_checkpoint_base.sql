-- 007_checkpoint_base: a checkpoint may store its state as what changed
-- since an earlier checkpoint of its run that holds a whole state (its base),
-- so that a run's evidence, messages and proposal are stored once, not again
-- at every step (see workflow.Checkpoint.BaseSeq). base_seq is that
-- checkpoint's seq, 0 for a checkpoint that holds its whole state (every
-- checkpoint written before this version). The checkpoint's hash covers it.
--
-- The same version, name and encoding as storage/sqlite's 007_checkpoint_base.

ALTER TABLE checkpoints ADD COLUMN base_seq BIGINT NOT NULL DEFAULT 0;

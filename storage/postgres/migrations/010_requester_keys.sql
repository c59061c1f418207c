-- 010_requester_keys: an idempotency key is its requester's. The same key
-- from two requesters names two runs, so that no proposer can take a key
-- another one will use and lock it out; runs.idempotency_key is unique per
-- requester_id instead of across every run. Keys stored before stay where
-- they are: a key was unique across all runs, so it is unique per requester.
-- The same version, name and encoding as storage/sqlite's 010_requester_keys.

ALTER TABLE runs DROP CONSTRAINT runs_idempotency_key_key;

-- NULL keys (runs submitted without one) never collide.
CREATE UNIQUE INDEX runs_requester_key ON runs (requester_id, idempotency_key);

-- 005_callbacks: a run may name a URL that is sent a signed event at each
-- change of its status (a proposal's callback_url). '' for none. Its sealed
-- checkpoints hold the same URL, so a changed row shows as damage.

ALTER TABLE runs ADD COLUMN callback_url TEXT NOT NULL DEFAULT '';

-- A run's callbacks go out in order: the dispatcher looks for the oldest
-- undelivered row of a run before it sends a later one (004's outbox_run
-- holds delivered rows too, for a prune).
CREATE INDEX outbox_run_undelivered ON outbox (run_id, id) WHERE delivered_at = 0;

-- 005_callbacks: a run may name a URL that is sent a signed event at each
-- change of its status (a proposal's callback_url). '' for none. Its sealed
-- checkpoints hold the same URL, so a changed row shows as damage.

ALTER TABLE runs ADD COLUMN callback_url TEXT NOT NULL DEFAULT '';

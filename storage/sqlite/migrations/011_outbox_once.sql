-- 011_outbox_once: a message may be queued at most once under a key of its
-- own (a channel's digest of one day), whichever process or replica queues
-- it first: the unique index refuses a second one, so two that queue at the
-- same moment cannot both commit. Messages without a key ('') are as before.
-- The same version, name and encoding as storage/postgres's 011_outbox_once.

ALTER TABLE outbox ADD COLUMN once_key TEXT NOT NULL DEFAULT '';

CREATE UNIQUE INDEX outbox_once ON outbox (once_key) WHERE once_key <> '';

-- 003_integrity: records are sealed with an HMAC under a key kept outside the
-- database. Each sealed row names its key (key_id) and carries its MAC; rows
-- written before keys have both ''. Audit events name the checkpoint their
-- transition wrote, so that verify can match every transition with its event,
-- and integrity_head is the sealed head of the audit chain (so that deleting
-- the newest events shows) and the time since when the store is keyed.

ALTER TABLE checkpoints ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE checkpoints ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_requests ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE approval_requests ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE decisions ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE operations ADD COLUMN mac TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN checkpoint_seq BIGINT NOT NULL DEFAULT 0;
ALTER TABLE audit ADD COLUMN checkpoint_hash TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN key_id TEXT NOT NULL DEFAULT '';
ALTER TABLE audit ADD COLUMN mac TEXT NOT NULL DEFAULT '';

CREATE TABLE integrity_head (
    id          INTEGER NOT NULL PRIMARY KEY CHECK (id = 1),
    keyed_since BIGINT  NOT NULL,
    seq         BIGINT  NOT NULL,
    hash        TEXT    NOT NULL,
    key_id      TEXT    NOT NULL,
    mac         TEXT    NOT NULL
);

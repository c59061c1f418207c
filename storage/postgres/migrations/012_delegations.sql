-- 012_delegations: someone may decide, for a while, what another may decide,
-- on their behalf. A delegation is sealed like a decision (key_id, mac): it
-- says who may approve. Revoking it sets revoked_at and revoked_by, by
-- compare-and-set on version. A decision made on someone's behalf names them
-- (on_behalf_of, '' for a decision in one's own right, as every older one).
-- The same version, name and encoding as storage/sqlite's 012_delegations.

CREATE TABLE delegations (
    id          TEXT    NOT NULL PRIMARY KEY,
    from_id     TEXT    NOT NULL,
    to_id       TEXT    NOT NULL,
    until_at    BIGINT  NOT NULL,
    reason      TEXT    NOT NULL DEFAULT '',
    created_by  TEXT    NOT NULL DEFAULT '',
    created_at  BIGINT  NOT NULL DEFAULT 0,
    revoked_at  BIGINT  NOT NULL DEFAULT 0,
    revoked_by  TEXT    NOT NULL DEFAULT '',
    version     BIGINT  NOT NULL,
    key_id      TEXT    NOT NULL DEFAULT '',
    mac         TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX delegations_to ON delegations (to_id, created_at, id);

ALTER TABLE decisions ADD COLUMN on_behalf_of TEXT NOT NULL DEFAULT '';

-- 013_reviews: the follow-up review of a forced approval (break-glass) is a
-- record of its own, one per forced run, written with the force and
-- acknowledged later by compare-and-set on its version.
-- The same version, name and encoding as storage/postgres's 013_reviews.

CREATE TABLE reviews (
    run_id          TEXT    NOT NULL PRIMARY KEY REFERENCES runs (id),
    request_id      TEXT    NOT NULL REFERENCES approval_requests (id),
    rule            TEXT    NOT NULL DEFAULT '',
    role            TEXT    NOT NULL,
    forced_by       TEXT    NOT NULL,
    reason          TEXT    NOT NULL DEFAULT '',
    due             INTEGER NOT NULL,
    status          TEXT    NOT NULL,
    acknowledged_by TEXT    NOT NULL DEFAULT '',
    acknowledged_at INTEGER NOT NULL DEFAULT 0,
    note            TEXT    NOT NULL DEFAULT '',
    reminded_at     INTEGER NOT NULL DEFAULT 0,
    created_at      INTEGER NOT NULL DEFAULT 0,
    version         INTEGER NOT NULL,
    key_id          TEXT    NOT NULL DEFAULT '',
    mac             TEXT    NOT NULL DEFAULT ''
);

CREATE INDEX reviews_status_due ON reviews (status, due, run_id);

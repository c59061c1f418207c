-- 002_replay_cache: the requests the Slack edge has taken, kept for their
-- signature window (see workflow.SeenRequest), so that a replay, or Slack's
-- own retry, gets the first answer and changes nothing.
--
-- answered_at is 0 while the first copy is being handled; then status,
-- content_type and body are its answer, byte for byte. Rows are deleted once
-- expires_at has passed, through seen_requests_expiry.

CREATE TABLE seen_requests (
    digest       TEXT    NOT NULL PRIMARY KEY,
    version      INTEGER NOT NULL,
    created_at   INTEGER NOT NULL DEFAULT 0,
    expires_at   INTEGER NOT NULL,
    answered_at  INTEGER NOT NULL DEFAULT 0,
    status       INTEGER NOT NULL DEFAULT 0,
    content_type TEXT    NOT NULL DEFAULT '',
    body         BLOB
);

CREATE INDEX seen_requests_expiry ON seen_requests (expires_at);

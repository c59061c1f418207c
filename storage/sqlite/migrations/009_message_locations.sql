-- 009_message_locations: where a request's message was posted in Slack is a
-- record of its own, written once by the delivery that posted it, instead of
-- two columns of the request row. The request row then has one writer, the
-- engine, and recording a post no longer races a decision on that row.
-- The same version, name and encoding as storage/postgres's
-- 009_message_locations.
--
-- The locations already recorded move over; when they were posted was not
-- kept, so posted_at is the request's creation, the closest known time
-- before it.

CREATE TABLE message_locations (
    request_id TEXT    NOT NULL PRIMARY KEY REFERENCES approval_requests (id),
    run_id     TEXT    NOT NULL REFERENCES runs (id),
    channel    TEXT    NOT NULL,
    message_ts TEXT    NOT NULL,
    posted_at  INTEGER NOT NULL DEFAULT 0
);

CREATE INDEX message_locations_run ON message_locations (run_id, posted_at, request_id);

INSERT INTO message_locations (request_id, run_id, channel, message_ts, posted_at)
    SELECT id, run_id, channel, message_ts, created_at FROM approval_requests WHERE message_ts <> '';

ALTER TABLE approval_requests DROP COLUMN channel;
ALTER TABLE approval_requests DROP COLUMN message_ts;

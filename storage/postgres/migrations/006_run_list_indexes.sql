-- 006_run_list_indexes: the agent API lists runs a page at a time, oldest
-- first on (created_at, id), with no filter or by task or by requester. Each
-- first page walks one of these indexes in order and stops at the page size,
-- instead of scanning and sorting every run (a status filter already has
-- runs_status_created).
CREATE INDEX runs_created ON runs (created_at, id);
CREATE INDEX runs_task_created ON runs (task_id, created_at, id);
CREATE INDEX runs_requester_created ON runs (requester_id, created_at, id);

-- Issue 27 (submissions): fewer index entries per submitted job. Each submission inserted an entry
-- into six of the nine indexes of jobs, under 32 concurrent submissions all on the rightmost page
-- of each btree (docs/benchmarks.md, REST API).
-- jobs_queue_idx (priority, created_at, id of the PENDING jobs) served no query: the scheduling
-- pass reads the PENDING jobs through jobs_status_id_idx like every other status and sorts its
-- union of PENDING, RESTARTING and growing jobs itself.
DROP INDEX IF EXISTS jobs_queue_idx;
-- The tags index holds only tagged jobs: GIN stores an "empty" entry for every job without tags
-- (most of them), and the list's tag filter (server/store/store_jobs.c) says tags <> '{}' so the
-- planner can use the partial index.
DROP INDEX IF EXISTS jobs_tags_idx;
CREATE INDEX jobs_tags_idx ON jobs USING gin (tags) WHERE tags <> '{}';

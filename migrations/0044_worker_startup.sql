-- Issue 26: the agent's part of a job's startup breakdown. worker_started carries how long the
-- launch's steps took on the node (docs/agent-protocol.md); ty_worker_started stores them with the
-- start, and ty_attempt_startup reads them. ty_worker_started takes them as three more arguments,
-- so its four-argument form goes (the definitions in server/store/sql/ make the new one).
ALTER TABLE workers
    ADD COLUMN code_fetch_s float8,
    ADD COLUMN checkpoint_fetch_s float8,
    ADD COLUMN process_start_s float8;
COMMENT ON COLUMN workers.code_fetch_s IS
    'Seconds the agent took to make the job''s code package ready for this launch; NULL: none.';
COMMENT ON COLUMN workers.checkpoint_fetch_s IS
    'Seconds the agent took to fetch the checkpoint (or unpack the checkpoint package) resumed from; NULL: none.';
COMMENT ON COLUMN workers.process_start_s IS
    'Seconds from the first fork to the last exec of the workers of this launch on the node; NULL: not sent.';
DROP FUNCTION IF EXISTS ty_worker_started(bigint, integer, integer, integer);

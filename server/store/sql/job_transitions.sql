-- The job state machine: every legal (status, event) -> status, read top to bottom in the order a
-- job lives. docs/lifecycle.md is the same table with who fires each event and what else happens
-- (tests/integration/test_lifecycle.py keeps the two equal); ty_job_transition() refuses
-- (SQLSTATE TY001) any change not listed here. The rows are replaced whole at every server start,
-- in the transaction that re-applies the definitions, so a database always holds exactly these.
-- to_status equal to from_status: the event is accepted and changes nothing. to_status NULL: the
-- job is removed.
DELETE FROM job_transitions;
INSERT INTO job_transitions (from_status, event, to_status) VALUES
    -- A user submits a job (ty_job_submit): there is no job before.
    (NULL, 'submit', 'PENDING'),
    -- The scheduler places it (ty_place): an attempt with its workers.
    ('PENDING', 'place', 'STARTING'),
    -- The attempt's last placed worker started (ty_worker_started).
    ('STARTING', 'running', 'RUNNING'),
    -- A worker failed with no failure left to restart (ty_job_fail): stop the others.
    ('STARTING', 'worker_failed', 'STOPPING'),
    ('RUNNING', 'worker_failed', 'STOPPING'),
    -- Another worker failed while stopping: the first failure's error stays.
    ('STOPPING', 'worker_failed', 'STOPPING'),
    -- The attempt ran past timeout_s (ty_jobs_timed_out): never restarted.
    ('STARTING', 'timeout', 'STOPPING'),
    ('RUNNING', 'timeout', 'STOPPING'),
    -- Not fired today (ty_jobs_timed_out skips stopping jobs); accepted and ignored.
    ('STOPPING', 'timeout', 'STOPPING'),
    -- A node of the attempt was lost with no failure left to restart (ty_node_lost).
    ('STARTING', 'node_lost', 'STOPPING'),
    ('RUNNING', 'node_lost', 'STOPPING'),
    -- Another node was lost while stopping: nothing else changes.
    ('STOPPING', 'node_lost', 'STOPPING'),
    -- A user stops a job that has no attempt yet: it ends at once.
    ('PENDING', 'stop', 'STOPPED'),
    -- With --slurm, Slurm rejected the job's allocation (ty_slurm_fail): it ends at once.
    ('PENDING', 'failed', 'FAILED'),
    -- A user stops a placed job: its workers are stopped first.
    ('STARTING', 'stop', 'STOPPING'),
    ('RUNNING', 'stop', 'STOPPING'),
    -- A second stop: accepted, nothing changes.
    ('STOPPING', 'stop', 'STOPPING'),
    -- Every worker of the attempt exited 0 (ty_job_settle).
    ('STARTING', 'succeeded', 'SUCCEEDED'),
    ('RUNNING', 'succeeded', 'SUCCEEDED'),
    -- The last worker of a stopping job is gone and the job has no error (ty_job_settle).
    ('STOPPING', 'stopped', 'STOPPED'),
    -- The same when the job has an error.
    ('STOPPING', 'failed', 'FAILED'),
    -- A user deletes a finished job (ty_job_request): its rows go by cascade.
    ('SUCCEEDED', 'delete', NULL),
    ('FAILED', 'delete', NULL),
    ('STOPPED', 'delete', NULL),
    -- A worker failed or a node was lost while failures are left (ty_job_fail): restart.
    ('STARTING', 'retry', 'RESTARTING'),
    ('RUNNING', 'retry', 'RESTARTING'),
    -- Any failure while restarting: the attempt has already ended, nothing changes.
    ('RESTARTING', 'retry', 'RESTARTING'),
    -- Not fired (ty_job_fail turns them into retry); accepted and ignored.
    ('RESTARTING', 'worker_failed', 'RESTARTING'),
    ('RESTARTING', 'node_lost', 'RESTARTING'),
    -- The ended attempt has no live worker: the scheduler places the job again (ty_place).
    ('RESTARTING', 'place', 'STARTING'),
    -- A user stops a restarting job.
    ('RESTARTING', 'stop', 'STOPPING'),
    -- A node the job runs on is drained (ty_job_preempt): restart elsewhere, not a failure.
    ('STARTING', 'preempted', 'RESTARTING'),
    ('RUNNING', 'preempted', 'RESTARTING'),
    -- Not fired (ty_job_preempt leaves a restarting job alone); accepted and ignored.
    ('RESTARTING', 'preempted', 'RESTARTING'),
    -- An elastic job restarts to grow (ty_job_resize): not a failure nor a preemption.
    ('STARTING', 'resize', 'RESTARTING'),
    ('RUNNING', 'resize', 'RESTARTING'),
    -- Not fired (ty_job_resize leaves a restarting job alone); accepted and ignored.
    ('RESTARTING', 'resize', 'RESTARTING');

-- One job state machine (docs/lifecycle.md, docs/decisions.md). Until now the lifecycle was split
-- between the functions of 0002, statements in the server's C code (submit, stop, delete,
-- timeouts) and the CHECK on jobs.status. From here on:
--   job_statuses     the statuses, and which are terminal;
--   job_transitions  every legal (status, event) -> status;
--   ty_job_transition() the only writer of jobs.status: it looks the change up in the table and
--                    refuses (raises SQLSTATE TY001) one that is not there;
--   ty_job_request() the events a user asks for (stop, delete): refused without an error when
--                    the job's status does not allow them, so the API can answer 409.
-- The rows of job_transitions are server/store/sql/job_transitions.sql; the statuses inserted
-- here are kept current by server/store/sql/job_statuses.sql.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

CREATE TABLE job_statuses (
    name        text PRIMARY KEY,
    terminal    boolean NOT NULL,
    description text NOT NULL
);
COMMENT ON TABLE job_statuses IS 'Every job status (DESIGN.md section 2); the C enum in common/job_status.h spells the same names.';
COMMENT ON COLUMN job_statuses.name IS 'The status as the API spells it.';
COMMENT ON COLUMN job_statuses.terminal IS 'A job never leaves it; it sets finished_at and ends the attempt, and only then may the job be deleted.';
COMMENT ON COLUMN job_statuses.description IS 'What the status means, in words.';

INSERT INTO job_statuses (name, terminal, description) VALUES
    ('PENDING', false, 'Submitted; waiting until all its workers can be placed at once.'),
    ('STARTING', false, 'An attempt is placed; its workers are being launched.'),
    ('RUNNING', false, 'Every worker of the current attempt has started.'),
    ('RESTARTING', false, 'Between a failed attempt and the next one (restarts are not yet implemented: no transition enters it).'),
    ('STOPPING', false, 'Its workers are being stopped: a stop was requested, a worker failed, it timed out or a node was lost.'),
    ('SUCCEEDED', true, 'Every worker of its final attempt exited 0.'),
    ('FAILED', true, 'A worker failed, it timed out or a node was lost, and its workers are gone.'),
    ('STOPPED', true, 'Stopped on request; its workers are gone.');

ALTER TABLE jobs DROP CONSTRAINT jobs_status_check;
ALTER TABLE jobs ADD CONSTRAINT jobs_status_fkey FOREIGN KEY (status) REFERENCES job_statuses (name);
ALTER TABLE attempts ADD CONSTRAINT attempts_status_fkey
    FOREIGN KEY (status) REFERENCES job_statuses (name);
COMMENT ON COLUMN jobs.status IS 'One of job_statuses; changed only by ty_job_transition().';

CREATE TABLE job_transitions (
    from_status text REFERENCES job_statuses (name),
    event       text NOT NULL,
    to_status   text REFERENCES job_statuses (name)
);
CREATE UNIQUE INDEX job_transitions_key ON job_transitions (coalesce(from_status, ''), event);
COMMENT ON TABLE job_transitions IS 'Every legal job status change; docs/lifecycle.md is its table with who triggers each and what else happens (tests/integration/test_lifecycle.py keeps the two equal).';
COMMENT ON COLUMN job_transitions.from_status IS 'Status the event applies to; NULL for submit (no job yet).';
COMMENT ON COLUMN job_transitions.event IS 'What happened: submit, place, running, worker_failed, timeout, node_lost, stop, succeeded, stopped, failed, delete.';
COMMENT ON COLUMN job_transitions.to_status IS 'Status after the event (equal to from_status: accepted and ignored); NULL for delete (the job is removed).';
COMMENT ON INDEX job_transitions_key IS 'One row per (status, event): the machine is deterministic.';

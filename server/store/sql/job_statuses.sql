-- Every job status (docs/lifecycle.md), and which are terminal. The C enum in common/job_status.h
-- spells the same names. Migration 0006 created the table with these names (jobs.status and
-- attempts.status reference them); the terminal flags and descriptions are kept current here.
-- A status no longer listed is deleted, which fails while a job or attempt still holds it: a
-- migration moves those rows first.
INSERT INTO job_statuses (name, terminal, description) VALUES
    ('PENDING', false, 'Submitted; waiting until all its workers can be placed at once.'),
    ('STARTING', false, 'An attempt is placed; its workers are being launched.'),
    ('RUNNING', false, 'Every worker of the current attempt has started.'),
    ('RESTARTING', false, 'Between an attempt that failed and the next one: the ended attempt''s workers are being stopped, then the job waits to be placed again.'),
    ('STOPPING', false, 'Its workers are being stopped: a stop was requested, a worker failed, it timed out or a node was lost.'),
    ('SUCCEEDED', true, 'Every worker of its final attempt exited 0.'),
    ('FAILED', true, 'A worker failed, it timed out or a node was lost, and its workers are gone.'),
    ('STOPPED', true, 'Stopped on request; its workers are gone.')
ON CONFLICT (name) DO UPDATE SET terminal = EXCLUDED.terminal, description = EXCLUDED.description
WHERE (job_statuses.terminal, job_statuses.description)
      IS DISTINCT FROM (EXCLUDED.terminal, EXCLUDED.description);
DELETE FROM job_statuses
 WHERE name NOT IN ('PENDING', 'STARTING', 'RUNNING', 'RESTARTING', 'STOPPING', 'SUCCEEDED',
                    'FAILED', 'STOPPED');

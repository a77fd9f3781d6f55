-- Issue 28: jobs placed through Slurm (--slurm). Each attempt runs in one Slurm allocation; the
-- job holds the allocation submitted for its next (or current) attempt until it is cancelled.
-- Schema only: the functions that go with it are definitions in server/store/sql/.

ALTER TABLE jobs ADD COLUMN slurm_job_id bigint;
COMMENT ON COLUMN jobs.slurm_job_id IS 'With --slurm: the Slurm job id of the allocation submitted for the job''s next or current attempt, NULL when none is held (cancelled, or not submitted yet).';
ALTER TABLE attempts ADD COLUMN slurm_job_id bigint;
COMMENT ON COLUMN attempts.slurm_job_id IS 'With --slurm: the Slurm job id of the allocation the attempt ran in; NULL without Slurm.';

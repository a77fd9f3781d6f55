-- Issue 22 (tenants kept apart): quotas per user, and later per project. A row overrides the
-- server's defaults for one subject; a NULL limit takes the default (--artifact-quota-bytes for
-- artifact_bytes), 0 means unlimited. This branch enforces artifact_bytes for users; cpus, gpus
-- and project rows are there to be filled in by the projects work.

CREATE TABLE quotas (
    subject_kind   text NOT NULL CHECK (subject_kind IN ('user', 'project')),
    subject        text NOT NULL,
    artifact_bytes bigint CHECK (artifact_bytes >= 0),
    cpus           integer CHECK (cpus >= 0),
    gpus           integer CHECK (gpus >= 0),
    updated_at     timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subject_kind, subject)
);
COMMENT ON TABLE quotas IS 'Limits that override the server''s defaults for one user or project.';
COMMENT ON COLUMN quotas.subject_kind IS 'user (a token name, the owner of jobs and packages) or project.';
COMMENT ON COLUMN quotas.subject IS 'The user''s or project''s name.';
COMMENT ON COLUMN quotas.artifact_bytes IS 'Bytes the subject may keep in the artifact store (code packages it uploaded, checkpoint parts of its jobs); NULL: the server''s --artifact-quota-bytes; 0: unlimited.';
COMMENT ON COLUMN quotas.cpus IS 'CPUs the subject''s running workers may hold at once; NULL: the server''s default; 0: unlimited.';
COMMENT ON COLUMN quotas.gpus IS 'GPUs the subject''s running workers may hold at once; NULL: the server''s default; 0: unlimited.';
COMMENT ON COLUMN quotas.updated_at IS 'Last change.';

-- What a user keeps in the artifact store is summed over their jobs and their packages.
CREATE INDEX jobs_owner ON jobs (owner);
CREATE INDEX code_package_owners_owner ON code_package_owners (owner);

-- Volume caps in bytes (--max-report-bytes-per-job), besides the counts.
ALTER TABLE jobs ADD COLUMN report_bytes bigint NOT NULL DEFAULT 0 CHECK (report_bytes >= 0);
COMMENT ON COLUMN jobs.report_bytes IS 'Bytes of reports stored for the job (their metrics as JSON text, checkpoint directory, 64 per row), against --max-report-bytes-per-job.';

-- Trainyard's first schema: tokens, nodes, jobs and their attempts, workers, events, metrics,
-- checkpoints. Applied by the server at start (server/store/db_migrate.c); never edited once released.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

CREATE TABLE api_tokens (
    id          bigserial PRIMARY KEY,
    name        text NOT NULL CHECK (length(name) BETWEEN 1 AND 128),
    role        text NOT NULL CHECK (role IN ('admin', 'user', 'viewer')),
    token_hash  text NOT NULL UNIQUE,
    created_at  timestamptz NOT NULL DEFAULT now(),
    revoked_at  timestamptz
);
COMMENT ON TABLE api_tokens IS 'Bearer tokens for the REST API; only the SHA-256 of each token is kept.';
COMMENT ON COLUMN api_tokens.name IS 'Who the token belongs to; jobs submitted with it are owned by this name.';
COMMENT ON COLUMN api_tokens.role IS 'admin: everything; user: submit and stop own jobs; viewer: read only.';
COMMENT ON COLUMN api_tokens.token_hash IS 'Lowercase hex SHA-256 of the token text.';
COMMENT ON COLUMN api_tokens.created_at IS 'When the token was issued.';
COMMENT ON COLUMN api_tokens.revoked_at IS 'Set when the token is deleted; a revoked token authenticates nothing.';

CREATE TABLE nodes (
    id                text PRIMARY KEY,
    hostname          text NOT NULL,
    address           text NOT NULL,
    status            text NOT NULL CHECK (status IN ('ALIVE', 'LOST')),
    draining          boolean NOT NULL DEFAULT false,
    resources         jsonb NOT NULL,
    gpu_type          text,
    labels            jsonb NOT NULL DEFAULT '{}',
    agent_version     text,
    registered_at     timestamptz NOT NULL DEFAULT now(),
    last_heartbeat_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE nodes IS 'Machines whose agent registered with the server.';
COMMENT ON COLUMN nodes.id IS 'Stable node id chosen by the agent (kept across agent restarts).';
COMMENT ON COLUMN nodes.hostname IS 'Host name the agent reported.';
COMMENT ON COLUMN nodes.address IS 'Address other nodes reach this one at (MASTER_ADDR when it holds rank 0).';
COMMENT ON COLUMN nodes.status IS 'ALIVE while heartbeats arrive; LOST after the heartbeat timeout.';
COMMENT ON COLUMN nodes.draining IS 'A drained node keeps its running workers but gets no new placements.';
COMMENT ON COLUMN nodes.resources IS 'Total resources: {"CPU": n, "memory_mb": n, "GPU": [indices], custom...}.';
COMMENT ON COLUMN nodes.gpu_type IS 'Accelerator type of the node''s GPUs (e.g. H100), matched by accelerator_type.';
COMMENT ON COLUMN nodes.labels IS 'Free labels the agent declared.';
COMMENT ON COLUMN nodes.agent_version IS 'Version of the trainyard-agent on the node.';
COMMENT ON COLUMN nodes.registered_at IS 'First registration time.';
COMMENT ON COLUMN nodes.last_heartbeat_at IS 'Time of the last heartbeat received.';

CREATE TABLE jobs (
    id             bigserial PRIMARY KEY,
    name           text NOT NULL,
    owner          text NOT NULL,
    status         text NOT NULL CHECK (status IN ('PENDING', 'STARTING', 'RUNNING', 'RESTARTING',
                                                   'STOPPING', 'SUCCEEDED', 'FAILED', 'STOPPED')),
    status_message text,
    priority       integer NOT NULL DEFAULT 0,
    spec           jsonb NOT NULL,
    attempt        integer NOT NULL DEFAULT 0,
    error          text,
    last_metrics   jsonb,
    created_at     timestamptz NOT NULL DEFAULT now(),
    started_at     timestamptz,
    finished_at    timestamptz
);
CREATE INDEX jobs_status_id_idx ON jobs (status, id DESC);
CREATE INDEX jobs_queue_idx ON jobs (priority DESC, created_at, id) WHERE status = 'PENDING';
COMMENT ON TABLE jobs IS 'Training job submissions, one row per job.';
COMMENT ON COLUMN jobs.id IS 'Job id, increasing with submission order.';
COMMENT ON COLUMN jobs.name IS 'Human name of the run.';
COMMENT ON COLUMN jobs.owner IS 'Name of the token that submitted the job.';
COMMENT ON COLUMN jobs.status IS 'PENDING, STARTING, RUNNING, RESTARTING, STOPPING, SUCCEEDED, FAILED or STOPPED.';
COMMENT ON COLUMN jobs.status_message IS 'Why the job is in its status (e.g. which resource a pending job waits for).';
COMMENT ON COLUMN jobs.priority IS 'Queue order: higher first, then submission time.';
COMMENT ON COLUMN jobs.spec IS 'The normalized job specification (DESIGN.md section 2).';
COMMENT ON COLUMN jobs.attempt IS 'Number of the current attempt (0 before the first placement).';
COMMENT ON COLUMN jobs.error IS 'Why the job failed, for FAILED jobs.';
COMMENT ON COLUMN jobs.last_metrics IS 'Last metrics reported by rank 0 (the job result).';
COMMENT ON COLUMN jobs.created_at IS 'Submission time (commit of the 201).';
COMMENT ON COLUMN jobs.started_at IS 'When all workers of the first attempt were running.';
COMMENT ON COLUMN jobs.finished_at IS 'When the job reached a terminal status.';

CREATE TABLE job_events (
    id       bigserial PRIMARY KEY,
    job_id   bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt  integer NOT NULL,
    status   text NOT NULL,
    message  text,
    at       timestamptz NOT NULL DEFAULT clock_timestamp()
);
CREATE INDEX job_events_job_idx ON job_events (job_id, id);
COMMENT ON TABLE job_events IS 'Every status change of every job, with its time.';
COMMENT ON COLUMN job_events.job_id IS 'The job that changed.';
COMMENT ON COLUMN job_events.attempt IS 'The attempt current at the change.';
COMMENT ON COLUMN job_events.status IS 'The status entered.';
COMMENT ON COLUMN job_events.message IS 'Why, in words.';
COMMENT ON COLUMN job_events.at IS 'When the change was committed.';

CREATE TABLE attempts (
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt     integer NOT NULL,
    status      text NOT NULL,
    world_size  integer NOT NULL,
    master_addr text,
    master_port integer,
    error       text,
    created_at  timestamptz NOT NULL DEFAULT now(),
    finished_at timestamptz,
    PRIMARY KEY (job_id, attempt)
);
COMMENT ON TABLE attempts IS 'One placement of a job''s workers; a restart creates a new attempt.';
COMMENT ON COLUMN attempts.job_id IS 'The job.';
COMMENT ON COLUMN attempts.attempt IS 'Attempt number, from 1.';
COMMENT ON COLUMN attempts.status IS 'Status of this attempt (same vocabulary as jobs.status).';
COMMENT ON COLUMN attempts.world_size IS 'Number of workers placed.';
COMMENT ON COLUMN attempts.master_addr IS 'Address of the node holding rank 0.';
COMMENT ON COLUMN attempts.master_port IS 'Port reserved on that node for the rendezvous.';
COMMENT ON COLUMN attempts.error IS 'Why the attempt failed.';
COMMENT ON COLUMN attempts.created_at IS 'Placement time.';
COMMENT ON COLUMN attempts.finished_at IS 'When the last worker of the attempt ended.';

CREATE TABLE workers (
    job_id      bigint NOT NULL,
    attempt     integer NOT NULL,
    rank        integer NOT NULL,
    local_rank  integer NOT NULL,
    node_rank   integer NOT NULL,
    node_id     text NOT NULL REFERENCES nodes (id),
    gpus        integer[] NOT NULL DEFAULT '{}',
    resources   jsonb NOT NULL,
    status      text NOT NULL CHECK (status IN ('PLACED', 'RUNNING', 'EXITED', 'LOST')),
    pid         integer,
    exit_code   integer,
    signal      integer,
    started_at  timestamptz,
    finished_at timestamptz,
    PRIMARY KEY (job_id, attempt, rank),
    FOREIGN KEY (job_id, attempt) REFERENCES attempts (job_id, attempt) ON DELETE CASCADE
);
CREATE INDEX workers_node_idx ON workers (node_id) WHERE status IN ('PLACED', 'RUNNING');
COMMENT ON TABLE workers IS 'Worker processes of each attempt.';
COMMENT ON COLUMN workers.job_id IS 'The job.';
COMMENT ON COLUMN workers.attempt IS 'The attempt.';
COMMENT ON COLUMN workers.rank IS 'Global rank (RANK).';
COMMENT ON COLUMN workers.local_rank IS 'Rank within its node (LOCAL_RANK).';
COMMENT ON COLUMN workers.node_rank IS 'Rank of its node within the attempt (NODE_RANK).';
COMMENT ON COLUMN workers.node_id IS 'Node it runs on.';
COMMENT ON COLUMN workers.gpus IS 'GPU indices given to it (CUDA_VISIBLE_DEVICES), ascending.';
COMMENT ON COLUMN workers.resources IS 'The resource bundle it holds.';
COMMENT ON COLUMN workers.status IS 'PLACED, RUNNING, EXITED or LOST (node lost).';
COMMENT ON COLUMN workers.pid IS 'Process id on its node.';
COMMENT ON COLUMN workers.exit_code IS 'Exit status when it exited normally.';
COMMENT ON COLUMN workers.signal IS 'Signal number when a signal ended it.';
COMMENT ON COLUMN workers.started_at IS 'When the agent started it.';
COMMENT ON COLUMN workers.finished_at IS 'When it ended.';

CREATE TABLE metrics (
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt     integer NOT NULL,
    rank        integer NOT NULL,
    seq         bigint NOT NULL,
    name        text NOT NULL,
    step        bigint,
    value       double precision NOT NULL,
    reported_at timestamptz NOT NULL,
    PRIMARY KEY (job_id, attempt, rank, seq, name)
);
CREATE INDEX metrics_name_idx ON metrics (job_id, name, rank, reported_at);
COMMENT ON TABLE metrics IS 'Numbers each worker reported; the key makes resent reports idempotent.';
COMMENT ON COLUMN metrics.job_id IS 'The job.';
COMMENT ON COLUMN metrics.attempt IS 'The attempt.';
COMMENT ON COLUMN metrics.rank IS 'Reporting rank.';
COMMENT ON COLUMN metrics.seq IS 'The report''s sequence number within its rank (1, 2, ...).';
COMMENT ON COLUMN metrics.name IS 'Metric name.';
COMMENT ON COLUMN metrics.step IS 'Training step the worker attached, if any.';
COMMENT ON COLUMN metrics.value IS 'Metric value.';
COMMENT ON COLUMN metrics.reported_at IS 'When the worker reported it.';

CREATE TABLE checkpoints (
    id          bigserial PRIMARY KEY,
    job_id      bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    attempt     integer NOT NULL,
    idx         integer NOT NULL,
    step        bigint,
    metrics     jsonb NOT NULL DEFAULT '{}',
    size_bytes  bigint,
    sha256      text,
    location    text,
    status      text NOT NULL CHECK (status IN ('UPLOADING', 'COMMITTED', 'DELETED')),
    created_at  timestamptz NOT NULL DEFAULT now(),
    deleted_at  timestamptz,
    UNIQUE (job_id, attempt, idx)
);
COMMENT ON TABLE checkpoints IS 'Checkpoints registered by jobs (the k-th report of all ranks).';
COMMENT ON COLUMN checkpoints.job_id IS 'The job.';
COMMENT ON COLUMN checkpoints.attempt IS 'The attempt that wrote it.';
COMMENT ON COLUMN checkpoints.idx IS 'k: the report number within the attempt.';
COMMENT ON COLUMN checkpoints.step IS 'Training step reported with it.';
COMMENT ON COLUMN checkpoints.metrics IS 'Rank 0''s metrics of the same report.';
COMMENT ON COLUMN checkpoints.size_bytes IS 'Total size of its files.';
COMMENT ON COLUMN checkpoints.sha256 IS 'SHA-256 of its tar stream.';
COMMENT ON COLUMN checkpoints.location IS 'Where its files live (storage_path or the artifact store).';
COMMENT ON COLUMN checkpoints.status IS 'UPLOADING until all files are stored, then COMMITTED; DELETED by retention.';
COMMENT ON COLUMN checkpoints.created_at IS 'Registration time.';
COMMENT ON COLUMN checkpoints.deleted_at IS 'When retention (num_to_keep) deleted it.';

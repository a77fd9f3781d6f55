-- Live streams (docs/streams.md): everything a subscriber of /stream receives is a row here first,
-- so that a client resuming after sequence number N gets exactly the rows after N, from the same
-- table whether it missed them by a second or by a day.
--
-- job_stream: one ordered stream per job; seq is contiguous per job (1, 2, 3, ...) and assigned
-- under the job row's lock (jobs.stream_seq), so commit order is seq order. cluster_stream: one
-- ordered stream for the whole cluster (jobs' status changes, nodes' changes). Rows reach the
-- stream three ways: triggers below (job events, worker changes, checkpoints, nodes), and
-- ty_stream_append_batch() for what the server ingests in batches (reports, log chunks). Every
-- insert notifies channel 'ty_stream' (payload: job id) or 'ty_cluster', once per statement.
-- Schema only: the functions, triggers and views that go with it are definitions, one file
-- each in server/store/sql/, re-applied at every server start (README.md, "Database schema
-- and definitions").

ALTER TABLE jobs ADD COLUMN stream_seq bigint NOT NULL DEFAULT 0;
COMMENT ON COLUMN jobs.stream_seq IS 'seq of the newest row of this job''s stream (job_stream); 0 before any.';

CREATE TABLE job_stream (
    job_id     bigint NOT NULL REFERENCES jobs (id) ON DELETE CASCADE,
    seq        bigint NOT NULL CHECK (seq >= 1),
    kind       text NOT NULL CHECK (kind IN ('event', 'worker', 'report', 'log', 'log_dropped',
                                             'checkpoint')),
    attempt    integer,
    rank       integer,
    log_offset bigint,
    log_bytes  integer,
    body       jsonb NOT NULL,
    at         timestamptz NOT NULL DEFAULT clock_timestamp(),
    PRIMARY KEY (job_id, seq)
);
CREATE UNIQUE INDEX job_stream_log_idx ON job_stream (job_id, attempt, rank, log_offset)
    WHERE kind = 'log';
COMMENT ON TABLE job_stream IS 'Each job''s stream (docs/streams.md): status events, worker changes, reports, log chunks, checkpoints, in seq order.';
COMMENT ON COLUMN job_stream.job_id IS 'The job.';
COMMENT ON COLUMN job_stream.seq IS 'Position in the job''s stream: 1, 2, 3, ... in commit order (log rows removed by the log cap leave a gap, announced by a log_dropped row).';
COMMENT ON COLUMN job_stream.kind IS 'event (a job_events row), worker (a worker''s status changed), report (one report of one rank, with its numbers), log (a chunk of one rank''s output), log_dropped (the log cap removed older chunks), checkpoint (registered or changed).';
COMMENT ON COLUMN job_stream.attempt IS 'Attempt the row belongs to (NULL when none).';
COMMENT ON COLUMN job_stream.rank IS 'Rank the row belongs to (worker, report, log), else NULL.';
COMMENT ON COLUMN job_stream.log_offset IS 'kind log: byte offset, in the rank''s output of that attempt, of the chunk''s first byte (a resent chunk has the same offset and is ignored).';
COMMENT ON COLUMN job_stream.log_bytes IS 'kind log: bytes of the rank''s output the chunk covers.';
COMMENT ON COLUMN job_stream.body IS 'The message''s data, as sent to subscribers (docs/streams.md lists the fields of each kind).';
COMMENT ON COLUMN job_stream.at IS 'When the row was written.';

CREATE TABLE cluster_stream (
    seq     bigserial PRIMARY KEY,
    kind    text NOT NULL CHECK (kind IN ('job', 'node')),
    job_id  bigint,
    node_id text,
    body    jsonb NOT NULL,
    at      timestamptz NOT NULL DEFAULT clock_timestamp()
);
COMMENT ON TABLE cluster_stream IS 'The cluster''s stream (docs/streams.md): every job status change (and deletion) and every node change, in commit order.';
COMMENT ON COLUMN cluster_stream.seq IS 'Position in the cluster stream.';
COMMENT ON COLUMN cluster_stream.kind IS 'job (a job''s status changed, or it was deleted) or node (a node joined, was lost, or was drained).';
COMMENT ON COLUMN cluster_stream.job_id IS 'kind job: the job (no foreign key: the row outlives a deleted job).';
COMMENT ON COLUMN cluster_stream.node_id IS 'kind node: the node.';
COMMENT ON COLUMN cluster_stream.body IS 'The message''s data, as sent to subscribers.';
COMMENT ON COLUMN cluster_stream.at IS 'When the row was written.';

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

-- Appends rows to job streams in one statement. p_rows: a JSON array of objects {job_id, kind,
-- attempt, rank, log_offset, log_bytes, body}; rows of a job that no longer exists, and log chunks
-- already stored (same job, attempt, rank, log_offset), are skipped without using a seq. Returns
-- the number of rows appended. Each job's seqs are reserved with one UPDATE of its row.
CREATE FUNCTION ty_stream_append_batch(p_rows jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    appended integer;
BEGIN
    WITH r AS (
        SELECT (e->>'job_id')::bigint AS job_id, e->>'kind' AS kind,
               (e->>'attempt')::integer AS attempt, (e->>'rank')::integer AS rank,
               (e->>'log_offset')::bigint AS log_offset, (e->>'log_bytes')::integer AS log_bytes,
               e->'body' AS body, ord
        FROM jsonb_array_elements(p_rows) WITH ORDINALITY AS t(e, ord)
    ), fresh AS (
        SELECT r.*, row_number() OVER (PARTITION BY r.job_id ORDER BY r.ord) AS n
        FROM r
        WHERE r.kind <> 'log' OR NOT EXISTS (
            SELECT 1 FROM job_stream s
            WHERE s.job_id = r.job_id AND s.attempt = r.attempt AND s.rank = r.rank
              AND s.log_offset = r.log_offset AND s.kind = 'log')
    ), counts AS (
        SELECT job_id, count(*) AS n FROM fresh GROUP BY job_id
    ), bumped AS (
        UPDATE jobs j SET stream_seq = j.stream_seq + c.n
        FROM counts c WHERE j.id = c.job_id
        RETURNING j.id, j.stream_seq - c.n AS base
    )
    INSERT INTO job_stream (job_id, seq, kind, attempt, rank, log_offset, log_bytes, body)
    SELECT f.job_id, b.base + f.n, f.kind, f.attempt, f.rank, f.log_offset, f.log_bytes, f.body
    FROM fresh f JOIN bumped b ON b.id = f.job_id
    ORDER BY f.job_id, f.n;
    GET DIAGNOSTICS appended = ROW_COUNT;
    RETURN appended;
END $$;

-- Appends one row to a job's stream; returns its seq (NULL when the job does not exist).
CREATE FUNCTION ty_stream_append(p_job bigint, p_kind text, p_attempt integer, p_rank integer,
                                 p_body jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    s bigint;
BEGIN
    UPDATE jobs SET stream_seq = stream_seq + 1 WHERE id = p_job RETURNING stream_seq INTO s;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO job_stream (job_id, seq, kind, attempt, rank, body)
    VALUES (p_job, s, p_kind, p_attempt, p_rank, p_body);
    RETURN s;
END $$;

-- Notifications: one per job (or one for the cluster) per statement, sent at commit.
CREATE FUNCTION ty_stream_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ty_stream', job_id::text) FROM (SELECT DISTINCT job_id FROM new_rows) j;
    RETURN NULL;
END $$;
CREATE TRIGGER job_stream_notify AFTER INSERT ON job_stream
    REFERENCING NEW TABLE AS new_rows FOR EACH STATEMENT EXECUTE FUNCTION ty_stream_notify();

CREATE FUNCTION ty_cluster_notify() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    PERFORM pg_notify('ty_cluster', '');
    RETURN NULL;
END $$;
CREATE TRIGGER cluster_stream_notify AFTER INSERT ON cluster_stream
    FOR EACH STATEMENT EXECUTE FUNCTION ty_cluster_notify();

-- Job events (every status change, and the warnings recorded beside them) → the job's stream and
-- the cluster's.
CREATE FUNCTION ty_stream_job_event() RETURNS trigger
LANGUAGE plpgsql AS $$
DECLARE
    j jobs%ROWTYPE;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = NEW.job_id;
    PERFORM ty_stream_append(NEW.job_id, 'event', NEW.attempt, NULL,
                             jsonb_build_object('status', NEW.status, 'message', NEW.message,
                                                'attempt', NEW.attempt, 'time', NEW.at));
    INSERT INTO cluster_stream (kind, job_id, body)
    VALUES ('job', NEW.job_id,
            jsonb_build_object('id', NEW.job_id, 'name', j.name, 'owner', j.owner,
                               'status', NEW.status, 'message', NEW.message,
                               'attempt', NEW.attempt, 'time', NEW.at));
    RETURN NULL;
END $$;
CREATE TRIGGER job_events_stream AFTER INSERT ON job_events
    FOR EACH ROW EXECUTE FUNCTION ty_stream_job_event();

CREATE FUNCTION ty_stream_job_deleted() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO cluster_stream (kind, job_id, body)
    VALUES ('job', OLD.id, jsonb_build_object('id', OLD.id, 'name', OLD.name, 'owner', OLD.owner,
                                              'deleted', true));
    RETURN NULL;
END $$;
CREATE TRIGGER jobs_deleted_stream AFTER DELETE ON jobs
    FOR EACH ROW EXECUTE FUNCTION ty_stream_job_deleted();

-- Workers: placed, started, exited, lost.
CREATE FUNCTION ty_stream_worker() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status IS NOT DISTINCT FROM NEW.status
       AND OLD.pid IS NOT DISTINCT FROM NEW.pid THEN
        RETURN NULL;
    END IF;
    PERFORM ty_stream_append(NEW.job_id, 'worker', NEW.attempt, NEW.rank,
                             jsonb_build_object('rank', NEW.rank, 'attempt', NEW.attempt,
                                                'node_id', NEW.node_id, 'status', NEW.status,
                                                'pid', NEW.pid, 'gpus', to_jsonb(NEW.gpus),
                                                'exit_code', NEW.exit_code,
                                                'signal', NEW.signal));
    RETURN NULL;
END $$;
CREATE TRIGGER workers_stream AFTER INSERT OR UPDATE ON workers
    FOR EACH ROW EXECUTE FUNCTION ty_stream_worker();

-- Checkpoints: registered, and every change of status.
CREATE FUNCTION ty_stream_checkpoint() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status IS NOT DISTINCT FROM NEW.status
       AND OLD.size_bytes IS NOT DISTINCT FROM NEW.size_bytes THEN
        RETURN NULL;
    END IF;
    PERFORM ty_stream_append(NEW.job_id, 'checkpoint', NEW.attempt, NULL,
                             jsonb_build_object('id', NEW.id, 'attempt', NEW.attempt,
                                                'index', NEW.idx, 'step', NEW.step,
                                                'metrics', NEW.metrics, 'status', NEW.status,
                                                'size_bytes', NEW.size_bytes));
    RETURN NULL;
END $$;
CREATE TRIGGER checkpoints_stream AFTER INSERT OR UPDATE ON checkpoints
    FOR EACH ROW EXECUTE FUNCTION ty_stream_checkpoint();

-- Nodes: joined (or re-registered), lost, drained, undrained. Heartbeats change none of these.
CREATE FUNCTION ty_stream_node() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    IF TG_OP = 'UPDATE' AND OLD.status IS NOT DISTINCT FROM NEW.status
       AND OLD.draining IS NOT DISTINCT FROM NEW.draining
       AND OLD.address IS NOT DISTINCT FROM NEW.address
       AND OLD.resources IS NOT DISTINCT FROM NEW.resources THEN
        RETURN NULL;
    END IF;
    INSERT INTO cluster_stream (kind, node_id, body)
    VALUES ('node', NEW.id,
            jsonb_build_object('id', NEW.id, 'hostname', NEW.hostname, 'address', NEW.address,
                               'status', NEW.status, 'draining', NEW.draining,
                               'resources', NEW.resources, 'gpu_type', NEW.gpu_type));
    RETURN NULL;
END $$;
CREATE TRIGGER nodes_stream AFTER INSERT OR UPDATE ON nodes
    FOR EACH ROW EXECUTE FUNCTION ty_stream_node();

-- Job events (every status change, and the warnings recorded beside them) → the jobs' streams and
-- the cluster's. A statement-level trigger over the statement's new events, in one statement: an
-- event without a seq (job_events.stream_seq) takes its job's next (as ty_stream_append_batch
-- does: one UPDATE of the job's row, under its lock, so commit order is seq order); one with a
-- seq (a submitted job's first event) keeps it, and its job's row is only read. Both stream rows
-- of every event are written in event order. A batch of submissions inserts its jobs and their
-- events with one statement each, and a row-level trigger cost an executor start-up per event
-- (docs/decisions.md, "Submissions: SQL functions …").
CREATE OR REPLACE FUNCTION ty_stream_job_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH c AS (
        SELECT job_id, count(*) FILTER (WHERE stream_seq IS NULL) AS n
          FROM new_events GROUP BY job_id ORDER BY job_id
    ), bumped AS (
        UPDATE jobs SET stream_seq = jobs.stream_seq + c.n
          FROM c WHERE jobs.id = c.job_id AND c.n > 0
        RETURNING jobs.id, jobs.stream_seq - c.n AS base, jobs.name, jobs.owner
    ), j AS (
        SELECT * FROM bumped
        UNION ALL
        SELECT jobs.id, 0, jobs.name, jobs.owner FROM jobs JOIN c ON jobs.id = c.job_id
         WHERE c.n = 0
    ), ev AS (
        SELECT n.id, n.job_id, n.attempt, n.status, n.message, n.at, j.name, j.owner,
               coalesce(n.stream_seq,
                        j.base + row_number() OVER (PARTITION BY n.job_id, n.stream_seq IS NULL
                                                    ORDER BY n.id)) AS seq
          FROM new_events n JOIN j ON j.id = n.job_id
    ), s AS (
        INSERT INTO job_stream (job_id, seq, kind, attempt, body)
        SELECT ev.job_id, ev.seq, 'event', ev.attempt,
               jsonb_build_object('status', ev.status, 'message', ev.message,
                                  'attempt', ev.attempt, 'time', ev.at)
          FROM ev ORDER BY ev.id
    )
    INSERT INTO cluster_stream (kind, job_id, body)
    SELECT 'job', ev.job_id,
           jsonb_build_object('id', ev.job_id, 'name', ev.name, 'owner', ev.owner,
                              'status', ev.status, 'message', ev.message,
                              'attempt', ev.attempt, 'time', ev.at)
      FROM ev ORDER BY ev.id;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER job_events_stream AFTER INSERT ON job_events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION ty_stream_job_event();

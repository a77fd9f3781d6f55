-- Job events (every status change, and the warnings recorded beside them) → the jobs' streams and
-- the cluster's. A statement-level trigger over the statement's new events: one statement takes
-- each job's next seqs (as ty_stream_append_batch does: one UPDATE of its row, under its lock,
-- so commit order is seq order) and writes both stream rows of every event, in event order. A
-- batch of submissions inserts its events with one statement, and a row-level trigger cost an
-- executor start-up per event (docs/decisions.md, "Submissions: SQL functions …").
CREATE OR REPLACE FUNCTION ty_stream_job_event() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
    WITH ev AS (
        SELECT n.*, row_number() OVER (PARTITION BY n.job_id ORDER BY n.id) AS r FROM new_events n
    ), c AS (
        SELECT job_id, count(*) AS n FROM new_events GROUP BY job_id ORDER BY job_id
    ), j AS (
        UPDATE jobs SET stream_seq = jobs.stream_seq + c.n
          FROM c WHERE jobs.id = c.job_id
        RETURNING jobs.id, jobs.stream_seq - c.n AS base, jobs.name, jobs.owner
    ), s AS (
        INSERT INTO job_stream (job_id, seq, kind, attempt, body)
        SELECT ev.job_id, j.base + ev.r, 'event', ev.attempt,
               jsonb_build_object('status', ev.status, 'message', ev.message,
                                  'attempt', ev.attempt, 'time', ev.at)
          FROM ev JOIN j ON j.id = ev.job_id
         ORDER BY ev.id
    )
    INSERT INTO cluster_stream (kind, job_id, body)
    SELECT 'job', ev.job_id,
           jsonb_build_object('id', ev.job_id, 'name', j.name, 'owner', j.owner,
                              'status', ev.status, 'message', ev.message,
                              'attempt', ev.attempt, 'time', ev.at)
      FROM ev JOIN j ON j.id = ev.job_id
     ORDER BY ev.id;
    RETURN NULL;
END $$;
CREATE OR REPLACE TRIGGER job_events_stream AFTER INSERT ON job_events
    REFERENCING NEW TABLE AS new_events
    FOR EACH STATEMENT EXECUTE FUNCTION ty_stream_job_event();

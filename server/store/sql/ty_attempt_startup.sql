-- The startup breakdown and the useful training time of one attempt of job j (README, "Goodput
-- and the startup breakdown"). The phases are consecutive, each starting where the one before
-- ended (never earlier, so that their sum is the time from queue entry to the first report;
-- greatest and least skip nulls, hence the CASEs):
--   queue_s           queue entry (the submission, or the end of the attempt before) -> placement
--   placement_s       placement -> every worker running (launch order, fetches, process starts)
--   framework_init_s  -> the first SDK contact (first progress heartbeat, or first report)
--   first_report_s    -> the first report of the attempt
--   code_fetch_s, checkpoint_fetch_s, process_start_s: the agent's steps of the launch, timed on
--                     the node and sent with worker_started (the slowest node's figure each;
--                     null: the launch had no such step, or an agent older than migration 0044)
--   placement_s       is what is left of placement -> every worker running after those three
--                     (the scheduler's decision, the launch message, the agent's own work)
-- A phase whose end has not happened is null.
-- useful_s is the training time that counts: from the first SDK contact to the attempt's end when
-- the job kept its work (the job's current attempt, unless it failed); for an attempt that ended
-- otherwise (failed, preempted, resized), up to its last checkpoint only (the next attempt resumes
-- from there), and none without one. lost_s is the rest of its training time.
-- t is MATERIALIZED: inlined, each of c1..u would repeat its subqueries in every expression that
-- uses a column of the CTE before (153 subplans, ~0.3 s to plan and run for every job GET).
CREATE OR REPLACE FUNCTION ty_attempt_startup(j jobs, a attempts) RETURNS jsonb
LANGUAGE sql STABLE AS $$
    WITH t AS MATERIALIZED (
        SELECT coalesce((SELECT p.finished_at FROM attempts p
                          WHERE p.job_id = a.job_id AND p.attempt < a.attempt
                          ORDER BY p.attempt DESC LIMIT 1), j.created_at) AS queued,
               a.created_at AS placed,
               (SELECT CASE WHEN bool_and(w.started_at IS NOT NULL) THEN max(w.started_at) END
                  FROM workers w WHERE w.job_id = a.job_id AND w.attempt = a.attempt) AS running,
               (SELECT jsonb_build_object('code', max(w.code_fetch_s),
                                          'ckpt', max(w.checkpoint_fetch_s),
                                          'proc', max(w.process_start_s))
                  FROM workers w WHERE w.job_id = a.job_id AND w.attempt = a.attempt) AS agent,
               (SELECT min(w.sdk_init_at) FROM workers w
                 WHERE w.job_id = a.job_id AND w.attempt = a.attempt) AS sdk,
               (SELECT min(r.reported_at) FROM reports r
                 WHERE r.job_id = a.job_id AND r.attempt = a.attempt) AS first_report,
               (SELECT max(c.created_at) FROM checkpoints c
                 WHERE c.job_id = a.job_id AND c.attempt = a.attempt
                   AND c.status IN ('COMMITTED', 'DELETED')) AS last_checkpoint
    ), c1 AS (
        SELECT t.*, greatest(t.queued, t.placed) AS t1 FROM t
    ), c2 AS (
        SELECT c1.*, CASE WHEN c1.running IS NOT NULL THEN greatest(c1.t1, c1.running) END AS t2
          FROM c1
    ), c3 AS (
        SELECT c2.*, CASE WHEN c2.t2 IS NOT NULL AND coalesce(c2.sdk, c2.first_report) IS NOT NULL
                          THEN greatest(c2.t2, least(c2.sdk, c2.first_report)) END AS t3
          FROM c2
    ), c4 AS (
        SELECT c3.*, CASE WHEN c3.t3 IS NOT NULL AND c3.first_report IS NOT NULL
                          THEN greatest(c3.t3, c3.first_report) END AS t4,
               coalesce(a.finished_at, j.finished_at, now()) AS ended,
               (j.attempt = a.attempt AND j.status NOT IN ('FAILED', 'RESTARTING')) AS kept
          FROM c3
    ), u AS (
        SELECT c4.*,
               CASE WHEN c4.t3 IS NULL THEN 0
                    WHEN c4.kept THEN greatest(0, extract(epoch FROM c4.ended - c4.t3))
                    WHEN c4.last_checkpoint IS NULL THEN 0
                    ELSE greatest(0, extract(epoch FROM least(c4.last_checkpoint, c4.ended) - c4.t3))
               END::float8 AS useful,
               CASE WHEN c4.t3 IS NULL THEN 0
                    ELSE greatest(0, extract(epoch FROM c4.ended - c4.t3)) END::float8 AS trained
          FROM c4
    )
    SELECT jsonb_build_object(
        'startup', jsonb_build_object(
            'queue_s', extract(epoch FROM u.t1 - u.queued)::float8,
            'placement_s', CASE WHEN u.t2 IS NOT NULL THEN
                               greatest(0, extract(epoch FROM u.t2 - u.t1)
                                           - coalesce((u.agent ->> 'code')::float8, 0)
                                           - coalesce((u.agent ->> 'ckpt')::float8, 0)
                                           - coalesce((u.agent ->> 'proc')::float8, 0))::float8
                           END,
            'code_fetch_s', CASE WHEN u.t2 IS NOT NULL THEN (u.agent ->> 'code')::float8 END,
            'checkpoint_fetch_s', CASE WHEN u.t2 IS NOT NULL THEN (u.agent ->> 'ckpt')::float8 END,
            'process_start_s', CASE WHEN u.t2 IS NOT NULL THEN (u.agent ->> 'proc')::float8 END,
            'framework_init_s', extract(epoch FROM u.t3 - u.t2)::float8,
            'first_report_s', extract(epoch FROM u.t4 - u.t3)::float8),
        'useful_s', u.useful, 'lost_s', greatest(0, u.trained - u.useful))
      FROM u
$$;
COMMENT ON FUNCTION ty_attempt_startup(jobs, attempts) IS 'An attempt''s startup breakdown (queue, placement, code and checkpoint fetch, process start, framework init, first report) and its useful and lost training seconds.';

-- Ingests a batch of reports (server/control/control_report.c). One array per column, report i
-- (from 0) at each array's place i + 1: p_job, p_attempt, p_rank, p_seq, p_step (NULL: none),
-- p_checkpoint_dir (NULL: none), p_node, p_time (RFC 3339 text), p_metrics (an object of any
-- JSON values), p_metrics_bytes (the size of its values as the worker wrote them) and
-- p_max_bytes (the server's --max-report-bytes-per-job, 0 none). The server sends them as binary
-- arrays, so that each report's values are parsed on their own (issue 27: one JSON document
-- holding the batch was parsed whole first, several times slower). For each report of a worker
-- that runs in that attempt on that node: one reports row holding its values, and one `report`
-- row appended to the job's stream (in the same statement) without them: the stream's readers
-- take the values from the reports row (store_job_stream_read), so that they are written once; a
-- report already stored (a resend, or twice in the batch) changes nothing. report_series is kept
-- by the reports' trigger (ty_reports_added), as for every writer, and so is report_names unless
-- the caller lists names: p_name[k] a key of report p_name_at[k] (from 0), every key of the
-- batch's reports the caller does not know stored (server/control/report_names.h), which the
-- batch stores for the reports of known workers while the trigger leaves them (issue 27);
-- report_blocks by the leader's maintenance (ty_report_blocks_fill), but for the blocks the
-- caller summed up itself as it sent their reports (server/control/report_fold.h): p_fb_* one
-- entry per block (series, block, how many reports it summed up), p_fr_* its report_blocks rows
-- (p_fr_at: the block's place in p_fb_*, from 0; times as RFC 3339 text; the first and last
-- values, the least and the greatest as float8: every value a number). A block is stored, and
-- the series' block_next moves past it (when it stood at it), only when it is what the stored
-- reports hold: every report of its in this batch stored now, as many reports stored in the
-- block in all as the caller summed up, and a newer report of its series stored now (the block
-- is complete: issue 27, the maintenance then has nothing to do for the series). The series'
-- rows are locked first, so that no other writer's report lands in such a block unseen (its
-- trigger lowers block_next after this commits: summed up again). jobs.report_bytes grows by
-- each stored report's size (its values' bytes, its checkpoint_dir's, and 64); once it has
-- reached max_bytes the job's later reports are refused (stored nothing, answered as not fresh),
-- and the batch that reaches it records a job event saying so. jobs.last_metrics takes each
-- job's newest rank 0 report (by attempt, then seq) when it is newer than the one held. Returns
-- one row per report: whether its worker is known, whether it was stored now (fresh), and
-- whether its round (k of every rank) is now complete with a checkpoint_dir among its reports,
-- so that the caller registers checkpoint k. A time or a value PostgreSQL refuses fails the
-- whole call (SQLSTATE class 22): the caller then retries the reports one by one.
CREATE OR REPLACE FUNCTION ty_report_ingest_batch(p_job bigint[], p_attempt integer[],
                                                   p_rank integer[], p_seq bigint[],
                                                   p_step bigint[], p_checkpoint_dir text[],
                                                   p_node text[], p_time text[],
                                                   p_metrics jsonb[], p_metrics_bytes bigint[],
                                                   p_max_bytes bigint[],
                                                   p_name text[], p_name_at integer[],
                                                   p_fb_job bigint[], p_fb_attempt integer[],
                                                   p_fb_rank integer[], p_fb_block bigint[],
                                                   p_fb_reports integer[], p_fr_at integer[],
                                                   p_fr_name text[], p_fr_count bigint[],
                                                   p_fr_seq_first bigint[], p_fr_seq_last bigint[],
                                                   p_fr_start text[], p_fr_end text[],
                                                   p_fr_step_first bigint[],
                                                   p_fr_step_last bigint[],
                                                   p_fr_v_first double precision[],
                                                   p_fr_v_last double precision[],
                                                   p_fr_v_min double precision[],
                                                   p_fr_v_max double precision[])
RETURNS TABLE (i integer, known boolean, fresh boolean, round_ready boolean)
LANGUAGE plpgsql AS $$
#variable_conflict use_column
DECLARE
    r_i integer[];
    r_known boolean[];
    r_fresh boolean[];
    r_job bigint[];
    r_attempt integer[];
    r_seq bigint[];
    v_job bigint[];
    v_attempt integer[];
    v_rank integer[];
    v_block bigint[];
BEGIN
    -- the batch's jobs, held first and in key order (as strongly as their update below): two
    -- batches stored at once (the server's lanes: control_report.c) that share a job wait for
    -- each other rather than lock its rows in two orders, and the bytes read below are current
    PERFORM 1 FROM jobs WHERE id IN (SELECT DISTINCT unnest(p_job)) ORDER BY id
       FOR NO KEY UPDATE;
    IF p_fb_job IS NOT NULL THEN
        -- the series of the blocks summed up, held (in key order, as every writer's trigger
        -- holds them, and as strongly) before this statement's snapshot: no report of theirs is
        -- stored meanwhile unseen
        PERFORM 1 FROM report_series r
          JOIN (SELECT DISTINCT job_id, attempt, rank
                  FROM unnest(p_fb_job, p_fb_attempt, p_fb_rank) AS u(job_id, attempt, rank)) u
            ON r.job_id = u.job_id AND r.attempt = u.attempt AND r.rank = u.rank
         ORDER BY r.job_id, r.attempt, r.rank
           FOR NO KEY UPDATE OF r;
    END IF;
    IF p_name IS NOT NULL THEN
        -- the names listed, of reports of workers the node runs (whether stored now or not: a
        -- name no report carries matches no report where report_names is read), before the
        -- reports as every writer's trigger does (one key order), and the trigger told so
        WITH carrier AS (
            SELECT a.at FROM (SELECT DISTINCT at FROM unnest(p_name_at) AS at) a
             WHERE EXISTS (SELECT 1 FROM workers w
                            WHERE w.job_id = p_job[a.at + 1] AND w.attempt = p_attempt[a.at + 1]
                              AND w.rank = p_rank[a.at + 1] AND w.node_id = p_node[a.at + 1])
        )
        INSERT INTO report_names (job_id, name)
        SELECT DISTINCT p_job[n.at + 1], n.name
          FROM unnest(p_name, p_name_at) AS n(name, at) JOIN carrier USING (at)
         ORDER BY 1, 2
        ON CONFLICT DO NOTHING;
        PERFORM set_config('trainyard.report_names', 'batch', true);
    END IF;
    WITH inp AS (
        -- narrow rows: a report's values are taken from p_metrics by its place where stored
        SELECT x.i, x.job_id, x.attempt, x.rank, x.seq, x.step, x.checkpoint_dir, x.node_id,
               x.t::timestamptz AS "time", x.max_bytes,
               EXISTS (SELECT 1 FROM workers w
                       WHERE w.job_id = x.job_id AND w.attempt = x.attempt
                         AND w.rank = x.rank AND w.node_id = x.node_id) AS known,
               (coalesce(x.metrics_bytes, 0) + coalesce(octet_length(x.checkpoint_dir), 0)
                + 64)::bigint AS size
        FROM (SELECT u.*, (u.n - 1)::integer AS i
                FROM unnest(p_job, p_attempt, p_rank, p_seq, p_step, p_checkpoint_dir, p_node,
                            p_time, p_metrics_bytes, p_max_bytes) WITH ORDINALITY
                     AS u(job_id, attempt, rank, seq, step, checkpoint_dir, node_id, t,
                          metrics_bytes, max_bytes, n)) x
    ), dedup AS (
        SELECT DISTINCT ON (job_id, attempt, rank, seq) * FROM inp WHERE known
        ORDER BY job_id, attempt, rank, seq, i
    ), acc AS (
        -- the job's report bytes before each report: stored ones, then this batch's in order
        SELECT d.*, coalesce((SELECT jb.report_bytes FROM jobs jb WHERE jb.id = d.job_id), 0)
                    + coalesce(sum(d.size) OVER (PARTITION BY d.job_id ORDER BY d.i
                                                 ROWS BETWEEN UNBOUNDED PRECEDING
                                                          AND 1 PRECEDING), 0) AS prior_bytes
        FROM dedup d
    ), uniq AS (
        SELECT * FROM acc WHERE coalesce(max_bytes, 0) <= 0 OR prior_bytes < max_bytes
    ), r AS (
        INSERT INTO reports (job_id, attempt, rank, seq, step, checkpoint_dir, node_id,
                             reported_at, metrics)
        SELECT job_id, attempt, rank, seq, step, checkpoint_dir, node_id, "time",
               coalesce(p_metrics[i + 1], '{}'::jsonb)
          FROM uniq
        ON CONFLICT DO NOTHING
        RETURNING job_id, attempt, rank, seq
    ), rw AS (
        SELECT u.* FROM uniq u JOIN r USING (job_id, attempt, rank, seq)
    ), best AS (
        SELECT DISTINCT ON (job_id) * FROM rw WHERE rank = 0
        ORDER BY job_id, attempt DESC, seq DESC
    ), sz AS (
        SELECT job_id, max(max_bytes) AS max_bytes, sum(size)::bigint AS bytes, count(*) AS n
        FROM rw GROUP BY job_id
    ), upd AS (
        SELECT sz.*, b.attempt, b.seq,
               CASE WHEN b.step IS NULL THEN coalesce(p_metrics[b.i + 1], '{}'::jsonb)
                    ELSE coalesce(p_metrics[b.i + 1], '{}'::jsonb)
                         || jsonb_build_object('step', b.step) END AS result
        FROM sz LEFT JOIN best b USING (job_id)
    ), j AS (
        UPDATE jobs SET report_bytes = jobs.report_bytes + u.bytes,
                        last_metrics = CASE WHEN u.attempt IS NULL
                                              OR (u.attempt, u.seq)
                                                 <= (coalesce(jobs.last_metrics_attempt, -1),
                                                     coalesce(jobs.last_metrics_seq, -1))
                                            THEN jobs.last_metrics ELSE u.result END,
                        last_metrics_attempt = CASE WHEN u.attempt IS NULL
                                                      OR (u.attempt, u.seq)
                                                         <= (coalesce(jobs.last_metrics_attempt, -1),
                                                             coalesce(jobs.last_metrics_seq, -1))
                                                    THEN jobs.last_metrics_attempt
                                                    ELSE u.attempt END,
                        last_metrics_seq = CASE WHEN u.attempt IS NULL
                                                  OR (u.attempt, u.seq)
                                                     <= (coalesce(jobs.last_metrics_attempt, -1),
                                                         coalesce(jobs.last_metrics_seq, -1))
                                                THEN jobs.last_metrics_seq ELSE u.seq END,
                        stream_seq = jobs.stream_seq + u.n
        FROM upd u
        WHERE jobs.id = u.job_id
        RETURNING jobs.id, jobs.status, jobs.attempt, jobs.report_bytes, u.bytes, u.max_bytes,
                  jobs.stream_seq - u.n AS stream_base
    ), streamed AS (
        -- each stored report's row in its job's stream, in the batch's order, without its values
        -- (the seqs reserved by the jobs' update above, as ty_stream_append_batch reserves them)
        INSERT INTO job_stream (job_id, seq, kind, attempt, rank, stream, body)
        SELECT rw.job_id,
               j.stream_base + row_number() OVER (PARTITION BY rw.job_id ORDER BY rw.i),
               'report', rw.attempt, rw.rank, 'stdout',
               jsonb_build_object('rank', rw.rank, 'attempt', rw.attempt, 'k', rw.seq,
                                  'step', rw.step, 'time', rw."time",
                                  'checkpoint', rw.checkpoint_dir IS NOT NULL)
          FROM rw JOIN j ON j.id = rw.job_id
         ORDER BY rw.job_id, rw.i
    ), inb AS (
        -- per series and block: the batch's reports, and those stored now (and the series'
        -- newest stored now), for the check of the blocks summed up by the caller
        SELECT job_id, attempt, rank, seq >> 4 AS block, count(*) AS n FROM inp
         GROUP BY 1, 2, 3, 4
    ), rwb AS (
        SELECT job_id, attempt, rank, seq >> 4 AS block, count(*) AS n,
               max(max(seq) >> 4) OVER (PARTITION BY job_id, attempt, rank) AS newest
          FROM rw GROUP BY 1, 2, 3, 4
    ), fb AS (
        -- the blocks summed up by the caller that are what the stored reports hold (see above):
        -- every report of the block in the batch stored now, as many stored in all (`reports`
        -- here is as before this statement) as summed up, and a newer report of the series
        -- stored now
        SELECT b.k, b.job_id, b.attempt, b.rank, b.block
          FROM unnest(p_fb_job, p_fb_attempt, p_fb_rank, p_fb_block, p_fb_reports)
               WITH ORDINALITY AS b(job_id, attempt, rank, block, reports, k)
          JOIN (SELECT DISTINCT job_id, attempt, rank, newest FROM rwb) s
            ON s.job_id = b.job_id AND s.attempt = b.attempt AND s.rank = b.rank
               AND s.newest > b.block
          LEFT JOIN inb i
            ON i.job_id = b.job_id AND i.attempt = b.attempt AND i.rank = b.rank
               AND i.block = b.block
          LEFT JOIN rwb w
            ON w.job_id = b.job_id AND w.attempt = b.attempt AND w.rank = b.rank
               AND w.block = b.block
         WHERE coalesce(i.n, 0) = coalesce(w.n, 0)
           AND CASE WHEN b.reports = (b.block + 1) * 16 - greatest(b.block * 16, 1)
                    -- every seq of the block summed up (its reports rise: report_fold.c): those
                    -- not in this batch came in the caller's earlier batches, stored then (or
                    -- it forgot the block), so the block can hold no other report
                    THEN true
                    ELSE (SELECT count(*) FROM reports x
                           WHERE x.job_id = b.job_id AND x.attempt = b.attempt
                             AND x.rank = b.rank
                             AND x.seq >= b.block * 16 AND x.seq < (b.block + 1) * 16)
                         + coalesce(w.n, 0) = b.reports END
    ), blocks AS (
        INSERT INTO report_blocks
        SELECT fb.job_id, fb.rank, f.name, fb.attempt, fb.block, f.count, f.seq_first, f.seq_last,
               f.start_at::timestamptz, f.end_at::timestamptz, f.step_first, f.step_last,
               f.v_first::text, f.v_last::text, f.v_min, f.v_max
          FROM unnest(p_fr_at, p_fr_name, p_fr_count, p_fr_seq_first, p_fr_seq_last, p_fr_start,
                      p_fr_end, p_fr_step_first, p_fr_step_last, p_fr_v_first, p_fr_v_last,
                      p_fr_v_min, p_fr_v_max)
               AS f(at, name, count, seq_first, seq_last, start_at, end_at, step_first,
                    step_last, v_first, v_last, v_min, v_max)
          JOIN fb ON fb.k = f.at + 1
         ORDER BY 1, 2, 3, 4, 5 -- the maintenance's order
        -- plain inserts: the maintenance sums up only blocks below the newest committed report's
        -- block, and a block is sent in the batch that stores the first report past it
    ), capped AS (
        INSERT INTO job_events (job_id, attempt, status, message)
        SELECT id, attempt, status,
               'reports: ' || report_bytes || ' bytes of reports stored, the cap of '
               || max_bytes || ' (--max-report-bytes-per-job); the job''s later reports '
               || '(metrics, checkpoints) are refused'
        FROM j
        WHERE coalesce(max_bytes, 0) > 0 AND report_bytes >= max_bytes
          AND report_bytes - bytes < max_bytes
    )
    SELECT array_agg(inp.i ORDER BY inp.i), array_agg(inp.known ORDER BY inp.i),
           array_agg(rw.i IS NOT NULL ORDER BY inp.i), array_agg(inp.job_id ORDER BY inp.i),
           array_agg(inp.attempt ORDER BY inp.i), array_agg(inp.seq ORDER BY inp.i)
           , (SELECT array_agg(job_id) FROM fb), (SELECT array_agg(attempt) FROM fb),
           (SELECT array_agg(rank) FROM fb), (SELECT array_agg(block) FROM fb)
    INTO r_i, r_known, r_fresh, r_job, r_attempt, r_seq, v_job, v_attempt, v_rank, v_block
    FROM inp
    LEFT JOIN rw ON rw.i = inp.i;
    PERFORM set_config('trainyard.report_names', '', true);
    IF v_job IS NOT NULL THEN
        -- each series' block_next past its blocks stored now when it stood at the first of them
        -- (the reports' trigger lowered it for a report of an earlier block), and block_end past
        -- them (below it the maintenance upserts)
        WITH s AS (
            SELECT job_id, attempt, rank, min(block) AS b_from, max(block) AS b_to, count(*) AS n
              FROM unnest(v_job, v_attempt, v_rank, v_block) AS u(job_id, attempt, rank, block)
             GROUP BY job_id, attempt, rank
        )
        UPDATE report_series r
           SET block_next = CASE WHEN r.block_next = s.b_from AND s.n = s.b_to - s.b_from + 1
                                 THEN s.b_to + 1 ELSE r.block_next END,
               block_end = greatest(r.block_end, s.b_to + 1)
          FROM s
         WHERE r.job_id = s.job_id AND r.attempt = s.attempt AND r.rank = s.rank;
    END IF;

    RETURN QUERY
    SELECT s.i, s.known, s.fresh,
           s.fresh AND EXISTS (
               SELECT 1 FROM reports x
               WHERE x.job_id = s.job_id AND x.attempt = s.attempt AND x.seq = s.seq
                 AND x.checkpoint_dir IS NOT NULL)
           AND (SELECT count(*) FROM reports x
                WHERE x.job_id = s.job_id AND x.attempt = s.attempt AND x.seq = s.seq)
               >= (SELECT a.world_size FROM attempts a
                   WHERE a.job_id = s.job_id AND a.attempt = s.attempt)
    FROM unnest(r_i, r_known, r_fresh, r_job, r_attempt, r_seq)
         AS s(i, known, fresh, job_id, attempt, seq)
    ORDER BY s.i;
END $$;

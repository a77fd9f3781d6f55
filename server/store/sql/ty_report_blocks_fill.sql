-- The maintenance of report_blocks (migration 0046), the one place that stores blocks: the
-- leader calls it from a thread of its own, beside the control thread's report batches, call
-- after call while series move on (server/control/control_report.c), and anyone may call it
-- (tests, after writing reports with SQL); one call at a time (an advisory lock, held to commit).
-- Up to p_series series of report_series (which every writer keeps: ty_reports_added) whose
-- newest report lies past their block_next's block have their complete blocks summed up from all
-- their reports (ty_report_blocks_of), once, in bulk: blocks block_next to the one before the
-- block of their newest report (that last block may still be filling; reads sum it up from the
-- reports), at most 16 of them (256 reports) per series per call so that a call stays short,
-- replacing what report_blocks held for them; and block_next moves past them, in the same
-- transaction. Blocks at or past the series' block_end were never stored: inserts; only those
-- below it
-- (summed up again after a late report) are upserts (migration 0057). Each job's
-- row is held (FOR KEY SHARE) before its blocks are stored, so that its deletion waits for this
-- call and then deletes them (ty_job_deleted_rows); a job deleted before is left out. The
-- series' rows are not locked while their blocks are summed up (a writer's trigger would wait
-- for that: migration 0054), only after (FOR UPDATE, in key order, as writers lock them);
-- block_next moves on only when neither it nor late_writes changed meanwhile, so a report stored
-- after this statement's snapshot for a block it summed up (which its writer's trigger counts in
-- late_writes) sends the series round again, and reports appended after the newest never hold it
-- back. Restartable: what is not committed is redone; blocks stored for a series that did not
-- move on lie at or past its block_next, where reads do not take them, and below its block_end.
-- Returns how many series moved on (0: nothing left to do).
CREATE OR REPLACE FUNCTION ty_report_blocks_fill(p_series integer) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    v_job bigint[];
    v_attempt integer[];
    v_rank integer[];
    v_from bigint[];
    v_to bigint[];
    v_late bigint[];
    moved integer;
BEGIN
    PERFORM pg_advisory_xact_lock(12, 0); -- one call at a time: no block is inserted twice
    -- the blocks, summed up without a lock on the series' rows
    WITH s AS MATERIALIZED (
        SELECT job_id, attempt, rank, block_next AS b_from,
               least((seq_max >> 4) - 1, block_next + 15) AS b_to, late_writes, block_end
          FROM report_series
         WHERE seq_max >> 4 > block_next
         ORDER BY job_id, attempt, rank LIMIT p_series
    ), live AS MATERIALIZED (
        SELECT j.id FROM jobs j WHERE j.id IN (SELECT job_id FROM s) ORDER BY j.id FOR KEY SHARE
    ), e AS MATERIALIZED (
        SELECT x.*, s.block_end
          FROM s JOIN live ON live.id = s.job_id
         CROSS JOIN LATERAL ty_report_blocks_of(s.job_id, s.attempt, s.rank, s.b_from, s.b_to) x
    ), stored_new AS (
        INSERT INTO report_blocks
        SELECT job_id, rank, name, attempt, block, count, seq_first, seq_last, start_at, end_at,
               step_first, step_last, v_first, v_last, v_min, v_max
          FROM e WHERE block >= block_end
         ORDER BY 1, 2, 3, 4, 5
        ON CONFLICT DO NOTHING -- none expected: a report batch stores a block (summed up as
                               -- its reports were stored: ty_report_ingest_batch) with the
                               -- first report past it, before this call can take the block
    ), stored_again AS (
        INSERT INTO report_blocks AS b
        SELECT job_id, rank, name, attempt, block, count, seq_first, seq_last, start_at, end_at,
               step_first, step_last, v_first, v_last, v_min, v_max
          FROM e WHERE block < block_end
         ORDER BY 1, 2, 3, 4, 5 -- one order for every call
        ON CONFLICT (job_id, rank, name, attempt, block) DO UPDATE SET
            count = excluded.count, seq_first = excluded.seq_first, seq_last = excluded.seq_last,
            start_at = excluded.start_at, end_at = excluded.end_at,
            step_first = excluded.step_first, step_last = excluded.step_last,
            v_first = excluded.v_first, v_last = excluded.v_last,
            v_min = excluded.v_min, v_max = excluded.v_max
    )
    SELECT array_agg(job_id), array_agg(attempt), array_agg(rank), array_agg(b_from),
           array_agg(b_to), array_agg(late_writes)
      INTO v_job, v_attempt, v_rank, v_from, v_to, v_late
      FROM s JOIN live ON live.id = s.job_id;
    IF v_job IS NULL THEN
        RETURN 0;
    END IF;
    -- then the rows, in key order (as every writer), and only those nothing changed meanwhile
    -- move on; block_end moves past what was stored in any case
    PERFORM 1 FROM report_series r
      JOIN unnest(v_job, v_attempt, v_rank) AS u(job_id, attempt, rank)
        ON r.job_id = u.job_id AND r.attempt = u.attempt AND r.rank = u.rank
     ORDER BY r.job_id, r.attempt, r.rank
       FOR UPDATE OF r;
    WITH m AS (
        UPDATE report_series r
           SET block_next = CASE WHEN r.block_next = u.b_from AND r.late_writes = u.late_writes
                                 THEN u.b_to + 1 ELSE r.block_next END,
               block_end = greatest(r.block_end, u.b_to + 1)
          FROM unnest(v_job, v_attempt, v_rank, v_from, v_to, v_late)
               AS u(job_id, attempt, rank, b_from, b_to, late_writes)
         WHERE r.job_id = u.job_id AND r.attempt = u.attempt AND r.rank = u.rank
        RETURNING r.block_next = u.b_to + 1 AS moved
    )
    SELECT count(*) FILTER (WHERE m.moved) INTO moved FROM m;
    RETURN moved;
END $$;
COMMENT ON FUNCTION ty_report_blocks_fill(integer) IS 'Maintenance: sums up the complete blocks of up to p_series series not yet in report_blocks; returns how many series moved on.';

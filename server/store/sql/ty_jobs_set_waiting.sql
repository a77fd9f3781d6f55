-- Writes a scheduling pass's waiting messages: p_messages is [[job id, message], ...], a later
-- entry for the same job winning. Only PENDING and RESTARTING jobs take one, and only a message
-- that differs from the stored one is written. One UPDATE per job, by primary key: a single
-- UPDATE ... FROM the array was planned as a hash join that read every pending job (26 ms at
-- 2,800 pending for 3 messages). Jobs are updated in id order, as every writer of several jobs.
-- Returns the number of jobs whose message changed.
CREATE OR REPLACE FUNCTION ty_jobs_set_waiting(p_messages jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    m record;
    changed integer := 0;
    k integer;
BEGIN
    FOR m IN SELECT DISTINCT ON (id) id, message
               FROM (SELECT (e ->> 0)::bigint AS id, e ->> 1 AS message, x.n
                       FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS x (e, n)) r
              ORDER BY id, n DESC
    LOOP
        UPDATE jobs SET status_message = m.message
         WHERE id = m.id AND status IN ('PENDING', 'RESTARTING')
           AND status_message IS DISTINCT FROM m.message;
        GET DIAGNOSTICS k = ROW_COUNT;
        changed := changed + k;
    END LOOP;
    RETURN changed;
END $$;
COMMENT ON FUNCTION ty_jobs_set_waiting(jsonb) IS 'Stores a scheduling pass''s waiting messages of pending jobs, one primary-key UPDATE each.';

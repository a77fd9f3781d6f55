-- Writes a scheduling pass's waiting messages: p_messages is [[job id, message], ...], a later
-- entry for the same job winning. Only PENDING and RESTARTING jobs take one, and only a message
-- that differs from the stored one is written. One UPDATE for all, whose jobs are found by
-- primary key (`id = ANY (ids)`, which the index scan takes in id order, as every writer of several
-- jobs does): the same UPDATE joined to the array alone was planned as a hash
-- join that read every pending job (26 ms at 2,800 pending for 3 messages), and one UPDATE per job
-- cost an executor start-up each, which under a flood of submissions is one per submitted job
-- (docs/decisions.md). Returns the number of jobs whose message changed.
CREATE OR REPLACE FUNCTION ty_jobs_set_waiting(p_messages jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    ids bigint[];
    messages text[];
    changed integer;
BEGIN
    SELECT array_agg(id ORDER BY id), array_agg(message ORDER BY id) INTO ids, messages
      FROM (SELECT DISTINCT ON (id) id, message
              FROM (SELECT (e ->> 0)::bigint AS id, e ->> 1 AS message, x.n
                      FROM jsonb_array_elements(p_messages) WITH ORDINALITY AS x (e, n)) r
             ORDER BY id, n DESC) m;
    UPDATE jobs j SET status_message = m.message
      FROM unnest(ids, messages) AS m (id, message)
     WHERE j.id = ANY (ids) AND j.id = m.id AND j.status IN ('PENDING', 'RESTARTING')
       AND j.status_message IS DISTINCT FROM m.message;
    GET DIAGNOSTICS changed = ROW_COUNT;
    RETURN changed;
END $$;
COMMENT ON FUNCTION ty_jobs_set_waiting(jsonb) IS 'Stores a scheduling pass''s waiting messages of pending jobs, in one UPDATE by primary key.';

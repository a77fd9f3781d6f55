-- Marks a node lost: its live workers are lost and their jobs fail or restart (ty_job_fail, the
-- failure naming the node), each job once, in id order so that concurrent callers lock jobs in
-- the same order. Returns those jobs.
CREATE OR REPLACE FUNCTION ty_node_lost(p_node text) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    jid bigint;
BEGIN
    UPDATE nodes SET status = 'LOST' WHERE id = p_node AND status = 'ALIVE';
    FOR jid IN
        WITH lost AS (
            UPDATE workers SET status = 'LOST', finished_at = now()
             WHERE node_id = p_node AND status IN ('PLACED', 'RUNNING')
            RETURNING job_id)
        SELECT DISTINCT job_id FROM lost ORDER BY job_id
    LOOP
        PERFORM ty_job_fail(jid, 'node_lost', format('node %s was lost', p_node),
                            jsonb_build_object('node_id', p_node));
        PERFORM ty_job_settle(jid);
        RETURN NEXT jid;
    END LOOP;
END $$;
COMMENT ON FUNCTION ty_node_lost(text) IS 'Marks a node LOST and fails the jobs that had workers on it; returns those jobs, once each.';

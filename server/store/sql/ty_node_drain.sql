-- Drains node p_node: no new work is placed there (nodes.draining) and every job with a live
-- worker of its current attempt there is preempted (ty_job_preempt), in id order. Returns those
-- jobs.
CREATE OR REPLACE FUNCTION ty_node_drain(p_node text) RETURNS SETOF bigint LANGUAGE plpgsql AS $$
DECLARE
    jid bigint;
BEGIN
    UPDATE nodes SET draining = true WHERE id = p_node AND NOT draining;
    FOR jid IN
        SELECT DISTINCT w.job_id FROM workers w JOIN jobs j ON j.id = w.job_id
         WHERE w.node_id = p_node AND w.attempt = j.attempt AND w.status IN ('PLACED', 'RUNNING')
         ORDER BY w.job_id
    LOOP
        PERFORM ty_job_preempt(jid, p_node);
        RETURN NEXT jid;
    END LOOP;
END $$;
COMMENT ON FUNCTION ty_node_drain(text) IS 'Marks a node draining and preempts the jobs running on it; returns them.';

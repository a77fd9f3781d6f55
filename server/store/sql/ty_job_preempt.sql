-- Preempts job p_job because node p_node is being drained: `preempted` (to RESTARTING), NOT a
-- failure; preemptions + 1; the attempt's end_reason names the node. Past ty_preemptions_max()
-- the job fails instead (its error says so, `stop` then `failed`). A job that is not STARTING or
-- RUNNING is left alone. Returns the job's status after it.
CREATE OR REPLACE FUNCTION ty_job_preempt(p_job bigint, p_node text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    msg text;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR NOT ty_job_changes(j.status, 'preempted') THEN
        RETURN j.status;
    END IF;
    IF j.preemptions >= ty_preemptions_max() THEN
        msg := format('node %s is draining and the job was already preempted %s times (the cap)',
                      p_node, j.preemptions);
        UPDATE jobs SET error = msg WHERE id = p_job;
        UPDATE attempts SET end_reason = jsonb_build_object('event', 'preempted', 'error', msg,
                                                            'node_id', p_node, 'restarted', false)
         WHERE job_id = p_job AND attempt = j.attempt;
        RETURN ty_job_transition(p_job, 'stop', 'failing: ' || msg);
    END IF;
    msg := format('preempted: node %s is draining', p_node);
    UPDATE jobs SET preemptions = preemptions + 1 WHERE id = p_job;
    UPDATE attempts SET end_reason = jsonb_build_object('event', 'preempted', 'error', msg,
                                                        'node_id', p_node, 'restarted', true)
     WHERE job_id = p_job AND attempt = j.attempt;
    RETURN ty_job_transition(p_job, 'preempted',
        format('%s; restarting elsewhere (preemption %s of at most %s, not a failure)', msg,
               j.preemptions + 1, ty_preemptions_max()));
END $$;
COMMENT ON FUNCTION ty_job_preempt(bigint, text) IS 'Preempts a job off a draining node: restarts it elsewhere (not a failure), or fails it past the cap.';

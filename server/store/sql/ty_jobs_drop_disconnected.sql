-- Issue 23 (point 4): a failing attempt (its job RESTARTING or STOPPING: a rank failed, the job
-- timed out or is being stopped) does not wait for the heartbeat timeout of a node whose agent's
-- connection closed (nodes.disconnected_at): the attempt's workers still live there are counted
-- as LOST now, with an event naming the node, and the job settles (a RESTARTING job is then
-- placed again, on the nodes still connected). An agent that comes back re-adopts them and is
-- told to stop them (they are no longer live there). A node whose agent alone was killed while
-- its jobs run well is left alone: its workers are re-adopted when it reconnects.
-- Returns how many (job, node) pairs were dropped.
CREATE OR REPLACE FUNCTION ty_jobs_drop_disconnected() RETURNS integer LANGUAGE plpgsql AS $$
DECLARE
    r record;
    dropped integer := 0;
BEGIN
    FOR r IN
        SELECT DISTINCT j.id, w.node_id
          FROM jobs j
          JOIN workers w ON w.job_id = j.id AND w.attempt = j.attempt
          JOIN nodes n ON n.id = w.node_id
         WHERE j.status IN ('RESTARTING', 'STOPPING')
           AND w.status IN ('PLACED', 'RUNNING') AND n.disconnected_at IS NOT NULL
         ORDER BY j.id, w.node_id
    LOOP
        PERFORM 1 FROM jobs WHERE id = r.id FOR UPDATE;
        UPDATE workers w SET status = 'LOST', finished_at = now()
          FROM jobs j, nodes n
         WHERE j.id = r.id AND w.job_id = j.id AND w.attempt = j.attempt
           AND j.status IN ('RESTARTING', 'STOPPING')
           AND w.node_id = r.node_id AND n.id = r.node_id AND n.disconnected_at IS NOT NULL
           AND w.status IN ('PLACED', 'RUNNING');
        IF FOUND THEN
            INSERT INTO job_events (job_id, attempt, status, message)
            SELECT j.id, j.attempt, j.status,
                   format('node %s: its agent is disconnected; the workers of this failing attempt '
                          'there are counted as lost (not waiting for the heartbeat timeout)',
                          r.node_id)
              FROM jobs j WHERE j.id = r.id;
            PERFORM ty_job_settle(r.id);
            dropped := dropped + 1;
        END IF;
    END LOOP;
    RETURN dropped;
END $$;
COMMENT ON FUNCTION ty_jobs_drop_disconnected() IS 'Counts as lost the workers of failing attempts on nodes whose agent is disconnected, and settles those jobs; returns how many (job, node) pairs.';

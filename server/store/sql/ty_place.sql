-- Places a PENDING or RESTARTING job: a new attempt with its workers, a free master port on the
-- rank-0 node and the checkpoint it resumes from (ty_resume_point).
-- p_workers: [{"rank","local_rank","node_rank","node_id","gpus":[..],"resources":{..}}]. The port
-- search reads attempts by the literal live statuses of the partial index attempts_active_idx
-- (migration 0005). A RESTARTING job is placed only once its ended attempt has no live worker
-- (that attempt is then settled first). A restart whose nodes cannot get the job's latest
-- committed checkpoint yet waits (up to 120 s after that checkpoint was registered, while a node
-- holding it is alive) for its upload to the artifact store rather than resume from an older one.
-- Returns the attempt number and port, or NULL when the job cannot be placed now.
CREATE OR REPLACE FUNCTION ty_place(p_job bigint, p_workers jsonb, p_nports integer,
                                    OUT o_attempt integer, OUT o_port integer, OUT o_addr text)
LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
    rank0 text;
    nodes_used text[];
    lo integer;
    hi integer;
    ck bigint;
    latest bigint;
BEGIN
    SELECT * INTO j FROM jobs WHERE id = p_job FOR UPDATE;
    IF NOT FOUND OR NOT ty_job_allows(j.status, 'place') THEN
        RETURN;
    END IF;
    IF j.status = 'RESTARTING' THEN
        IF EXISTS (SELECT 1 FROM workers WHERE job_id = p_job AND attempt = j.attempt
                      AND status IN ('PLACED', 'RUNNING')) THEN
            RETURN;
        END IF;
        PERFORM ty_job_settle(p_job);
    END IF;
    SELECT w->>'node_id' INTO rank0 FROM jsonb_array_elements(p_workers) w
     WHERE (w->>'rank')::int = 0;
    SELECT array_agg(DISTINCT w->>'node_id') INTO nodes_used FROM jsonb_array_elements(p_workers) w;
    SELECT n.address, n.port_lo, n.port_hi INTO o_addr, lo, hi FROM nodes n WHERE n.id = rank0;
    SELECT min(p) INTO o_port FROM generate_series(lo, hi - p_nports + 1) p
     WHERE NOT EXISTS (
        SELECT 1 FROM attempts a
         WHERE a.status IN ('STARTING', 'RUNNING', 'STOPPING')
           AND int4range(a.master_port, a.master_port + a.nports) && int4range(p, p + p_nports)
           AND EXISTS (SELECT 1 FROM workers w WHERE w.job_id = a.job_id AND w.attempt = a.attempt
                          AND w.node_id = ANY (nodes_used)));
    IF o_port IS NULL THEN
        UPDATE jobs SET status_message = 'waiting for a free port on node ' || rank0 WHERE id = p_job;
        RETURN;
    END IF;
    o_attempt := j.attempt + 1;
    ck := ty_resume_point(p_job, o_attempt, nodes_used);
    SELECT c.id INTO latest FROM checkpoints c
     WHERE o_attempt > 1 AND c.job_id = p_job AND c.status = 'COMMITTED'
     ORDER BY c.attempt DESC, c.idx DESC LIMIT 1;
    IF latest IS DISTINCT FROM ck AND EXISTS (
        SELECT 1 FROM checkpoints c
         WHERE c.id = latest AND c.created_at > now() - interval '120 seconds'
           AND c.artifact_state IS DISTINCT FROM 'deleted'
           AND EXISTS (SELECT 1 FROM jsonb_array_elements(coalesce(c.location::jsonb, '[]')) e
                         JOIN nodes n ON n.id = e->>'node_id' WHERE n.status = 'ALIVE')) THEN
        UPDATE jobs SET status_message = format(
            'waiting for checkpoint %s to reach the artifact store (the new placement holds no copy)',
            latest) WHERE id = p_job;
        o_attempt := NULL;
        o_port := NULL;
        o_addr := NULL;
        RETURN;
    END IF;
    INSERT INTO attempts (job_id, attempt, status, world_size, master_addr, master_port, nports,
                          resumed_from)
    VALUES (p_job, o_attempt, 'STARTING', jsonb_array_length(p_workers), o_addr, o_port,
            p_nports, ck);
    INSERT INTO workers (job_id, attempt, rank, local_rank, node_rank, node_id, gpus, resources, status)
    SELECT p_job, o_attempt, (w->>'rank')::int, (w->>'local_rank')::int, (w->>'node_rank')::int,
           w->>'node_id', ARRAY(SELECT jsonb_array_elements_text(w->'gpus'))::int[], w->'resources',
           'PLACED'
      FROM jsonb_array_elements(p_workers) w;
    UPDATE jobs SET attempt = o_attempt WHERE id = p_job;
    PERFORM ty_job_transition(p_job, 'place',
        format('starting %s worker%s on %s node%s%s', jsonb_array_length(p_workers),
               CASE WHEN jsonb_array_length(p_workers) = 1 THEN '' ELSE 's' END,
               array_length(nodes_used, 1),
               CASE WHEN array_length(nodes_used, 1) = 1 THEN '' ELSE 's' END,
               CASE WHEN o_attempt = 1 AND ck IS NULL THEN ''
                    WHEN ck IS NULL THEN format(' (attempt %s, from scratch: no usable checkpoint)', o_attempt)
                    ELSE format(' (attempt %s, resuming from checkpoint %s)', o_attempt, ck) END));
END $$;
COMMENT ON FUNCTION ty_place(bigint, jsonb, integer) IS 'Commits a gang placement of a pending job.';

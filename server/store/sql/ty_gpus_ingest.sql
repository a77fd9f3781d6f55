-- Stores node p_node's GPU sample p_gpus (an array as nodes.gpus holds it, without sampled_at).
-- A GPU marked lost that was not lost before leaves resources->GPU, and each job whose current
-- attempt has a worker on it gets a job event naming it, and naming its critical Xid when the
-- agent reported one ("xid" in the row, docs/gpu.md; a GPU gone from NVML or a row from an older
-- agent has none). Returns how many GPUs were newly lost.
CREATE OR REPLACE FUNCTION ty_gpus_ingest(p_node text, p_gpus jsonb) RETURNS integer
LANGUAGE plpgsql AS $$
DECLARE
    old jsonb;
    lost integer[];
    g jsonb;
BEGIN
    SELECT gpus INTO old FROM nodes WHERE id = p_node FOR UPDATE;
    IF NOT FOUND THEN
        RETURN 0;
    END IF;
    SELECT coalesce(array_agg((n->>'index')::integer), '{}') INTO lost
      FROM jsonb_array_elements(p_gpus) n
     WHERE (n->>'lost')::boolean
       AND NOT EXISTS (SELECT 1 FROM jsonb_array_elements(old) o
                        WHERE o->>'uuid' = n->>'uuid' AND (o->>'lost')::boolean);
    UPDATE nodes
       SET gpus = (SELECT coalesce(jsonb_agg(n || jsonb_build_object('sampled_at', now())), '[]')
                     FROM jsonb_array_elements(p_gpus) n),
           resources = CASE WHEN cardinality(lost) = 0 THEN resources
                       ELSE jsonb_set(resources, '{GPU}',
                              (SELECT coalesce(jsonb_agg(x), '[]')
                                 FROM jsonb_array_elements(coalesce(resources->'GPU', '[]')) x
                                WHERE NOT (x::text::integer = ANY (lost)))) END
     WHERE id = p_node;
    FOR g IN SELECT n FROM jsonb_array_elements(p_gpus) n
              WHERE (n->>'index')::integer = ANY (lost) LOOP
        INSERT INTO job_events (job_id, attempt, status, message)
        SELECT DISTINCT j.id, j.attempt, j.status,
               CASE WHEN jsonb_typeof(g->'xid') = 'number' THEN
                    format('GPU %s (%s) of node %s reported critical Xid %s: unhealthy, it left the node''s capacity',
                           g->>'index', g->>'uuid', p_node, g->>'xid')
               ELSE format('GPU %s (%s) of node %s was lost: it left the node''s capacity',
                           g->>'index', g->>'uuid', p_node) END
          FROM workers w JOIN jobs j ON j.id = w.job_id AND j.attempt = w.attempt
         WHERE w.node_id = p_node AND (g->>'index')::integer = ANY (w.gpus)
           AND w.status IN ('PLACED', 'RUNNING');
    END LOOP;
    RETURN cardinality(lost);
END $$;
COMMENT ON FUNCTION ty_gpus_ingest(text, jsonb) IS 'Stores a node''s GPU sample (agent message gpus); a newly lost GPU leaves the node''s capacity and its jobs get an event (naming its critical Xid when it has one).';

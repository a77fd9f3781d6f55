-- Issue 14 (security): secret environment values hidden from the API, node credentials, and
-- submissions made idempotent by a client key.

-- The spec as the API shows it: secret_env keeps its names, never its values.
CREATE FUNCTION ty_spec_public(spec jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(spec->'secret_env') = 'object'
                THEN jsonb_set(spec, '{secret_env}',
                               coalesce((SELECT jsonb_object_agg(k, '<redacted>')
                                           FROM jsonb_object_keys(spec->'secret_env') k),
                                        '{}'::jsonb))
                ELSE spec END
$$;
COMMENT ON FUNCTION ty_spec_public(jsonb) IS 'A job spec with the values of secret_env replaced by "<redacted>": what the REST API returns.';

CREATE OR REPLACE FUNCTION ty_job_json(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object(
        'id', j.id, 'name', j.name, 'owner', j.owner, 'status', j.status,
        'status_message', j.status_message, 'priority', j.priority, 'attempt', j.attempt,
        'spec', ty_spec_public(j.spec), 'created_at', ty_ts(j.created_at),
        'started_at', ty_ts(j.started_at), 'finished_at', ty_ts(j.finished_at),
        'result', jsonb_build_object('metrics', j.last_metrics, 'error', j.error,
            'latest_checkpoint', (SELECT jsonb_build_object('id', c.id, 'step', c.step, 'metrics', c.metrics)
                                    FROM checkpoints c WHERE c.job_id = j.id AND c.status = 'COMMITTED'
                                    ORDER BY c.attempt DESC, c.idx DESC LIMIT 1),
            'best_checkpoint', NULL))
$$;
COMMENT ON FUNCTION ty_job_json(jobs) IS 'The job object of the REST API (GET /api/v1/jobs/{id}); secret_env values redacted.';

-- The collective rendezvous of an attempt is bound to its workers by a secret the server makes
-- and sends only in that attempt's launch messages (TRAINYARD_RENDEZVOUS_SECRET).
ALTER TABLE attempts ADD COLUMN rendezvous_secret text NOT NULL
    DEFAULT replace(gen_random_uuid()::text || gen_random_uuid()::text, '-', '');
COMMENT ON COLUMN attempts.rendezvous_secret IS 'Random hex; sent in the launch of the attempt, put in every worker''s environment, checked by rank 0 in the collective rendezvous handshake.';

-- Each node has a credential of its own: minted by the server when the node joins with the
-- cluster token, kept by its agent, and required to register that node id again while it is ALIVE.
ALTER TABLE nodes ADD COLUMN credential_hash text;
COMMENT ON COLUMN nodes.credential_hash IS 'Lowercase hex SHA-256 of the node''s credential (NULL: none minted yet); a register naming this node id must carry the credential while the node is ALIVE.';

-- A submission retried after a lost connection carries the same Idempotency-Key and gets the
-- job the first one created instead of a second job.
ALTER TABLE jobs ADD COLUMN idempotency_key text;
COMMENT ON COLUMN jobs.idempotency_key IS 'The Idempotency-Key header of the submission that created the job (NULL: none); unique per owner.';
CREATE UNIQUE INDEX jobs_owner_idempotency_key ON jobs (owner, idempotency_key)
    WHERE idempotency_key IS NOT NULL;

CREATE FUNCTION ty_job_submit_once(p_name text, p_owner text, p_priority integer, p_spec jsonb,
                                   p_key text)
RETURNS TABLE (job jobs, created boolean, same_spec boolean) LANGUAGE plpgsql AS $$
DECLARE
    j jobs;
BEGIN
    -- Two submissions with one key wait for each other: the second then finds the first's job.
    PERFORM pg_advisory_xact_lock(hashtext(p_owner), hashtext(p_key));
    SELECT * INTO j FROM jobs WHERE owner = p_owner AND idempotency_key = p_key;
    IF FOUND THEN
        RETURN QUERY SELECT j, false, j.spec = p_spec;
        RETURN;
    END IF;
    j := ty_job_submit(p_name, p_owner, p_priority, p_spec);
    UPDATE jobs SET idempotency_key = p_key WHERE id = j.id RETURNING * INTO STRICT j;
    RETURN QUERY SELECT j, true, true;
END $$;
COMMENT ON FUNCTION ty_job_submit_once(text, text, integer, jsonb, text) IS 'ty_job_submit under an idempotency key: the owner''s job with that key when there is one (created false; same_spec says whether it was submitted with this spec), else a new job.';

-- Jobs are owned by token name, so two live tokens may not share a name (a second "alice" would
-- own the first one's jobs). Duplicates from before get their id appended, oldest keeps the name.
UPDATE api_tokens t SET name = left(t.name, 100) || '#' || t.id
 WHERE t.revoked_at IS NULL
   AND EXISTS (SELECT 1 FROM api_tokens o
                WHERE o.name = t.name AND o.revoked_at IS NULL AND o.id < t.id);
CREATE UNIQUE INDEX api_tokens_live_name ON api_tokens (name) WHERE revoked_at IS NULL;
COMMENT ON INDEX api_tokens_live_name IS 'A name (the owner of the jobs submitted with it) belongs to one live token at a time; a revoked token''s name may be given again (rotation keeps the jobs).';

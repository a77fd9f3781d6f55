-- The job as the API shows it: one definition, used by every endpoint that returns jobs. The
-- spec's secret_env values are redacted (ty_spec_public). result.latest_checkpoint is the newest
-- committed checkpoint; result.best_checkpoint the best one by
-- run_config.checkpoint_config.checkpoint_score_attribute (a number among rank 0's metrics) in
-- checkpoint_score_order (max by default), the newer on a tie; null without an attribute or when
-- no checkpoint has it. failures and preemptions count the job's restarts (docs/fault-tolerance.md).
-- tags and notes are the columns (PATCH changes them); goodput is ty_job_goodput, null before the
-- first placement (a pending job's reply stays the same from one read to the next).
-- PL/pgSQL, not SQL: PostgreSQL (15) plans a SQL function's body again at every call that cannot
-- inline it (this one has sub-selects), which made this the costliest part of a submission; a
-- PL/pgSQL function keeps its plan for the connection's life (docs/decisions.md).
CREATE OR REPLACE FUNCTION ty_job_json(j jobs) RETURNS jsonb LANGUAGE plpgsql STABLE AS $$
DECLARE
    latest jsonb;
    best jsonb;
BEGIN
    -- A job never placed (attempt 0: every submission's reply) has no checkpoints: then the
    -- one expression below is all, evaluated without starting an executor for sub-selects.
    IF j.attempt > 0 THEN
        latest := (SELECT jsonb_build_object('id', c.id, 'step', c.step, 'metrics', c.metrics)
                     FROM checkpoints c WHERE c.job_id = j.id AND c.status = 'COMMITTED'
                    ORDER BY c.attempt DESC, c.idx DESC LIMIT 1);
        best := (SELECT jsonb_build_object('id', c.id, 'step', c.step, 'metrics', c.metrics)
                   FROM checkpoints c,
                        LATERAL (SELECT j.spec #>> '{run_config,checkpoint_config,checkpoint_score_attribute}' AS attr,
                                        coalesce(j.spec #>> '{run_config,checkpoint_config,checkpoint_score_order}', 'max') AS ord) s
                  WHERE c.job_id = j.id AND c.status = 'COMMITTED' AND s.attr IS NOT NULL
                    AND jsonb_typeof(c.metrics -> s.attr) = 'number'
                  ORDER BY CASE WHEN s.ord = 'min' THEN (c.metrics ->> s.attr)::float8
                                ELSE -(c.metrics ->> s.attr)::float8 END,
                           c.attempt DESC, c.idx DESC
                  LIMIT 1);
    END IF;
    RETURN jsonb_build_object(
        'id', j.id, 'name', j.name, 'owner', j.owner, 'project', j.project, 'status', j.status,
        'status_message', j.status_message, 'priority', j.priority, 'attempt', j.attempt,
        'spec', ty_spec_public(j.spec), 'created_at', ty_ts(j.created_at),
        'started_at', ty_ts(j.started_at), 'finished_at', ty_ts(j.finished_at),
        'failures', j.failures, 'preemptions', j.preemptions, 'tags', to_jsonb(j.tags),
        'notes', j.notes, 'goodput', CASE WHEN j.attempt > 0 THEN ty_job_goodput(j) END,
        'result', jsonb_build_object('metrics', j.last_metrics, 'error', j.error,
                                     'latest_checkpoint', latest, 'best_checkpoint', best));
END $$;
COMMENT ON FUNCTION ty_job_json(jobs) IS 'The job object of the REST API (GET /api/v1/jobs/{id}); secret_env values redacted; result.best_checkpoint by checkpoint_config; failures and preemptions; the project; tags, notes and goodput.';

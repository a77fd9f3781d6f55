-- Issue 25: a sweep's events, what its trials' jobs' events cannot say: so far that its metric
-- is in no report (ty_sweep_check_metric), once per sweep. GET /api/v1/sweeps/{id} shows them.
CREATE TABLE sweep_events (
    id       bigserial PRIMARY KEY,
    sweep_id bigint NOT NULL REFERENCES sweeps (id) ON DELETE CASCADE,
    topic    text NOT NULL CHECK (topic IN ('metric')),
    message  text NOT NULL,
    at       timestamptz NOT NULL DEFAULT clock_timestamp(),
    UNIQUE (sweep_id, topic)
);
COMMENT ON TABLE sweep_events IS 'A sweep''s events in words (one per topic): what went wrong with the sweep as a whole.';
COMMENT ON COLUMN sweep_events.sweep_id IS 'The sweep.';
COMMENT ON COLUMN sweep_events.topic IS 'What it is about: metric (the sweep''s metric is in no report).';
COMMENT ON COLUMN sweep_events.message IS 'What happened, in words.';
COMMENT ON COLUMN sweep_events.at IS 'When it was recorded.';

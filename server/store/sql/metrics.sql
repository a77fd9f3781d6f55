-- Numbers each worker reported, one row per number, with the columns of the table it replaced
-- (migration 0022 moved them into reports.metrics): read-only, for SQL users. Reported values
-- that are not numbers (strings, booleans, ...: migration 0036) are in reports.metrics only.
CREATE OR REPLACE VIEW metrics AS
SELECT r.job_id, r.attempt, r.rank, r.seq, e.key AS name, r.step,
       ty_metric_value(e.value) AS value, r.reported_at
  FROM reports r CROSS JOIN LATERAL jsonb_each(r.metrics) e
 WHERE jsonb_typeof(e.value) = 'number';
COMMENT ON VIEW metrics IS 'Numbers each worker reported, one row per number (read-only; stored inline in reports.metrics since migration 0022; other values only there).';

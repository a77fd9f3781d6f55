-- Reports keep every value a worker reported (Ray's train.report() takes any JSON-serialisable
-- value: report({"phase": "probe"})), not only its numbers: the server no longer drops the
-- others. Numbers are charted; the others are returned as they were reported. Schema is
-- unchanged (reports.metrics is jsonb already); only what the column holds is said again.
COMMENT ON COLUMN reports.metrics IS 'The report''s values, {"name": value, ...}, as the worker sent them: numbers (charted) and any other JSON value (strings, booleans, null, arrays, objects); {} when none.';

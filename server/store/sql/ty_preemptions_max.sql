-- How many times a job may be preempted (drains) and restarted; the next preemption fails it.
CREATE OR REPLACE FUNCTION ty_preemptions_max() RETURNS integer LANGUAGE sql IMMUTABLE AS 'SELECT 10';
COMMENT ON FUNCTION ty_preemptions_max() IS 'The cap on jobs.preemptions (docs/fault-tolerance.md).';

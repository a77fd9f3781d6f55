-- A job's goodput (README, "Goodput and the startup breakdown"): the useful training time of all
-- its attempts (ty_attempt_startup: work after the last checkpoint of a failed attempt is lost)
-- over its wall time, from submission to its end (or now). ratio is null before any time passed.
CREATE OR REPLACE FUNCTION ty_job_goodput(j jobs) RETURNS jsonb LANGUAGE sql STABLE AS $$
    SELECT jsonb_build_object('useful_s', s.useful, 'lost_s', s.lost, 'wall_s', s.wall,
                              'ratio', CASE WHEN s.wall > 0 THEN least(1, s.useful / s.wall) END)
      FROM (SELECT coalesce(sum((x ->> 'useful_s')::float8), 0) AS useful,
                   coalesce(sum((x ->> 'lost_s')::float8), 0) AS lost,
                   extract(epoch FROM coalesce(j.finished_at, now()) - j.created_at)::float8 AS wall
              FROM attempts a, LATERAL ty_attempt_startup(j, a) x
             WHERE a.job_id = j.id) s
$$;
COMMENT ON FUNCTION ty_job_goodput(jobs) IS 'A job''s useful and lost training seconds over all attempts, its wall seconds and their ratio (goodput).';

-- Appends one row to a job's stream; returns its seq (NULL when the job does not exist).
CREATE OR REPLACE FUNCTION ty_stream_append(p_job bigint, p_kind text, p_attempt integer, p_rank integer,
                                 p_body jsonb) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
    s bigint;
BEGIN
    UPDATE jobs SET stream_seq = stream_seq + 1 WHERE id = p_job RETURNING stream_seq INTO s;
    IF NOT FOUND THEN
        RETURN NULL;
    END IF;
    INSERT INTO job_stream (job_id, seq, kind, attempt, rank, body)
    VALUES (p_job, s, p_kind, p_attempt, p_rank, p_body);
    RETURN s;
END $$;

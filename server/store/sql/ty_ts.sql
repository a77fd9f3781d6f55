-- A timestamp as the API writes it (RFC 3339, UTC, microseconds). One definition, used wherever
-- SQL writes a time into the API's JSON.
-- STABLE, as to_char is: PostgreSQL then inlines it into the query that calls it, where an
-- IMMUTABLE declaration over a STABLE body made every call plan this body again.
CREATE OR REPLACE FUNCTION ty_ts(t timestamptz) RETURNS text LANGUAGE sql STABLE AS $$
    SELECT to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"')
$$;
COMMENT ON FUNCTION ty_ts(timestamptz) IS 'RFC 3339 UTC text of a timestamp, as the API writes times.';

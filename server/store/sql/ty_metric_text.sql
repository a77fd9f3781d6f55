-- A reported value as the API writes it in a band's first and last: the number (null when it is
-- not finite), or the JSON text of a value that is not a number.
CREATE OR REPLACE FUNCTION ty_metric_text(v jsonb) RETURNS text LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(v) <> 'number' THEN v::text
                WHEN ty_metric_value(v) IN ('NaN', 'Infinity', '-Infinity') THEN 'null'
                ELSE ty_metric_value(v)::text END
$$;
COMMENT ON FUNCTION ty_metric_text(jsonb) IS 'A reported value as JSON text: the float8 of a number (null when not finite), else the value''s JSON.';

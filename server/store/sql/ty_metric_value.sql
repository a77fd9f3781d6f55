-- A number as the API writes it: NaN for what is not a finite number (written out as null).
CREATE OR REPLACE FUNCTION ty_metric_value(v jsonb) RETURNS double precision LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(v) = 'number' THEN v::double precision
                ELSE 'NaN'::double precision END
$$;
COMMENT ON FUNCTION ty_metric_value(jsonb) IS 'A reported number as float8; NaN when the jsonb value is not a number (written out as null by the API).';

-- The spec as the API shows it: secret_env keeps its names, never its values. PL/pgSQL: a SQL
-- function with a sub-select is never inlined, and PostgreSQL would plan its body at every call.
CREATE OR REPLACE FUNCTION ty_spec_public(spec jsonb) RETURNS jsonb LANGUAGE plpgsql IMMUTABLE AS $$
BEGIN
    IF jsonb_typeof(spec -> 'secret_env') IS DISTINCT FROM 'object' THEN
        RETURN spec;
    END IF;
    RETURN jsonb_set(spec, '{secret_env}',
                     coalesce((SELECT jsonb_object_agg(k, '<redacted>')
                                 FROM jsonb_object_keys(spec -> 'secret_env') k),
                              '{}'::jsonb));
END $$;
COMMENT ON FUNCTION ty_spec_public(jsonb) IS 'A job spec with the values of secret_env replaced by "<redacted>": what the REST API returns.';

-- The spec as the API shows it: secret_env keeps its names, never its values.
CREATE OR REPLACE FUNCTION ty_spec_public(spec jsonb) RETURNS jsonb LANGUAGE sql IMMUTABLE AS $$
    SELECT CASE WHEN jsonb_typeof(spec->'secret_env') = 'object'
                THEN jsonb_set(spec, '{secret_env}',
                               coalesce((SELECT jsonb_object_agg(k, '<redacted>')
                                           FROM jsonb_object_keys(spec->'secret_env') k),
                                        '{}'::jsonb))
                ELSE spec END
$$;
COMMENT ON FUNCTION ty_spec_public(jsonb) IS 'A job spec with the values of secret_env replaced by "<redacted>": what the REST API returns.';

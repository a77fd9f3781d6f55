-- Issue 15 (code that travels): a job's working directory packed on the submitting machine
-- (tar.gz), uploaded once to the artifact store and addressed by its SHA-256. A job names it in
-- its spec's code_package; every node that runs the job's workers fetches it once and caches it.

CREATE TABLE code_packages (
    sha256      text PRIMARY KEY CHECK (sha256 ~ '^[0-9a-f]{64}$'),
    size_bytes  bigint NOT NULL CHECK (size_bytes >= 0),
    location    text NOT NULL,
    uploaded_by text NOT NULL,
    created_at  timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE code_packages IS 'Code packages (a packed working directory, tar.gz) stored complete and verified in the artifact store.';
COMMENT ON COLUMN code_packages.sha256 IS 'SHA-256 (hex) of the tar.gz: its name in the API and its content address.';
COMMENT ON COLUMN code_packages.size_bytes IS 'Size of the tar.gz.';
COMMENT ON COLUMN code_packages.location IS 'Where the artifact store keeps it (backend key, e.g. sha256/ab/ab12...).';
COMMENT ON COLUMN code_packages.uploaded_by IS 'The token name of the first user who uploaded it.';
COMMENT ON COLUMN code_packages.created_at IS 'When it was first stored.';

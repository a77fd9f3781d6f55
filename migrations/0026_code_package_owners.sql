-- Issue 15 (resume from a local checkpoint): a checkpoint directory uploaded as a package
-- (the code package endpoint) holds a user's weights and data, so a job may resume from it only
-- when its owner uploaded it (or an admin submits). Packages are content-addressed and stored
-- once; every user who uploaded the bytes (proved by sending them, hashed by the server) owns
-- the package.

CREATE TABLE code_package_owners (
    sha256     text NOT NULL REFERENCES code_packages (sha256) ON DELETE CASCADE,
    owner      text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (sha256, owner)
);
COMMENT ON TABLE code_package_owners IS 'Who uploaded each code package (one row per user who sent its bytes).';
COMMENT ON COLUMN code_package_owners.sha256 IS 'The package (code_packages.sha256).';
COMMENT ON COLUMN code_package_owners.owner IS 'The token name of a user who uploaded it.';
COMMENT ON COLUMN code_package_owners.created_at IS 'When that user''s upload completed.';

INSERT INTO code_package_owners (sha256, owner, created_at)
    SELECT sha256, uploaded_by, created_at FROM code_packages;

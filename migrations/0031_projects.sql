-- Issue 22 (finding 13): projects. A job belongs to one project; a private project's jobs are
-- seen only by its members and admins, a shared project's by every role (docs/decisions.md,
-- "Projects"). Project `default` is shared, so jobs submitted without a project are seen as
-- before. Who may see a project's jobs is decided once, by ty_project_visible
-- (server/store/sql/ty_project_visible.sql).
-- Schema only: the functions that go with it are definitions in server/store/sql/.

CREATE TABLE projects (
    name       text PRIMARY KEY,
    visibility text NOT NULL CHECK (visibility IN ('private', 'shared')),
    created_by text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now()
);
COMMENT ON TABLE projects IS 'Projects: groups of jobs with their own visibility.';
COMMENT ON COLUMN projects.name IS 'The project''s name (1 to 64 of a-z, 0-9, ., _, -; first a letter or digit), as job specs name it.';
COMMENT ON COLUMN projects.visibility IS 'private: its jobs are seen by its members and admins only; shared: by every role.';
COMMENT ON COLUMN projects.created_by IS 'The token name that created it.';
COMMENT ON COLUMN projects.created_at IS 'When it was created.';

CREATE TABLE project_members (
    project    text NOT NULL REFERENCES projects (name) ON DELETE CASCADE,
    member     text NOT NULL,
    added_by   text NOT NULL,
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (project, member)
);
CREATE INDEX project_members_member_idx ON project_members (member);
COMMENT ON TABLE project_members IS 'Who belongs to each project (token names).';
COMMENT ON COLUMN project_members.project IS 'The project (projects.name).';
COMMENT ON COLUMN project_members.member IS 'A token name that belongs to it.';
COMMENT ON COLUMN project_members.added_by IS 'The token name that added the member (the creator for the first members).';
COMMENT ON COLUMN project_members.created_at IS 'When the member was added.';

INSERT INTO projects (name, visibility, created_by) VALUES ('default', 'shared', 'trainyard');

-- The spec's "project" (absent in every spec before this migration): one source of truth, the
-- spec, with the column for the foreign key and for filters.
ALTER TABLE jobs ADD COLUMN project text
    GENERATED ALWAYS AS (coalesce(spec ->> 'project', 'default')) STORED;
ALTER TABLE jobs ADD CONSTRAINT jobs_project_fkey FOREIGN KEY (project) REFERENCES projects (name);
CREATE INDEX jobs_project_id_idx ON jobs (project, id DESC);
COMMENT ON COLUMN jobs.project IS 'The job''s project (projects.name): the spec''s "project", "default" when it has none.';

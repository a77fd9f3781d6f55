-- Whether p_who (a token name; p_admin: its role is admin) may resume a job from checkpoint
-- p_ckpt: admins, the owner of the job that wrote it, and the members of that job's project
-- (issue 22). No row when the checkpoint is not COMMITTED or its job is not one p_who may see
-- (ty_project_visible): a private project's checkpoint is not found, not forbidden.
CREATE OR REPLACE FUNCTION ty_checkpoint_usable(p_ckpt bigint, p_who text, p_admin boolean)
RETURNS TABLE (usable boolean) LANGUAGE sql STABLE AS $$
    SELECT p_admin OR j.owner = p_who
        OR EXISTS (SELECT 1 FROM project_members m WHERE m.project = j.project AND m.member = p_who)
    FROM checkpoints k JOIN jobs j ON j.id = k.job_id
    WHERE k.id = p_ckpt AND k.status = 'COMMITTED' AND ty_project_visible(j.project, p_who, p_admin)
$$;
COMMENT ON FUNCTION ty_checkpoint_usable(bigint, text, boolean) IS 'Whether a token name may resume from a checkpoint: admins, its job''s owner, that job''s project''s members; no row when not committed or not visible.';

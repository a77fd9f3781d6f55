/* Projects and who sees which jobs (migrations/0031_projects.sql, issue 22). The rule itself is
 * one SQL function, ty_project_visible (store/sql/ty_project_visible.sql); every read of a job
 * goes through it: store_job_visible and store_checkpoint_visible for the routes under
 * /api/v1/jobs/{id} and /api/v1/checkpoints/{id} (auth.c) and /stream subscriptions, the job
 * list's WHERE clause (store_jobs.c). Who may use a checkpoint or a code package in a job spec is
 * one function each too: ty_checkpoint_usable, ty_package_usable. */
#include "store.h"

#include "db_query.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *admin_flag(const struct srv_identity *who)
{
    return who->role == SRV_ROLE_ADMIN ? "t" : "f";
}

/* Runs a one-row, one-boolean-column statement: *out = its value; 0 when no row. */
static int exec_bool(struct db_conn *c, const struct db_stmt *st, const char *const *p, bool *out)
{
    PGresult *res = NULL;
    int qs = db_exec(c, st, p, &res);
    if (qs <= 0)
        return qs;
    *out = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    PQclear(res);
    return qs;
}

int store_job_visible(struct db_conn *c, const struct srv_identity *who, int64_t job, bool *visible)
{
    static const struct db_stmt st = {
        "job_visible",
        "SELECT ty_project_visible(project, $2, $3::boolean) FROM jobs WHERE id = $1", 3, true};
    char id[32];
    STORE_NUM(id, job);
    const char *p[] = {id, who->name, admin_flag(who)};
    return exec_bool(c, &st, p, visible);
}

int store_checkpoint_usable(struct db_conn *c, const struct srv_identity *who, int64_t ckpt,
                            bool *usable)
{
    static const struct db_stmt st = {
        "checkpoint_usable", "SELECT usable FROM ty_checkpoint_usable($1, $2, $3::boolean)", 3,
        true};
    char id[32];
    STORE_NUM(id, ckpt);
    const char *p[] = {id, who->name, admin_flag(who)};
    return exec_bool(c, &st, p, usable);
}

int store_code_usable(struct db_conn *c, const struct srv_identity *who, const char *sha256,
                      bool *usable)
{
    static const struct db_stmt st = {"code_usable",
                                      "SELECT ty_package_usable($1, $2, $3::boolean)", 3, true};
    const char *p[] = {sha256, who->name, admin_flag(who)};
    int qs = exec_bool(c, &st, p, usable);
    return qs == 0 ? DB_HARD_ERROR : qs;
}

int store_checkpoint_visible(struct db_conn *c, const struct srv_identity *who, int64_t ckpt,
                             bool *visible)
{
    static const struct db_stmt st = {
        "checkpoint_visible",
        "SELECT ty_project_visible(j.project, $2, $3::boolean) "
        "FROM checkpoints k JOIN jobs j ON j.id = k.job_id WHERE k.id = $1",
        3, true};
    char id[32];
    STORE_NUM(id, ckpt);
    const char *p[] = {id, who->name, admin_flag(who)};
    return exec_bool(c, &st, p, visible);
}

int store_project_create(struct db_conn *c, const char *name, const char *visibility,
                         const char *creator, const char *members_json)
{
    static const struct db_stmt st = {
        "project_create",
        "WITH p AS (INSERT INTO projects (name, visibility, created_by) VALUES ($1, $2, $3) "
        "           ON CONFLICT (name) DO NOTHING RETURNING name), "
        "m AS (INSERT INTO project_members (project, member, added_by) "
        "      SELECT p.name, x.member, $3 FROM p, "
        "             (SELECT DISTINCT member FROM jsonb_array_elements_text($4::jsonb) member) x "
        "      RETURNING 1) "
        "SELECT count(*) FROM p",
        4, false};
    const char *p[] = {name, visibility, creator, members_json};
    char *n = NULL;
    int qs = db_exec_text(c, &st, p, &n);
    if (qs > 0)
        qs = n && strcmp(n, "1") == 0 ? 1 : 0;
    free(n);
    return qs;
}

int store_project_get(struct db_conn *c, const struct srv_identity *who, const char *name,
                      char **json_out)
{
    static const struct db_stmt st = {
        "project_get",
        "SELECT ty_project_json(p)::text FROM projects p "
        "WHERE p.name = $1 AND ty_project_visible(p.name, $2, $3::boolean)",
        3, true};
    const char *p[] = {name, who->name, admin_flag(who)};
    return db_exec_text(c, &st, p, json_out);
}

int store_project_list(struct db_conn *c, const struct srv_identity *who, char **json_out)
{
    static const struct db_stmt st = {
        "project_list",
        "SELECT coalesce(jsonb_agg(ty_project_json(p) ORDER BY p.name), '[]')::text "
        "FROM projects p WHERE ty_project_visible(p.name, $1, $2::boolean)",
        2, true};
    const char *p[] = {who->name, admin_flag(who)};
    return db_exec_text(c, &st, p, json_out);
}

int store_project_access(struct db_conn *c, const struct srv_identity *who, const char *name,
                         enum store_project_access *access)
{
    static const struct db_stmt st = {
        "project_access",
        "SELECT ty_project_visible(p.name, $2, $3::boolean), "
        "       $3::boolean OR EXISTS (SELECT 1 FROM project_members m "
        "                               WHERE m.project = p.name AND m.member = $2) "
        "FROM projects p WHERE p.name = $1",
        3, true};
    const char *p[] = {name, who->name, admin_flag(who)};
    PGresult *res = NULL;
    *access = STORE_PROJECT_NOT_FOUND;
    int qs = db_exec(c, &st, p, &res);
    if (qs <= 0)
        return qs;
    if (strcmp(PQgetvalue(res, 0, 0), "t") == 0)
        *access =
            strcmp(PQgetvalue(res, 0, 1), "t") == 0 ? STORE_PROJECT_MEMBER : STORE_PROJECT_VISIBLE;
    PQclear(res);
    return qs;
}

int store_project_add_member(struct db_conn *c, const char *name, const char *member,
                             const char *added_by)
{
    static const struct db_stmt st = {
        "project_add_member",
        "INSERT INTO project_members (project, member, added_by) VALUES ($1, $2, $3) "
        "ON CONFLICT (project, member) DO NOTHING",
        3, false};
    const char *p[] = {name, member, added_by};
    return db_exec(c, &st, p, NULL);
}

struct member_removal {
    const char *name, *member;
    enum store_member_removal *out;
};

/* In one transaction with the project's row locked, so that two members removing each other at
 * once cannot both pass the last-member check. */
static int remove_member_txn(struct db_conn *c, void *arg)
{
    struct member_removal *a = arg;
    static const struct db_stmt lock = {
        "project_member_lock",
        "SELECT p.visibility = 'private' "
        "       AND (SELECT count(*) FROM project_members m WHERE m.project = p.name) <= 1, "
        "       EXISTS (SELECT 1 FROM project_members m WHERE m.project = p.name "
        "                                                AND m.member = $2) "
        "FROM projects p WHERE p.name = $1 FOR UPDATE",
        2, false};
    static const struct db_stmt del = {
        "project_member_delete", "DELETE FROM project_members WHERE project = $1 AND member = $2",
        2, false};
    const char *p[] = {a->name, a->member};
    PGresult *res = NULL;
    int qs = db_exec(c, &lock, p, &res);
    if (qs <= 0)
        return qs;
    bool last = strcmp(PQgetvalue(res, 0, 0), "t") == 0;
    bool member = strcmp(PQgetvalue(res, 0, 1), "t") == 0;
    PQclear(res);
    *a->out = !member ? STORE_MEMBER_NOT_A_MEMBER : last ? STORE_MEMBER_LAST : STORE_MEMBER_REMOVED;
    if (*a->out != STORE_MEMBER_REMOVED)
        return 1;
    qs = db_exec(c, &del, p, NULL);
    return qs < 0 ? qs : 1;
}

int store_project_remove_member(struct db_conn *c, const char *name, const char *member,
                                enum store_member_removal *out)
{
    struct member_removal a = {name, member, out};
    return db_run_txn(c, remove_member_txn, &a);
}

struct project_deletion {
    const char *name;
    int64_t *jobs;
};

/* Locks the project's row first: a job submitted into it meanwhile waits for the deletion (its
 * foreign key takes a share lock on that row), then fails, rather than being orphaned. */
static int delete_txn(struct db_conn *c, void *arg)
{
    struct project_deletion *a = arg;
    static const struct db_stmt lock = {
        "project_delete_lock",
        "SELECT (SELECT count(*) FROM jobs j WHERE j.project = p.name) AS jobs "
        "FROM projects p WHERE p.name = $1 FOR UPDATE",
        1, false};
    static const struct db_stmt del = {
        "project_delete",
        "WITH q AS (DELETE FROM quotas WHERE subject_kind = 'project' AND subject = $1) "
        "DELETE FROM projects WHERE name = $1",
        1, false};
    const char *p[] = {a->name};
    PGresult *res = NULL;
    int qs = db_exec(c, &lock, p, &res);
    if (qs <= 0)
        return qs;
    bool read = db_col_int64(res, 0, "jobs", a->jobs) == 0;
    PQclear(res);
    if (!read)
        return DB_HARD_ERROR;
    if (*a->jobs > 0)
        return 1;
    qs = db_exec(c, &del, p, NULL);
    return qs < 0 ? qs : 1;
}

int store_project_delete(struct db_conn *c, const char *name, int64_t *jobs)
{
    struct project_deletion a = {name, jobs};
    return db_run_txn(c, delete_txn, &a);
}

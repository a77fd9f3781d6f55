/* See db_migrate.h for what this module does and its contract. */
#include "db_migrate.h"

#include "db_query.h"
#include "embed.h"
#include "log.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIGRATION_LOCK_KEY "7468797900"

/* A database created before checksums were kept has the table without its sha256 column: the
 * column is added here, before anything reads it. */
static const char create_table[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "  version integer PRIMARY KEY,"
    "  name text NOT NULL,"
    "  applied_at timestamptz NOT NULL DEFAULT now());"
    "ALTER TABLE schema_migrations ADD COLUMN IF NOT EXISTS sha256 text;"
    "COMMENT ON TABLE schema_migrations IS 'Migrations applied to this database, one row each.';"
    "COMMENT ON COLUMN schema_migrations.version IS 'NNNN of migrations/NNNN_name.sql.';"
    "COMMENT ON COLUMN schema_migrations.name IS 'File name of the migration.';"
    "COMMENT ON COLUMN schema_migrations.applied_at IS 'When it was committed.';"
    "COMMENT ON COLUMN schema_migrations.sha256 IS 'Lowercase hex SHA-256 of the file''s text as "
    "applied; the server refuses to start when the file has changed since. NULL only in a row "
    "written before checksums were kept, until the next start records the file''s.';";

/* Runs the text of an embedded SQL file (several statements; none is fine too). Returns 0, or
 * DB_SOFT_ERROR / DB_HARD_ERROR after logging `what` and the file's name. */
static int exec_file(struct db_conn *c, const struct ty_embedded_file *f, const char *what)
{
    PGresult *res = PQexec(db_pg(c), (const char *)f->data);
    ExecStatusType st = PQresultStatus(res);
    if (st == PGRES_COMMAND_OK || st == PGRES_TUPLES_OK || st == PGRES_EMPTY_QUERY) {
        PQclear(res);
        return 0;
    }
    const char *state = PQresultErrorField(res, PG_DIAG_SQLSTATE);
    /* Deadlock, serialization failure or lock timeout against a server already running:
     * the caller retries the whole transaction. */
    int qs = state && (strcmp(state, "40P01") == 0 || strcmp(state, "40001") == 0 ||
                       strcmp(state, "55P03") == 0)
                 ? DB_SOFT_ERROR
                 : DB_HARD_ERROR;
    if (qs == DB_HARD_ERROR)
        TY_ERROR("db", "%s %s failed: %s", what, f->name, PQresultErrorMessage(res));
    else
        TY_WARN("db", "%s %s: retryable failure: %s", what, f->name, PQresultErrorMessage(res));
    PQclear(res);
    return qs;
}

static int version_of(const struct ty_embedded_file *f, char version[16])
{
    size_t digits = strspn(f->name, "0123456789");
    if (digits == 0 || digits >= 16 || f->name[digits] != '_') {
        TY_ERROR("db", "migration file %s is not named NNNN_name.sql", f->name);
        return -1;
    }
    snprintf(version, 16, "%.*s", (int)digits, f->name);
    return 0;
}

static int apply_one(struct db_conn *c, const struct ty_embedded_file *f, const char *version,
                     const char *sha256)
{
    static const struct db_stmt record = {
        "migration_record",
        "INSERT INTO schema_migrations (version, name, sha256) VALUES ($1::int, $2, $3)", 3, false};
    if (db_exec_simple(c, "BEGIN") < 0)
        return -1;
    if (exec_file(c, f, "migration") != 0) {
        db_exec_simple(c, "ROLLBACK");
        return -1;
    }
    const char *params[] = {version, f->name, sha256};
    if (db_exec(c, &record, params, NULL) < 0 || db_exec_simple(c, "COMMIT") < 0) {
        db_exec_simple(c, "ROLLBACK");
        return -1;
    }
    TY_INFO("db", "applied migration %s", f->name);
    return 0;
}

/* Checks one migration against its row. Returns 1 when it is applied (and unchanged, or its
 * checksum was just recorded: *adopted + 1), 0 when it is not applied yet, -1 when its text
 * changed after it was applied, or on a database error (logged). */
static int check_applied(struct db_conn *c, const struct ty_embedded_file *f, const char *version,
                         const char *sha256, int *adopted)
{
    static const struct db_stmt applied = {
        "migration_applied",
        "SELECT sha256, to_char(applied_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS \"UTC\"') "
        "FROM schema_migrations WHERE version = $1::int",
        1, true};
    static const struct db_stmt adopt = {
        "migration_adopt",
        "UPDATE schema_migrations SET sha256 = $2 WHERE version = $1::int AND sha256 IS NULL", 2,
        false};
    PGresult *res = NULL;
    const char *params[] = {version, sha256};
    int qs = db_exec(c, &applied, params, &res);
    if (qs <= 0)
        return qs < 0 ? -1 : 0;
    int rc = 1;
    if (PQgetisnull(res, 0, 0)) {
        if (db_exec(c, &adopt, params, NULL) < 0)
            rc = -1;
        else
            (*adopted)++;
    } else if (strcmp(PQgetvalue(res, 0, 0), sha256) != 0) {
        TY_ERROR("db",
                 "migration %s was changed after it was applied to this database (sha256 %s, "
                 "applied %s; the file now has sha256 %s): restore the file as it was and put "
                 "the change in a new migration",
                 f->name, PQgetvalue(res, 0, 0), PQgetvalue(res, 0, 1), sha256);
        rc = -1;
    }
    PQclear(res);
    return rc;
}

static int apply_definitions(struct db_conn *c, void *arg)
{
    const struct ty_embedded_file *definitions = arg;
    for (const struct ty_embedded_file *f = definitions; f->name; f++) {
        int qs = exec_file(c, f, "definition");
        if (qs < 0)
            return qs;
    }
    return 0;
}

static int migrate_locked(struct db_conn *c, const struct ty_embedded_file *migrations,
                          const struct ty_embedded_file *definitions)
{
    if (db_exec_simple(c, create_table) < 0)
        return -1;
    size_t n = 0;
    while (migrations[n].name)
        n++;
    char(*sums)[65] = calloc(n ? n : 1, sizeof(*sums));
    bool *pending = calloc(n ? n : 1, sizeof(*pending));
    int count = -1, adopted = 0;
    if (sums == NULL || pending == NULL)
        goto out;
    /* Every applied migration is checked before any is applied. */
    for (size_t i = 0; i < n; i++) {
        char version[16];
        if (version_of(&migrations[i], version) != 0)
            goto out;
        util_sha256_hex(migrations[i].data, migrations[i].size, sums[i]);
        int rc = check_applied(c, &migrations[i], version, sums[i], &adopted);
        if (rc < 0)
            goto out;
        pending[i] = rc == 0;
    }
    if (adopted > 0)
        TY_INFO("db",
                "this database predates migration checksums: recorded the sha256 of the %d "
                "migrations it had applied",
                adopted);
    count = 0;
    for (size_t i = 0; i < n && count >= 0; i++) {
        char version[16];
        if (!pending[i])
            continue;
        if (version_of(&migrations[i], version) != 0 ||
            apply_one(c, &migrations[i], version, sums[i]) != 0)
            count = -1;
        else
            count++;
    }
    if (count < 0)
        goto out;
    if (db_run_txn(c, apply_definitions, (void *)definitions) < 0) {
        TY_ERROR("db", "the definitions of server/store/sql/ could not be applied");
        count = -1;
        goto out;
    }
    size_t ndefs = 0;
    while (definitions[ndefs].name)
        ndefs++;
    TY_INFO("db", "schema up to date (%d migrations applied now); %zu definitions applied", count,
            ndefs);
out:
    free(sums);
    free(pending);
    return count;
}

int db_migrate(struct db *db, const struct ty_embedded_file *migrations,
               const struct ty_embedded_file *definitions)
{
    struct db_conn *c = db_acquire(db);
    if (c == NULL)
        return -1;
    if (db_exec_simple(c, "SELECT pg_advisory_lock(" MIGRATION_LOCK_KEY ")") < 0) {
        db_release(db, c);
        return -1;
    }
    int count = migrate_locked(c, migrations, definitions);
    db_exec_simple(c, "SELECT pg_advisory_unlock(" MIGRATION_LOCK_KEY ")");
    db_release(db, c);
    return count;
}

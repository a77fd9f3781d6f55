/* See db_migrate.h for what this module does and its contract. */
#include "db_migrate.h"

#include "db_query.h"
#include "embed.h"
#include "log.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MIGRATION_LOCK_KEY "7468797900"

static const char create_table[] =
    "CREATE TABLE IF NOT EXISTS schema_migrations ("
    "  version integer PRIMARY KEY,"
    "  name text NOT NULL,"
    "  applied_at timestamptz NOT NULL DEFAULT now());"
    "COMMENT ON TABLE schema_migrations IS 'Migrations applied to this database, one row each.';"
    "COMMENT ON COLUMN schema_migrations.version IS 'NNNN of migrations/NNNN_name.sql.';"
    "COMMENT ON COLUMN schema_migrations.name IS 'File name of the migration.';"
    "COMMENT ON COLUMN schema_migrations.applied_at IS 'When it was committed.';";

static int apply_one(struct db_conn *c, const struct ty_embedded_file *f, const char *version)
{
    static const struct db_stmt record = {
        "migration_record", "INSERT INTO schema_migrations (version, name) VALUES ($1::int, $2)", 2,
        false};
    if (db_exec_simple(c, "BEGIN") < 0)
        return -1;
    if (db_exec_simple(c, (const char *)f->data) < 0) {
        TY_ERROR("db", "migration %s failed: %s", f->name, PQerrorMessage(db_pg(c)));
        db_exec_simple(c, "ROLLBACK");
        return -1;
    }
    const char *params[] = {version, f->name};
    if (db_exec(c, &record, params, NULL) < 0 || db_exec_simple(c, "COMMIT") < 0) {
        db_exec_simple(c, "ROLLBACK");
        return -1;
    }
    TY_INFO("db", "applied migration %s", f->name);
    return 0;
}

int db_migrate(struct db *db, const struct ty_embedded_file *migrations)
{
    static const struct db_stmt applied = {
        "migration_applied", "SELECT 1 FROM schema_migrations WHERE version = $1::int", 1, true};
    struct db_conn *c = db_acquire(db);
    if (c == NULL)
        return -1;
    int count = 0;
    if (db_exec_simple(c, "SELECT pg_advisory_lock(" MIGRATION_LOCK_KEY ")") < 0) {
        db_release(db, c);
        return -1;
    }
    if (db_exec_simple(c, create_table) < 0) {
        count = -1;
        goto out;
    }
    for (const struct ty_embedded_file *f = migrations; f->name; f++) {
        char version[16];
        size_t digits = strspn(f->name, "0123456789");
        if (digits == 0 || digits >= sizeof(version) || f->name[digits] != '_') {
            TY_ERROR("db", "migration file %s is not named NNNN_name.sql", f->name);
            count = -1;
            goto out;
        }
        snprintf(version, sizeof(version), "%.*s", (int)digits, f->name);
        const char *params[] = {version};
        int qs = db_exec(c, &applied, params, NULL);
        if (qs < 0) {
            count = -1;
            goto out;
        }
        if (qs == 1)
            continue;
        if (apply_one(c, f, version) != 0) {
            count = -1;
            goto out;
        }
        count++;
    }
out:
    db_exec_simple(c, "SELECT pg_advisory_unlock(" MIGRATION_LOCK_KEY ")");
    db_release(db, c);
    return count;
}

/* The database's schema and definitions, brought up to date at every server start under an
 * advisory lock (so that servers starting together do not collide):
 *  - migrations (migrations/NNNN_name.sql) change the schema: each is applied once, in order, in
 *    its own transaction, and recorded in schema_migrations with the sha256 of its text. An
 *    applied migration whose text has changed stops the server (one log line naming the file).
 *  - definitions (server/store/sql/, in the order of its load_order.txt): functions, triggers,
 *    views and the job transition table, re-applied whole (CREATE OR REPLACE) after the
 *    migrations, in one transaction, so the database always holds the current ones.
 * README.md ("Database schema and definitions") says how to change either. */
#ifndef SRV_DB_MIGRATE_H
#define SRV_DB_MIGRATE_H

struct db;
struct ty_embedded_file;

/* Verifies the applied migrations, applies the others, then re-applies every definition.
 * Returns the number of migrations applied now, or -1 (logged). */
int db_migrate(struct db *db, const struct ty_embedded_file *migrations,
               const struct ty_embedded_file *definitions);

#endif

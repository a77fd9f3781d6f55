/* Schema migrations: migrations/NNNN_name.sql, compiled into the server, applied in order at
 * start, each in its own transaction, under an advisory lock so that servers starting together
 * do not collide; each applied version is recorded in schema_migrations. */
#ifndef SRV_DB_MIGRATE_H
#define SRV_DB_MIGRATE_H

struct db;
struct ty_embedded_file;

/* Applies the migrations not yet recorded. Returns the number applied, or -1 (logged). */
int db_migrate(struct db *db, const struct ty_embedded_file *migrations);

#endif

/* The embedded PostgreSQL: with no --database-url the server runs its own cluster under
 * <data-dir>/postgres (initdb + pg_ctl from the postgresql package), listening only on a unix
 * socket in <data-dir>/run, and stops it on shutdown. As root, PostgreSQL runs as `postgres`. */
#ifndef SRV_PG_EMBEDDED_H
#define SRV_PG_EMBEDDED_H

#include <stddef.h>

struct pg_embedded;

/* Initialises the cluster on first use, starts it (or adopts one left running), creates the
 * `trainyard` database, and writes a libpq connection string into `conninfo`. Returns 0, or -1
 * with the reason logged. */
int pg_embedded_start(const char *data_dir, const char *bin_dir, struct pg_embedded **out,
                      char *conninfo, size_t conninfo_len);

/* Stops the cluster (fast shutdown) and frees `pg`. NULL is a no-op. */
void pg_embedded_stop(struct pg_embedded *pg);

#endif

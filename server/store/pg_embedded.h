/* The embedded PostgreSQL: with no --database-url the server runs its own cluster under
 * <data-dir>/postgres (initdb + pg_ctl from the postgresql package), listening only on a unix
 * socket in <data-dir>/run, and stops it on shutdown.
 *
 * As root, PostgreSQL runs as the `postgres` user, which must be able to reach those directories.
 * When it cannot (a data directory under /root, mode 0700), the cluster, its socket and its log
 * live in a directory of their own under the fallback directory instead (--pg-fallback-dir,
 * default /var/lib/trainyard/postgres), whose path is recorded in <data-dir>/postgres.location so
 * every later start finds it; with the fallback set to "none" the server refuses to start with
 * one line naming the directory and the fix. The tools run with "/" as working directory, so
 * the caller's working directory does not matter. */
#ifndef SRV_PG_EMBEDDED_H
#define SRV_PG_EMBEDDED_H

#include <stddef.h>

struct pg_embedded;

/* Initialises the cluster on first use, starts it (or adopts one left running), creates the
 * `trainyard` database, and writes a libpq connection string into `conninfo`. fallback_dir: see
 * above (NULL or "none": no fallback). Returns 0, or -1 with the reason logged; when a
 * PostgreSQL tool fails, its own error lines are copied into the server's log. */
int pg_embedded_start(const char *data_dir, const char *bin_dir, const char *fallback_dir,
                      struct pg_embedded **out, char *conninfo, size_t conninfo_len);

/* Stops the cluster (fast shutdown) and frees `pg`. NULL is a no-op. */
void pg_embedded_stop(struct pg_embedded *pg);

#endif

/* The embedded PostgreSQL: with no --database-url the server runs its own cluster under
 * <data-dir>/postgres (initdb + pg_ctl from the postgresql package), listening only on a unix
 * socket in <data-dir>/run, watches it (restarting it when it dies) and stops it on shutdown.
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

#include <stdbool.h>
#include <stddef.h>

struct pg_embedded;

/* Initialises the cluster on first use, starts it (or adopts one left running), creates the
 * `trainyard` database, and writes a libpq connection string into `conninfo`. fallback_dir: see
 * above (NULL or "none": no fallback). Returns 0, or -1 with the reason logged; when a
 * PostgreSQL tool fails, its own error lines are copied into the server's log. */
int pg_embedded_start(const char *data_dir, const char *bin_dir, const char *fallback_dir,
                      struct pg_embedded **out, char *conninfo, size_t conninfo_len);

/* Watches the postmaster from a thread of its own. When it ends (a crash, kill -9), one line
 * says how (exit code or signal) and it is started again, which runs PostgreSQL's crash
 * recovery; the pool's connections reconnect by themselves. After `restart_attempts` failed
 * tries (0: none) the watcher calls on_give_up(arg) once, from its thread, then logs one error
 * line naming the reason, and ends (on_give_up may quiet the other threads' errors first, so that
 * this line is the last: db_quiet_connect_errors). Returns 0, or -1 when the thread could not
 * start. */
int pg_embedded_watch(struct pg_embedded *pg, int restart_attempts, void (*on_give_up)(void *arg),
                      void *arg);

/* Whether the watcher gave up on the postmaster. NULL: false. */
bool pg_embedded_gave_up(const struct pg_embedded *pg);

/* Stops the watcher, then the cluster (fast shutdown), and frees `pg`. NULL is a no-op. */
void pg_embedded_stop(struct pg_embedded *pg);

#endif

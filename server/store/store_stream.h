/* The stream tables (migrations/0007_streams.sql, docs/streams.md) as the stream thread reads
 * them, and the notifications that say when to read. Each function returns a db_qs (db.h) unless
 * said otherwise. Apart from store.h so that the stream thread's statements stay in one place. */
#ifndef SRV_STORE_STREAM_H
#define SRV_STORE_STREAM_H

#include "db.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One row of a job's stream (job_stream) or of the cluster stream (cluster_stream). Strings are
 * borrowed from the enclosing struct store_stream_rows. */
struct store_stream_row {
    int64_t seq;
    const char *kind;
    bool has_attempt, has_rank; /* job rows: attempt and rank are not NULL */
    int attempt, rank;
    const char *at;   /* RFC 3339 (ty_ts) */
    const char *body; /* JSON text */
    size_t body_len;
    bool restricted; /* cluster rows: about a job only members of its project and admins see */
};

struct store_stream_rows {
    struct store_stream_row *rows; /* by seq */
    size_t n;
    /* cluster reads with a row: the snapshot they were read in (pg_snapshot text), else NULL */
    const char *snapshot;
    void *storage; /* private: what the strings point into */
};
void store_stream_rows_free(struct store_stream_rows *rows);

/* Rows of job `job`'s stream with after < seq (<= upto when upto >= 0), at most `limit`, in seq
 * order, into *out (free with store_stream_rows_free, also after a failure). */
int store_job_stream_read(struct db_conn *c, int64_t job, int64_t after, int64_t upto, int limit,
                          struct store_stream_rows *out);
/* The same for the cluster stream; out->snapshot is set when rows came back, and each row's
 * `restricted` (ty_project_visible: a job of a private project). */
int store_cluster_stream_read(struct db_conn *c, int64_t after, int64_t upto, int limit,
                              struct store_stream_rows *out);
/* *head = the seq of job `job`'s newest committed row (0: none). Returns 1, 0 when there is no
 * such job, or an error. */
int store_job_stream_head(struct db_conn *c, int64_t job, int64_t *head);
/* *head = the largest seq of the cluster stream visible now (0: none) and *snapshot (malloc'd)
 * the snapshot it was read in. */
int store_cluster_stream_head(struct db_conn *c, int64_t *head, char **snapshot);
/* *running = how many of the transactions in progress in `snapshot` (pg_snapshot text) are
 * still in progress. */
int store_snapshot_running(struct db_conn *c, const char *snapshot, int64_t *running);

/* Which of the n job topics (jobs[i], followed up to cursors[i]) have committed rows after their
 * cursor: grown[i] set to true for each (false for the others, and for jobs that no longer
 * exist). One statement for all. Returns a db_qs. */
int store_job_streams_grown(struct db_conn *c, const int64_t *jobs, const int64_t *cursors,
                            size_t n, bool *grown);

/* LISTENs on ty_stream on connection `c`, which must then not be handed to db_ensure while
 * healthy (a pending notification looks like a closing server to it). */
int store_stream_listen(struct db_conn *c);
/* Stops listening (before `c` goes back to the pool). */
int store_stream_unlisten(struct db_conn *c);
/* Tells the other servers on this database that streams may have grown: NOTIFY ty_stream, in a
 * transaction of its own that writes nothing else and commits without waiting for the WAL
 * flush. Returns a db_qs. */
int store_stream_notify_peers(struct db_conn *c);
/* The socket to poll for notifications, or -1 when `c` is not connected. */
int store_stream_socket(struct db_conn *c);
/* Whether `c` is connected (false after the server went away: reconnect with db_ensure). */
bool store_stream_connected(struct db_conn *c);
/* Reads what the server sent and counts the ty_stream notifications sent by other connections
 * (other servers' store_stream_notify_peers). Returns that count, or DB_SOFT_ERROR when the
 * connection broke. */
int store_stream_notifications(struct db_conn *c);

#endif

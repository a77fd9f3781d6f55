/* The store: every SQL statement of the server lives in a store_*.c file behind these functions.
 * Each returns a db_qs (db.h): negative on error, else a row count. JSON text results are
 * malloc'd and owned by the caller. */
#ifndef SRV_STORE_H
#define SRV_STORE_H

#include "db.h"
#include "http.h"

#include <jansson.h>
#include <stdint.h>

/* ---- tokens (store_tokens.c) ---- */
int store_token_lookup(struct db_conn *c, const char *hash, struct srv_identity *who);
/* Inserts a token; *json_out gets {"id","name","role","created_at"} text. */
int store_token_insert(struct db_conn *c, const char *name, const char *role, const char *hash,
                       char **json_out);
int store_token_list(struct db_conn *c, char **json_out);
int store_token_revoke(struct db_conn *c, int64_t id);
int store_token_count_admins(struct db_conn *c, int64_t *count);

/* ---- jobs (store_jobs.c) ---- */
/* Inserts a PENDING job and its first event in one statement; *json_out = the job object. */
int store_job_insert(struct db_conn *c, const char *owner, const json_t *spec, int64_t *id_out,
                     char **json_out);
int store_job_get(struct db_conn *c, int64_t id, char **json_out);
/* Lists jobs newest first. statuses: a PostgreSQL array literal ("{RUNNING,PENDING}") or NULL;
 * before_id: 0 or the cursor. *json_out = JSON array text; *min_id_out = smallest id listed. */
int store_job_list(struct db_conn *c, const char *statuses, int64_t before_id, int limit,
                   char **json_out, int64_t *min_id_out);

enum store_stop_outcome {
    STORE_STOP_NOT_FOUND,
    STORE_STOP_FORBIDDEN,
    STORE_STOP_ALREADY_FINISHED,
    STORE_STOP_STOPPED,  /* was PENDING: now STOPPED */
    STORE_STOP_STOPPING, /* workers are being stopped */
};
/* Requests a stop inside a transaction; `who` must own the job unless admin. */
int store_job_stop(struct db_conn *c, int64_t id, const struct srv_identity *who,
                   enum store_stop_outcome *outcome, char **json_out);

enum store_delete_outcome {
    STORE_DELETE_NOT_FOUND,
    STORE_DELETE_FORBIDDEN,
    STORE_DELETE_NOT_FINISHED,
    STORE_DELETE_DELETED,
};
int store_job_delete(struct db_conn *c, int64_t id, const struct srv_identity *who,
                     enum store_delete_outcome *outcome, char **status_out);

#endif

/* The store: every SQL statement of the server lives in a store_*.c file behind these functions.
 * Each returns a db_qs (db.h): negative on error, else a row count. JSON text results are
 * malloc'd and owned by the caller. */
#ifndef SRV_STORE_H
#define SRV_STORE_H

#include "agent_proto.h"
#include "db.h"
#include "identity.h"
#include "job_status.h"
#include "launch.h"

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* For the store_*.c files: formats an integer as a statement parameter into char buf[N]. */
#define STORE_NUM(buf, v) snprintf((buf), sizeof(buf), "%lld", (long long)(v))

/* ---- health (store_health.c) ---- */
/* A trivial query: 1 when the database answers, else an error. */
int store_ping(struct db_conn *c);

/* ---- cluster figures for GET /metrics (store_stats.c) ---- */
struct store_cluster_stats {
    int64_t jobs_by_status[JOB_STATUS_COUNT];
    int64_t queue_length;    /* PENDING jobs */
    double oldest_pending_s; /* age of the oldest PENDING job; 0 when none */
    int64_t nodes_alive, nodes_draining, nodes_lost; /* alive excludes draining */
    double cpus_total, cpus_allocated; /* of ALIVE nodes; held by PLACED or RUNNING workers */
    int64_t gpus_total, gpus_allocated;
};
/* Reads them in one statement. Returns 1 or an error. */
int store_cluster_stats(struct db_conn *c, struct store_cluster_stats *out);
/* The GPUs of alive nodes with their latest sample, as a JSON array (malloc'd in *json) of
 * nodes.gpus rows with "node" added (migrations/0027_node_gpus.sql). Returns 1 or an error. */
int store_node_gpus(struct db_conn *c, char **json);
/* The last usage sample of every RUNNING worker whose job `who` may see (worker_usage), as a JSON
 * array (malloc'd in *json) of [job, rank, node, cpu_usec, memory_bytes]. Returns 1 or an
 * error. */
int store_running_usage(struct db_conn *c, const struct srv_identity *who, char **json);
/* Goodput summed per owner (ty_job_goodput) over the placed jobs `who` may see that run or ended
 * in the last day, as a JSON array (malloc'd in *json) of [owner, useful_s, lost_s, wall_s].
 * Returns 1 or an error. */
int store_goodput_by_owner(struct db_conn *c, const struct srv_identity *who, char **json);

/* ---- tokens (store_tokens.c) ---- */
int store_token_lookup(struct db_conn *c, const char *hash, struct srv_identity *who);
/* Inserts a token; *json_out gets {"id","name","role","created_at"} text. */
/* Whether a live (not revoked) token already has `name`: 1, 0, or an error. */
int store_token_name_taken(struct db_conn *c, const char *name);
int store_token_insert(struct db_conn *c, const char *name, const char *role, const char *hash,
                       char **json_out);
int store_token_list(struct db_conn *c, char **json_out);
int store_token_revoke(struct db_conn *c, int64_t id);
int store_token_count_admins(struct db_conn *c, int64_t *count);
/* The first-start lock: serialises servers starting on one database while they check for an
 * admin token and issue the first one. A session-level advisory lock held by this connection
 * until store_bootstrap_unlock (or until it closes). Each returns a db_qs. */
int store_bootstrap_lock(struct db_conn *c);
int store_bootstrap_unlock(struct db_conn *c);

/* ---- jobs (store_jobs.c) ---- */
/* A job to submit (store_jobs_insert): in, owner and spec; out, id and json (the job object,
 * malloc'd). */
struct store_job_new {
    const char *owner;
    const json_t *spec;
    int64_t id;
    char *json;
};
/* Submits jobs[0..n) (ty_jobs_submit: each PENDING, with its first event) in one statement, so in
 * one transaction: all or none. Returns n, or an error (then no job was inserted and no id or json
 * set). */
int store_jobs_insert(struct db_conn *c, struct store_job_new *const *jobs, size_t n);
int store_job_get(struct db_conn *c, int64_t id, char **json_out);
/* Which jobs a list shows; NULL members match every job. */
struct store_job_filter {
    const char *statuses;           /* a PostgreSQL array literal ("{RUNNING,PENDING}") */
    const char *owner;              /* exactly this owner (token name) */
    const char *name;               /* names containing this text, case-insensitively */
    const char *project;            /* exactly this project */
    const struct srv_identity *who; /* only jobs it may see (ty_project_visible); required */
    const char *tag;                /* only jobs with this tag; NULL: any */
};
/* Lists jobs newest first, filtered by f. before_id: 0 or the cursor. *json_out = JSON array
 * text; *min_id_out = smallest id listed. */
int store_job_list(struct db_conn *c, const struct store_job_filter *f, int64_t before_id,
                   int limit, char **json_out, int64_t *min_id_out);
/* What store_job_insert_once did. */
enum store_once_outcome {
    STORE_ONCE_CREATED,  /* a new job */
    STORE_ONCE_REPLAYED, /* the owner's job with that key, submitted with the same spec */
    STORE_ONCE_CONFLICT, /* the owner's job with that key has another spec; nothing inserted */
};
/* A submission with an Idempotency-Key (ty_job_submit_once): the owner's job with `key` when
 * there is one, else a new job. *id_out and *json_out (malloc'd) are that job in every outcome.
 * Returns a db_qs. */
int store_job_insert_once(struct db_conn *c, const char *owner, const json_t *spec, const char *key,
                          int64_t *id_out, char **json_out, enum store_once_outcome *outcome);
/* *owner_out = the name that submitted job `id` (malloc'd). Returns 1, 0 when there is no such
 * job, or an error. Handlers decide with it whether the requester may change the job (auth.h);
 * the store functions below apply what they are asked to. */
int store_job_owner(struct db_conn *c, int64_t id, char **owner_out);
/* *project_out = job `id`'s project (malloc'd). Returns 1, 0 when there is no such job, or an
 * error. */
int store_job_project(struct db_conn *c, int64_t id, char **project_out);

enum store_stop_outcome {
    STORE_STOP_NOT_FOUND,
    STORE_STOP_ALREADY_FINISHED,
    STORE_STOP_STOPPED,  /* was PENDING: now STOPPED */
    STORE_STOP_STOPPING, /* workers are being stopped */
};
/* Sets job `id`'s tags (tags: a JSON array of valid tags, jobspec_tags_problem; NULL: kept) and
 * notes (NULL: kept). *json_out = the job afterwards (malloc'd). Returns a db_qs: 0 when there is
 * no such job. */
int store_job_set_labels(struct db_conn *c, int64_t id, const char *tags, const char *notes,
                         char **json_out);
/* Applies the event `stop` to job `id` when its status allows it (docs/lifecycle.md), recorded
 * as "stopped by <requested_by>". *json_out = the job afterwards (malloc'd), unless
 * STORE_STOP_NOT_FOUND. Returns a db_qs. */
int store_job_stop(struct db_conn *c, int64_t id, const char *requested_by,
                   enum store_stop_outcome *outcome, char **json_out);

enum store_delete_outcome {
    STORE_DELETE_NOT_FOUND,
    STORE_DELETE_NOT_FINISHED,
    STORE_DELETE_DELETED,
};
/* Deletes job `id` (event `delete`: finished jobs only) with its events, attempts, workers,
 * metrics and checkpoint records. *status_out (when non-NULL) = the job's status before ("" when
 * not found), malloc'd. Returns a db_qs. */
int store_job_delete(struct db_conn *c, int64_t id, enum store_delete_outcome *outcome,
                     char **status_out);

/* ---- projects: who sees which jobs (store_projects.c, issue 22) ---- */
/* Whether `who` may resume a job from checkpoint `ckpt` (ty_checkpoint_usable: an admin, the
 * owner of its job, a member of that job's project): 1 with *usable set; 0 when the checkpoint is
 * not COMMITTED or its job is not one `who` may see; or an error. */
int store_checkpoint_usable(struct db_conn *c, const struct srv_identity *who, int64_t ckpt,
                            bool *usable);
/* *usable = whether `who` may name stored code package `sha256` in a job spec
 * (ty_package_usable: an admin, one of its uploaders, a member of a project with a job that names
 * it). Returns 1 or an error. */
int store_code_usable(struct db_conn *c, const struct srv_identity *who, const char *sha256,
                      bool *usable);
/* Whether `who` may see job `job` (ty_project_visible on its project): 1 with *visible set, 0
 * when there is no such job, or an error. */
int store_job_visible(struct db_conn *c, const struct srv_identity *who, int64_t job,
                      bool *visible);
/* The same for the job of checkpoint `ckpt` (any status): 0 when there is no such checkpoint. */
int store_checkpoint_visible(struct db_conn *c, const struct srv_identity *who, int64_t ckpt,
                             bool *visible);
/* Creates project `name` (visibility "private" or "shared") with the members of members_json (a
 * JSON array of token names, the creator among them). Returns 1, 0 when the name is taken, or an
 * error. */
int store_project_create(struct db_conn *c, const char *name, const char *visibility,
                         const char *creator, const char *members_json);
/* *json_out = project `name` as JSON (ty_project_json) when `who` may see it. Returns 1, 0 when
 * there is none or `who` may not see it (the same answer: existence is not revealed), or an
 * error. */
int store_project_get(struct db_conn *c, const struct srv_identity *who, const char *name,
                      char **json_out);
/* *json_out = the JSON array of the projects `who` may see, by name. Returns 1 or an error. */
int store_project_list(struct db_conn *c, const struct srv_identity *who, char **json_out);
enum store_project_access {
    STORE_PROJECT_NOT_FOUND, /* none, or private and `who` is neither member nor admin */
    STORE_PROJECT_VISIBLE,   /* `who` sees it (shared) but is neither member nor admin */
    STORE_PROJECT_MEMBER,    /* `who` is a member or an admin */
};
/* What `who` may do with project `name`. Returns a db_qs; *access is always set. */
int store_project_access(struct db_conn *c, const struct srv_identity *who, const char *name,
                         enum store_project_access *access);
/* Adds `member` to project `name`. Returns 1 when added, 0 when already a member, or an error. */
int store_project_add_member(struct db_conn *c, const char *name, const char *member,
                             const char *added_by);
enum store_member_removal {
    STORE_MEMBER_REMOVED,
    STORE_MEMBER_NOT_A_MEMBER, /* `member` is not one */
    STORE_MEMBER_LAST,         /* the last member of a private project: kept */
};
/* Removes `member` from project `name` (which exists), unless it is the last member of a private
 * project (its jobs would be left to admins alone). Returns a db_qs; *out is set when it is 1. */
int store_project_remove_member(struct db_conn *c, const char *name, const char *member,
                                enum store_member_removal *out);
/* Deletes project `name` (which exists), its members and its quotas, when no job belongs to it;
 * *jobs = how many do (then nothing is deleted). Returns a db_qs. */
int store_project_delete(struct db_conn *c, const char *name, int64_t *jobs);

/* ---- nodes (store_nodes.c) ---- */
/* Ids of nodes whose status is ALIVE (arrays malloc'd; caller frees each id and the array). */
int store_nodes_alive(struct db_conn *c, char ***ids, size_t *n);
int store_node_register(struct db_conn *c, const char *id, const char *hostname,
                        const char *address, const char *resources_json, const char *gpu_type,
                        const char *labels_json, const char *version, int port_lo, int port_hi);
/* Marks the node LOST and fails the jobs that ran there. Returns the number of jobs hit. */
int store_node_lost(struct db_conn *c, const char *id);
/* Records that the node's agent's connection closed (nodes.disconnected_at; its registration
 * clears it): no new workers go there, and failing attempts count its workers as lost. */
int store_node_disconnected(struct db_conn *c, const char *id);
/* Stores the node's agent data directory space (nodes.disk, a JSON object). */
int store_node_disk(struct db_conn *c, const char *id, const char *disk_json);
int store_node_list(struct db_conn *c, char **json_out);
int store_node_get(struct db_conn *c, const char *id, char **json_out);
/* Sets the node's draining flag. Draining with `preempt` also preempts the jobs running there
 * (ty_node_drain: they checkpoint and restart elsewhere) and sets *preempted_out to a JSON array
 * of their ids (caller frees); without it they run on to their end there. *json_out: the node
 * (NULL when there is no such node). */
int store_node_set_draining(struct db_conn *c, const char *id, bool draining, bool preempt,
                            char **json_out, char **preempted_out);
/* A worker the database believes live (PLACED or RUNNING) on a node. */
struct store_live_worker {
    int64_t job;
    int attempt, rank;
    bool placed; /* PLACED: its launch is not confirmed yet; false: RUNNING */
};
/* Live workers on node `id`, ordered by job, attempt, rank: *out (malloc'd, free() it; NULL when
 * none) holds *n of them. Returns the row count or an error (then *out is NULL, *n 0). */
int store_node_live_workers(struct db_conn *c, const char *id, struct store_live_worker **out,
                            size_t *n);

/* ---- node credentials (store_node_auth.c) ---- */
/* *hash_out = the SHA-256 hex of node `id`'s credential
 * (malloc'd; NULL when none was minted), *alive = the node is ALIVE. Returns 1, 0 when there is
 * no such node, or an error. */
int store_node_auth(struct db_conn *c, const char *id, char **hash_out, bool *alive);
/* Takes the deleted jobs node `id` must still forget (migration 0020): *jobs (malloc'd, *n) and
 * the rows are gone. Returns a db_qs. */
int store_node_forgets_take(struct db_conn *c, const char *id, int64_t **jobs, size_t *n);
/* A checkpoint retention deleted whose staging copy a node may still hold (migration 0021). */
struct store_ckpt_delete {
    char *node_id;
    int64_t job, attempt, index;
};
/* Takes the checkpoint deletes of the nodes in node_ids (n_ids): *rows (malloc'd, *n; free with
 * store_ckpt_deletes_free) and the rows are gone. Returns a db_qs. */
int store_node_ckpt_deletes_take(struct db_conn *c, const char *const *node_ids, size_t n_ids,
                                 struct store_ckpt_delete **rows, size_t *n);
void store_ckpt_deletes_free(struct store_ckpt_delete *rows, size_t n);
/* Replaces node `id`'s credential hash (after store_node_register). Returns a db_qs. */
int store_node_set_credential(struct db_conn *c, const char *id, const char *hash);

/* ---- workers' events (store_worker_events.c) ---- */
/* One worker_started event, sent by `node` (borrowed; [A-Za-z0-9._-]), with its launch's step
 * times on the agent (seconds; < 0: not sent). */
struct store_worker_start {
    const char *node;
    int64_t job;
    int attempt, rank;
    int64_t pid;
    double code_fetch_s, checkpoint_fetch_s, process_start_s;
};
/* Records a worker start (ty_worker_started): applied only when the worker is placed on the
 * node that sent it (another node's event changes nothing). Returns a db_qs. */
int store_worker_started(struct db_conn *c, const struct store_worker_start *w);
/* Records n worker_started events in one statement, so one transaction and one commit: all of
 * them or none. Each is applied like store_worker_started, in order. Returns n (0 for n == 0) or
 * an error. */
int store_workers_started(struct db_conn *c, const struct store_worker_start *w, size_t n);
/* What a worker exit did to its job. */
enum store_exit_outcome {
    STORE_EXIT_IGNORED,     /* a duplicate (or unknown worker): nothing was recorded */
    STORE_EXIT_RECORDED,    /* recorded; the job goes on */
    STORE_EXIT_STOP_OTHERS, /* the job is STOPPING: its other workers must be stopped */
    STORE_EXIT_SETTLED,     /* that was its last worker: the job just finished */
};
/* Records a worker exit (ty_worker_exited: a failure fails the job, the last exit settles it)
 * sent by node `node`: applied only when the worker is placed on that node, else ignored.
 * exit_code, signal, error: NULL when absent. Returns a db_qs; *outcome is set on success. */
int store_worker_exited(struct db_conn *c, const char *node, int64_t job, int attempt, int rank,
                        const int64_t *exit_code, const int64_t *signal, const char *error,
                        enum store_exit_outcome *outcome);

/* ---- sweeps over running jobs (store_sweeps.c) ---- */
/* Fails (event timeout) the running jobs past their timeout_s. Returns how many, or an error. */
int store_jobs_timed_out(struct db_conn *c);
int store_jobs_stopping(struct db_conn *c, int64_t **ids, size_t *n);
/* Finishes STOPPING jobs with no live worker. Returns how many finished, or an error. */
int store_jobs_settle_stopping(struct db_conn *c);
/* Counts as lost the workers of failing attempts (RESTARTING, STOPPING) on nodes whose agent is
 * disconnected, and settles those jobs (ty_jobs_drop_disconnected). Returns how many (job, node)
 * pairs, or an error. */
int store_jobs_drop_disconnected(struct db_conn *c);

/* ---- the scheduler's snapshot (store_sched.c) ---- */
/* What a scheduling pass reads (store_sched_snapshot). Strings are owned by the enclosing
 * struct store_sched_rows and valid until store_sched_rows_free(). */
struct store_sched_node {
    const char *id;
    const char *address;
    bool alive;                 /* status ALIVE */
    bool draining;              /* drained by an operator */
    bool disk_pressure;         /* nodes.disk says its data directory is short of space */
    bool disconnected;          /* its agent's connection closed (nodes.disconnected_at) */
    const char *resources_json; /* JSON object {"CPU": n, "memory_mb": n, "GPU": [ids], ...} */
    const char *gpu_type;       /* NULL when the node has none */
};
/* One live (PLACED or RUNNING) worker. */
struct store_sched_worker {
    int64_t job;
    const char *node_id;
    const char *resources_json; /* its bundle, JSON object */
    const char *gpus_json;      /* JSON array of the node's GPU ids it holds */
    int64_t end_epoch;          /* its attempt's start + timeout_s (Unix seconds); -1: none */
    const char *owner;          /* its job's owner */
    const char *project;        /* its job's project */
};
/* A job to place (PENDING, or RESTARTING with its ended attempt gone), or a growth probe: a
 * RUNNING elastic job below its max, as id = -(job id), priority INT_MIN, grow_from = its
 * current world size, resize_interval_s = its scaling_config.elastic_resize_interval_s. A probe
 * is placed in the pass only to learn whether more of its workers fit; nothing is committed. */
struct store_sched_pending {
    int64_t id;
    int priority;
    int64_t created_epoch; /* Unix seconds */
    const char *owner;
    const char *project;
    int grow_from;         /* probes only; 0 otherwise */
    int resize_interval_s; /* probes only */
};
struct store_sched_rows {
    struct store_sched_node *nodes; /* by id */
    size_t nnodes;
    struct store_sched_worker *workers; /* by job, then node */
    size_t nworkers;
    struct store_sched_pending *pending; /* in queue order: priority desc, created, id */
    size_t npending;
    void *storage; /* private: what the strings point into */
};
/* Reads every node, every live worker and the queue of PENDING jobs into *out (free it with
 * store_sched_rows_free, also after a failure). Returns a db_qs (>= 0 on success). */
int store_sched_snapshot(struct db_conn *c, struct store_sched_rows *out);
void store_sched_rows_free(struct store_sched_rows *rows);

/* ---- placements (store_placement.c) ---- */
/* A job's spec, as submitted (JSON text, malloc'd). */
struct store_job_spec {
    int64_t id;
    char *spec_json;
};
/* Specs of the jobs ids[0..n) that exist: *out (free with store_job_specs_free) holds *nout of
 * them, in no particular order. Returns the row count or an error (then *out is NULL). */
int store_job_specs(struct db_conn *c, const int64_t *ids, size_t n, struct store_job_spec **out,
                    size_t *nout);
void store_job_specs_free(struct store_job_spec *specs, size_t n);
/* Commits a placement (ty_place). Returns 1 with *attempt set, 0 if it did not happen. With the
 * commit, notifies the other servers ("JOB ATTEMPT ORIGIN" on trainyard_launch, leader.h): they
 * send the launches to the agents connected to them. */
int store_place(struct db_conn *c, int64_t job, const char *workers_json, int nports, int *attempt,
                const char *origin);
/* Sets the status message of each pending (or restarting) job in `messages`, a JSON array of
 * [job id, message] pairs (a job named twice takes its last message), in one statement and one
 * commit: a scheduling pass writes its waiting messages together (ty_jobs_set_waiting). Returns 1
 * or an error. */
int store_jobs_set_waiting_messages(struct db_conn *c, const json_t *messages);
/* Restarts elastic job `job` to grow it (ty_job_resize; message: why). Returns rows or an error. */
int store_job_resize(struct db_conn *c, int64_t job, const char *message);

/* ---- launch and stop orders (store_launch.c) ---- */
/* Launch data of an attempt (launch.h): the job's spec, the attempt's rendezvous, the address
 * of every rank's node, and its PLACED workers on `node_id` or on all nodes (NULL), ordered by
 * node_rank then local_rank. Returns the number of workers (0: none PLACED, *out left empty) or
 * an error; free *out with srv_launch_rows_free. */
int store_launch_rows(struct db_conn *c, int64_t job, int attempt, const char *node_id,
                      struct srv_launch_rows *out);
/* A node with live workers of a job's current attempt. */
struct store_stop_target {
    char *node_id;
    int attempt;
    int notice_s; /* the preemption notice before SIGTERM (failure_config.preemption_grace_s for a
                   * user stop or a preemption; 0 after a failure) */
};
/* The nodes with live workers of the job's current attempt: *out (free with
 * store_stop_targets_free) holds *n of them. Returns the row count or an error (then *out is
 * NULL). */
int store_stop_targets(struct db_conn *c, int64_t job, struct store_stop_target **out, size_t *n);
void store_stop_targets_free(struct store_stop_target *targets, size_t n);

/* ---- a job's workers, events and attempts as JSON (store_job_children.c) ---- */
int store_job_workers(struct db_conn *c, int64_t job, char **json_out);
int store_job_events(struct db_conn *c, int64_t job, char **json_out);
int store_job_attempts(struct db_conn *c, int64_t job, char **json_out);

/* ---- workers' resource use over time as JSON arrays (store_usage.c); NULL: no such job/node ----
 */
/* attempt 0: every attempt; each (attempt, rank) series thinned to about max_points samples. */
int store_job_usage(struct db_conn *c, int64_t job, int attempt, int max_points, char **json_out);
/* The node's workers summed per bucket over the last `minutes`. */
int store_node_usage(struct db_conn *c, const char *node, int minutes, char **json_out);

/* ---- metrics: reports and series (store_metrics.c) ---- */
/* A validated report (agent message `report`); strings and metrics borrowed. step NULL when
 * absent; checkpoint_dir NULL when none; time RFC 3339. */
struct store_report {
    int64_t job, seq;
    int attempt, rank;
    const int64_t *step;
    const char *checkpoint_dir, *node_id, *time;
    const struct aproto_metric *metrics; /* its n_metrics values' names and numbers */
    size_t n_metrics;
    const char *values_text; /* the values as one JSON object's text, values_len bytes */
    size_t values_len;
    int64_t max_bytes; /* --max-report-bytes-per-job: past it the job's reports are refused */
};
struct store_report_outcome {
    bool known_worker;  /* false: no such worker on that node; nothing was stored */
    bool duplicate;     /* stored before (a resend, or earlier in the batch), or refused past
                         * the job's max_bytes (a job event says so): nothing changed */
    int metrics_stored; /* values stored (all of a fresh report's; 0 for the others) */
    bool round_ready;   /* stored now, and its round k is complete (every rank has reported k)
                         * with a checkpoint_dir among the round's reports */
};
/* Names (keys of reports' values) sent with a batch for report_names (migration 0043): name[k]
 * is a key of the batch's report at[k]. A batch sent with none (NULL) has the reports' trigger
 * find every report's names (server/store/sql/ty_reports_added.sql); with a list, the trigger
 * leaves them to the batch, which stores the listed names of the reports of known workers: the
 * caller lists every name it does not know stored (server/control/report_names.h). */
struct store_report_names {
    size_t n, cap;
    const char **name;
    size_t *at;
};
/* Blocks of report_blocks (migration 0046: per name, 16 consecutive reports of a series summed
 * up) that the caller summed up itself as it sent their reports (server/control/report_fold.h),
 * sent with a batch so that the leader's maintenance does not read every report again: block[k]
 * a block of a series and how many reports it summed up; row[j] one of its rows (row[j].at: its
 * block's k), one per name, every value a number; its name and times are NUL-terminated texts
 * at those offsets in `text`. The batch stores a block only when it is what the stored reports
 * hold (store/sql/ty_report_ingest_batch.sql). */
struct store_block {
    int64_t job, block;
    int attempt, rank, reports;
};
struct store_block_row {
    size_t at;
    size_t name, start_at, end_at; /* offsets in text */
    int64_t count, seq_first, seq_last;
    int64_t step_first, step_last; /* -1: none */
    double v_first, v_last, v_min, v_max;
};
struct store_report_blocks {
    size_t n, cap, nrows, rows_cap, len, text_cap;
    struct store_block *block;
    struct store_block_row *row;
    char *text;
};
/* Commits n reports in one transaction (store/sql/ty_report_ingest_batch.sql): each one's
 * report row holding its values, one `report` row in its job's stream, and (rank 0, newer) the
 * job's result; `names` and `blocks` (either may be NULL) as above. Resends are no-ops. Returns n,
 * or a db_qs error and then nothing is stored; on DB_HARD_ERROR sqlstate gets the SQLSTATE (class
 * 22 or 23: the data is refused, a retry of the same reports fails the same way). outcome[0..n) is
 * filled on success. */
int store_reports_insert(struct db_conn *c, const struct store_report *reports, size_t n,
                         const struct store_report_names *names,
                         const struct store_report_blocks *blocks,
                         struct store_report_outcome *outcome, char sqlstate[6]);
/* store_reports_insert in two halves, so that the caller works while PostgreSQL stores the
 * batch: store_reports_send sends it as one statement that commits on its own (0, or a db_qs
 * error and nothing was sent); store_reports_collect waits for it and fills outcome[0..n) as
 * store_reports_insert does (n, or a db_qs error with sqlstate: then nothing was stored).
 * Nothing else may run on `c` in between. */
int store_reports_send(struct db_conn *c, const struct store_report *reports, size_t n,
                       const struct store_report_names *names,
                       const struct store_report_blocks *blocks);
int store_reports_collect(struct db_conn *c, const struct store_report *reports, size_t n,
                          struct store_report_outcome *outcome, char sqlstate[6]);
/* True when store_reports_collect would not wait. */
bool store_reports_done(struct db_conn *c);
/* The socket to poll (readable) until store_reports_done, or -1. */
int store_reports_socket(struct db_conn *c);
/* The leader's maintenance of report_blocks (store/sql/ty_report_blocks_fill.sql): sums up, in one
 * transaction, the complete blocks of 16 reports (at most 16 per series) of up to max_series
 * series that any writer stored since, and sets *moved to how many series moved on (0: nothing
 * left to do). Idempotent and restartable. Returns 1, or a db_qs error. */
int store_report_blocks_fill(struct db_conn *c, int max_series, int *moved);
struct store_metrics_query {
    const char *names; /* comma separated, or NULL for every name */
    int64_t rank;      /* < 0: every rank */
    int64_t attempt;   /* 0: every attempt */
    size_t max_points; /* per (name, rank) series, >= 1: points, or buckets of a band */
    bool band;         /* min/max band buckets instead of LTTB points */
    int64_t max_rows;  /* rows read from the database at most (0: no bound) */
    bool *too_many;    /* out (when non-NULL): more than max_rows rows matched; nothing read */
    bool step_range;   /* only points whose step is in [step_min, step_max] (a chart's zoom) */
    int64_t step_min, step_max;
    bool time_range; /* only points reported in [time_min_us, time_max_us] (µs since the epoch) */
    int64_t time_min_us, time_max_us;
};
/* *json_out = JSON array of {name, rank, attempt, step, value, time}, ordered by name, rank,
 * time, each (name, rank) series downsampled by LTTB (downsample.h); with q->band, of buckets
 * {name, rank, attempt, count, start, end, step_first, step_last, first, last, min, max} instead.
 * Points (buckets: whose last point) of an attempt older than the job's current one carry
 * "superseded": true. Returns 0 when the job does not exist, 1 with the array, or an error. */
int store_metrics_series(struct db_conn *c, int64_t job, const struct store_metrics_query *q,
                         char **json_out);

/* ---- checkpoint parts in the artifact store (store_artifacts.c) ---- */
/* One node's part of checkpoint idx of an attempt; node borrowed ([A-Za-z0-9._-]). */
struct store_part_key {
    int64_t job;
    int attempt;
    int64_t idx;
    const char *node;
};
struct store_part {
    bool node_ran_attempt; /* the node ran workers of that attempt (may upload its part) */
    char state[16];        /* "" (no upload yet), "uploading", "complete", "deleted" */
    int64_t received;
    char sha256[65];    /* when complete */
    char location[256]; /* when complete: the artifact store's location */
};
/* Fills *out for part `k`. Returns 1 or an error. */
int store_part_get(struct db_conn *c, const struct store_part_key *k, struct store_part *out);
/* Records `received` bytes of part `k` (creating it as uploading); a complete or deleted part is
 * left alone (0 rows). Returns a db_qs. */
int store_part_progress(struct db_conn *c, const struct store_part_key *k, int64_t received);
/* Records a job event on part `k`'s upload: "checkpoint I (id N) of attempt A, part of node X
 * (rank R, ...): `reason`", once per distinct text. Returns a db_qs. */
int store_part_event(struct db_conn *c, const struct store_part_key *k, const char *reason);
/* Marks part `k` complete (size, file count, verified sha256, location); the migration's trigger
 * then marks its checkpoint complete when every node of its location has a complete part.
 * Returns 1, 0 when the part was already complete or deleted, or an error. */
int store_part_complete(struct db_conn *c, const struct store_part_key *k, int64_t size,
                        int64_t files, const char *sha256, const char *location);
/* *out = job `job`'s run_config.storage_path (malloc'd), or NULL when it has none (store_shared.c).
 * Returns 1, 0 when the job does not exist, or an error. */
int store_job_storage_path(struct db_conn *c, int64_t job, char **out);
/* ---- checkpoint retention, num_to_keep (store_retention.c, migration 0019) ---- */
/* One stored checkpoint of a job, as retention weighs it. */
struct store_retention_ckpt {
    int64_t id;
    bool has_score; /* rank 0's metrics hold checkpoint_score_attribute as a number */
    double score;
};
/* A job's retention settings and its checkpoints whose artifact is complete, oldest first. */
struct store_retention {
    int64_t num_to_keep; /* 0: keep all */
    bool use_score;      /* checkpoint_score_attribute is set */
    bool minimize;       /* checkpoint_score_order is "min" */
    struct store_retention_ckpt *ckpts;
    size_t n;
};
/* Loads job's retention settings and stored checkpoints into *out (free with
 * store_retention_free). Returns 1, 0 when there is no such job, or an error. */
int store_retention_load(struct db_conn *c, int64_t job, struct store_retention *out);
void store_retention_free(struct store_retention *r);
/* A content address a retired checkpoint used. */
struct store_artifact_ref {
    char sha256[65];
    char location[256];
};
/* In one transaction: marks job's listed checkpoints (those still complete) and their parts
 * deleted; *refs (malloc'd, *n) = the content addresses they used. Returns a db_qs. */
int store_checkpoints_retire(struct db_conn *c, int64_t job, const int64_t *ids, size_t nids,
                             struct store_artifact_ref **refs, size_t *n);
/* Takes (lock) or releases the advisory lock of content address sha256 on this connection.
 * Held around storing an object and marking its part complete, and around checking that no
 * complete part uses an object and removing it. Returns a db_qs. */
int store_artifact_lock(struct db_conn *c, const char *sha256, bool lock);
/* *in_use = whether a complete part is stored under sha256. Returns 1 or an error. */
int store_artifact_in_use(struct db_conn *c, const char *sha256, bool *in_use);

/* *json_out (malloc'd) = checkpoint `id` as GET /api/v1/checkpoints/{id} shows it, plus
 * "_locations": the artifact locations of its parts in node order when its artifact is complete
 * ([] otherwise), for the archive. Returns 1, 0 (no such registered checkpoint), or an error. */
int store_checkpoint_get(struct db_conn *c, int64_t id, char **json_out);

/* ---- code packages (store_code.c) ---- */
struct store_code {
    int64_t size;
    char location[256]; /* the artifact store's location */
};
/* Fills *out for the stored code package `sha256`. Returns 1, 0 (not stored) or an error. */
int store_code_get(struct db_conn *c, const char *sha256, struct store_code *out);
/* Records a verified package (a repeat is a no-op) and `who` as one of its owners (the users who
 * uploaded its bytes). Returns a db_qs. */
int store_code_insert(struct db_conn *c, const char *sha256, int64_t size, const char *location,
                      const char *who);
/* *owned = whether `who` uploaded package `sha256`. Returns 1 or an error. */
int store_code_owned(struct db_conn *c, const char *sha256, const char *who, bool *owned);
/* *may = whether `node` runs or ran a worker of a job whose spec names package `sha256` (as its
 * code_package or resume_from_package). Returns 1 or an error. */
int store_code_node_may_fetch(struct db_conn *c, const char *sha256, const char *node, bool *may);

/* ---- quotas (store_quotas.c) ---- */
/* Whom a row of `quotas` limits: a user (token name, the owner of jobs and code packages) or a
 * project (jobs.project). */
enum store_quota_kind { STORE_QUOTA_USER, STORE_QUOTA_PROJECT };
/* *used = the bytes `subject` keeps in the artifact store (ty_artifact_bytes_used for a user,
 * ty_project_artifact_bytes_used for a project), *limit = its artifact_bytes quota (the quotas
 * row, else `dflt`; 0: unlimited), *own (optional) = whether a row of its own sets it. Returns 1
 * or an error. */
int store_artifact_quota(struct db_conn *c, enum store_quota_kind kind, const char *subject,
                         int64_t dflt, int64_t *used, int64_t *limit, bool *own);
/* A subject's own running CPU and GPU limits (a quotas row); -1: the server's default. */
struct store_quota_row {
    char *subject;
    int64_t cpus, gpus;
};
/* Every row of `quotas` of that kind that sets cpus or gpus, into *out (n entries; free with
 * store_quota_rows_free, also after a failure). Returns a db_qs. */
int store_quota_rows(struct db_conn *c, enum store_quota_kind kind, struct store_quota_row **out,
                     size_t *n);
void store_quota_rows_free(struct store_quota_row *q, size_t n);
/* Changes `subject`'s row of the quotas table: each field marked set takes its value (< 0: NULL,
 * the server's default); the others keep theirs. A db_qs. */
struct store_quota_change {
    bool set_artifact_bytes, set_cpus, set_gpus;
    int64_t artifact_bytes, cpus, gpus;
};
int store_quota_set(struct db_conn *c, enum store_quota_kind kind, const char *subject,
                    const struct store_quota_change *q);
/* What the live workers of `subject`'s jobs hold (*cpu_milli, *gpus) and its own cpus and gpus
 * limits (-1: the server's default). Returns 1 or an error. */
int store_quota_running(struct db_conn *c, enum store_quota_kind kind, const char *subject,
                        int64_t *cpu_milli, int64_t *gpus, int64_t *own_cpus, int64_t *own_gpus);

/* ---- checkpoints (store_checkpoints.c) ---- */
/* What one committed report brings to checkpoint registration (DESIGN.md section 4). */
struct store_checkpoint_round {
    int64_t job, k; /* k: the report's report_seq (round k) */
    int attempt, rank;
    const int64_t *bytes; /* the agent's checkpoint_bytes for this report, or NULL */
    bool try_register;    /* register checkpoint k if round k is complete and has a directory */
};
/* In one transaction: records this report's checkpoint_bytes (when given), then (when
 * try_register) inserts checkpoint k of the attempt as COMMITTED, once every rank has its k-th
 * report and at least one of them a checkpoint_dir: step and metrics of rank 0's report k,
 * location = JSON text [{"node_id","path"}...], size_bytes = summed checkpoint_bytes (NULL when
 * none known). Idempotent: a second call inserts nothing (it refreshes size and location of a
 * COMMITTED row). *registered: the row was inserted now (once per checkpoint); *refreshed: an
 * existing row's size or location changed. On DB_HARD_ERROR, sqlstate gets its SQLSTATE (class
 * 22/23: the data is refused, a retry fails the same way). */
int store_checkpoint_round(struct db_conn *c, const struct store_checkpoint_round *in,
                           bool *registered, bool *refreshed, char sqlstate[6]);
/* *json_out = JSON array of the job's COMMITTED checkpoints {id, attempt, index, step, metrics,
 * size_bytes, location, created_at}, by attempt then index. Returns 0 when the job does not
 * exist, 1 with the array, or an error. */
int store_checkpoint_list(struct db_conn *c, int64_t job, char **json_out);
/* The directories to resume attempt `attempt` of `job` from checkpoint `ckpt` (its
 * resume_from_checkpoint), for the n_nodes nodes `node_ids`: *out gets one entry per node, in
 * that order (srv_resume_dirs_free). path: the checkpoint's location entry on that node, or NULL
 * when the node holds no copy. Then, when the artifact store holds the checkpoint complete,
 * fetch_id/fetch_sha256 tell the node to fetch it (no message); otherwise (or when the checkpoint
 * no longer exists) message says so and is also recorded as a job event of the attempt (once,
 * however often the launch is resent). Returns the entry count or an error (*out NULL). */
int store_checkpoint_launch_dirs(struct db_conn *c, int64_t ckpt, int64_t job, int attempt,
                                 const char *const *node_ids, size_t n_nodes,
                                 struct srv_resume_dir **out, size_t *n);

/* ---- logs (store_logs.c) ---- */
struct store_log_outcome {
    int64_t lines, bytes; /* appended (resent chunks not counted) */
    int64_t dropped;      /* bytes removed by the log cap */
};
/* Appends a batch of log chunks in one transaction (ty_log_append_batch): rows_json is a JSON
 * array of {job_id, node_id, attempt, rank, log_offset, log_bytes, dropped, body}; chunks already
 * stored, and chunks of a worker node_id does not run, are skipped; cap > 0 keeps each job's log
 * under cap bytes (oldest chunks removed first). */
int store_logs_append(struct db_conn *c, const char *rows_json, int64_t cap,
                      struct store_log_outcome *out);

struct store_logs_query {
    int64_t attempt;    /* 0: the job's current attempt */
    const char *ranks;  /* "{0,2}" (a PostgreSQL int array) or NULL: every rank */
    int64_t offset;     /* chunks at or after this byte offset */
    int64_t tail;       /* > 0: only the last `tail` lines */
    const char *grep;   /* regular expression (PostgreSQL ~) or NULL */
    const char *stream; /* "stdout" or "stderr": only that output stream; NULL: both */
};
struct store_log_line {
    int64_t rank, attempt, offset; /* offset: the byte offset of the chunk holding the line */
    char stream[8];                /* the output stream: "stdout" or "stderr" */
    char *line;
    char *at; /* when the chunk holding the line was stored (RFC 3339, UTC) */
};
/* A job's log lines in order. Returns 0 when the job does not exist, 1 with *lines (n entries,
 * free with store_log_lines_free), or an error; sqlstate (6 bytes) then holds the SQLSTATE
 * (2201B: the grep expression is invalid). */
int store_logs_read(struct db_conn *c, int64_t job, const struct store_logs_query *q,
                    struct store_log_line **lines, size_t *n, char *sqlstate);
void store_log_lines_free(struct store_log_line *lines, size_t n);

/* Agents' periodic messages, typed (store_ingest.c): the rows as the agent protocol parsed them
 * (common/agent_proto.h). */
struct aproto_progress;
/* Node conditions (migration 0033, store_nodes.c): sets condition `type` of node id with
 * `message` (its "since" kept while it stays), or clears it when message is NULL. Rows changed,
 * or an error. */
int store_node_condition_set(struct db_conn *c, const char *id, const char *type,
                             const char *message);
/* An event of job `job` (attempt) from node node_id: stored when a worker of the job was placed
 * on that node and the job has no event with that message yet. Rows, or an error. */
int store_node_job_event(struct db_conn *c, const char *node_id, int64_t job, int64_t attempt,
                         const char *message);

/* Servers of one database (migration 0033): this server's --public-url heard now, leading or
 * not; and the URLs heard within 15 s, the leader's first (at most 15; *urls malloc'd, free
 * each). Rows, or an error. */
int store_server_heard(struct db_conn *c, const char *url, bool leader);
int store_server_urls(struct db_conn *c, char ***urls, size_t *n);

struct aproto_gpu_row;
struct aproto_usage;
/* Stores the n rows of one `progress` message of node_id (store/sql/ty_progress_ingest.sql). Rows
 * whose job_id is not a job id of this server, and rows of workers not placed on that node, are
 * ignored. Returns the rows stored, or an error. */
int store_progress_ingest(struct db_conn *c, const char *node_id,
                          const struct aproto_progress *rows, size_t n);
/* Stores the n rows of one `usage` message of node_id in worker_usage
 * (store/sql/ty_usage_ingest.sql). Rows whose job_id is not a job id of this server, and rows of
 * workers not placed on that node, are ignored. Returns the rows stored, or an error. */
int store_usage_ingest(struct db_conn *c, const char *node_id, const struct aproto_usage *rows,
                       size_t n);
/* Stores the n rows of one `gpus` message of node_id in nodes.gpus (store/sql/ty_gpus_ingest.sql).
 * Returns how many GPUs were newly lost, or an error (< 0). */
int store_gpus_ingest(struct db_conn *c, const char *node_id, const struct aproto_gpu_row *rows,
                      size_t n);

/* Workers' hangs (store_progress.c; store/sql/ty_hang_warn.sql, ty_hang_fail.sql). */
/* A running attempt whose ranks all have a fresh heartbeat and none progressed for its
 * hang_warn_s. */
struct store_hang_suspect {
    int64_t job;
    int attempt;
    double warn_s, timeout_s; /* timeout_s 0: never fails */
    bool warned;              /* this hang is already named in the job's events */
    char *ranks_json;         /* [[rank, op|null, coll_seq, in_collective, report_seq,
                               *   progress_age_s, heartbeat_age_s], ...] */
};
/* The suspects: *n entries in *out (free with store_hang_suspects_free). Returns n or an error. */
int store_hang_suspects(struct db_conn *c, struct store_hang_suspect **out, size_t *n);
void store_hang_suspects_free(struct store_hang_suspect *s, size_t n);
/* ty_hang_warn / ty_hang_fail: 1 when the event was recorded / the job failed, 0 when not, or an
 * error. */
int store_hang_warn(struct db_conn *c, int64_t job, int attempt, const char *message);
int store_hang_fail(struct db_conn *c, int64_t job, int attempt, const char *message);

/* ---- jobs placed through Slurm (store_slurm.c, migration 0039) ---- */
struct store_slurm_job {
    int64_t job;
    char status[16];
    int attempt;
    int64_t slurm_job_id; /* jobs.slurm_job_id, -1 when NULL */
    bool used;            /* an attempt already ran in that allocation */
    double ended_s;       /* seconds since that attempt finished; -1: it has not yet */
    double over_s;        /* seconds since the job left that attempt (restarting, stopping,
                           * finished); -1: it has not */
    int agents;           /* that allocation's agents still connected */
    char *spec_json;
};
/* Live jobs and finished ones still holding an allocation, by id (free with
 * store_slurm_jobs_free). Rows, or an error. */
int store_slurm_jobs(struct db_conn *c, struct store_slurm_job **out, size_t *n);
void store_slurm_jobs_free(struct store_slurm_job *r, size_t n);
/* jobs.slurm_job_id = slurm_job_id (<= 0: NULL). Rows, or an error. */
int store_slurm_set(struct db_conn *c, int64_t job, int64_t slurm_job_id);
/* The attempt records the job's allocation (attempts.slurm_job_id). Rows, or an error. */
int store_slurm_attempt(struct db_conn *c, int64_t job, int attempt);
/* ty_slurm_event: 1 recorded, 0 not (repeat, or the job is not waiting), or an error. */
int store_slurm_event(struct db_conn *c, int64_t job, const char *message);
/* ty_slurm_fail: rows, or an error. */
int store_slurm_fail(struct db_conn *c, int64_t job, const char *message);

/* ---- several servers on one database (store_ha.c) ---- */
/* Records when nodes were last heard from: heard_json is [{"id": ID, "age": SECONDS}, ...], age
 * the seconds since the node's last message; a later time already recorded is kept. *alive (n
 * ids, caller frees each and the array) gets those of them still ALIVE: the others were marked
 * LOST meanwhile, by the leader. Returns a db_qs. */
int store_nodes_heard(struct db_conn *c, const char *heard_json, char ***alive, size_t *n);
/* ALIVE nodes not heard from for more than timeout_s seconds (same ownership). */
int store_nodes_silent(struct db_conn *c, int64_t timeout_s, char ***ids, size_t *n);
/* store_node_lost, unless the node was heard from (or registered) since store_nodes_silent
 * listed it: by another server, meanwhile. Returns a db_qs. */
int store_node_lost_if_silent(struct db_conn *c, const char *id, int64_t timeout_s);
/* NOTIFY channel, payload (delivered when the statement commits). Returns a db_qs. */
int store_notify(struct db_conn *c, const char *channel, const char *payload);
#endif

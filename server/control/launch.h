/* Launch orders from the job's parsed spec (struct jobspec) and typed store rows: a pure module
 * (no I/O, no globals), so that tests/unit/test_agent_launch.c can check the `launch` messages the
 * server sends for an attempt without a database or an agent. control_launch.c fetches the rows
 * (store_launch_rows, store_checkpoint_launch_dirs) and the spec (the scheduling pass's, or parsed
 * from the rows), builds the messages here, and sends them. */
#ifndef SRV_LAUNCH_H
#define SRV_LAUNCH_H

#include "jobspec.h"

#include <stddef.h>
#include <stdint.h>

/* One PLACED worker of an attempt. */
struct srv_launch_worker {
    char *node_id;
    int64_t node_rank, rank, local_rank;
    int64_t local_world_size; /* workers of the attempt on this node */
    int *gpus;                /* n_gpus GPU indices, or NULL */
    size_t n_gpus;
};

/* What store_launch_rows reads of an attempt: the job's spec, the attempt's rendezvous and its
 * PLACED workers ordered by node_rank then local_rank (all malloc'd; srv_launch_rows_free). */
struct srv_launch_rows {
    char *spec_json; /* the job's spec (JSON text), for jobspec_from_json */
    char *master_addr;
    int64_t master_port, world_size, num_nodes;
    char **rank_addresses;   /* world_size entries: the address of each rank's node */
    char *rendezvous_secret; /* the attempt's (attempts.rendezvous_secret); NULL: none */
    int64_t resume_from;     /* the checkpoint it starts from (attempts.resumed_from); 0: none */
    struct srv_launch_worker *workers;
    size_t n_workers;
};
void srv_launch_rows_free(struct srv_launch_rows *r);

/* Where one node of a launch resumes from (store_checkpoint_launch_dirs); all malloc'd. */
struct srv_resume_dir {
    char *node_id;
    char *path;         /* NULL: the node holds no copy (it fetches one, or starts without) */
    char *message;      /* NULL, or why path is NULL */
    int64_t fetch_id;   /* > 0 when path is NULL but the artifact store has it complete */
    char *fetch_sha256; /* its artifact sha256, with fetch_id */
    char *fetch_shared; /* with fetch_id, NULL or the checkpoint's directory on shared storage */
};
void srv_resume_dirs_free(struct srv_resume_dir *dirs, size_t n);

/* The distinct nodes of the rows, in row order: a malloc'd array of *n ids borrowed from rows
 * (NULL when there are none or out of memory: *n is then 0). */
const char **srv_launch_nodes(const struct srv_launch_rows *rows, size_t *n);

/* One `launch` message for one node. */
struct srv_launch_msg {
    const char *node_id; /* borrowed from the rows */
    char *text;          /* malloc'd JSON text (docs/agent-protocol.md) */
};

/* Builds the `launch` of each node of the rows (srv_launch_nodes order) for attempt `attempt` of
 * `job`: the spec's backend, entrypoint, working_dir, env and secret_env, train_loop_config and
 * packages, the attempt's rendezvous, rank_addresses, and that node's workers. dirs: the n_dirs
 * resume directories in node order (the k-th node gets dirs[k].path when dirs[k] names it), or
 * NULL. Returns 0 with *out (*n entries; srv_launch_msgs_free), or -1 with the reason in err (out
 * of memory). */
int srv_launch_build(int64_t job, int attempt, const struct jobspec *spec,
                     const struct srv_launch_rows *rows, const struct srv_resume_dir *dirs,
                     size_t n_dirs, struct srv_launch_msg **out, size_t *n, char *err,
                     size_t errlen);
void srv_launch_msgs_free(struct srv_launch_msg *msgs, size_t n);

#endif

/* A slurmrestd client (prefix slurm_): submit an allocation, read its state and pending reason,
 * cancel it. slurm_req.c builds request bodies and parses answers (pure, unit-tested without
 * Slurm: tests/unit/test_slurm_req.c); slurm_client.c talks HTTP through libcurl, over a unix
 * socket ("unix:/path", slurmrestd's local auth: the caller's uid) or TCP ("http://host:port",
 * with a JWT read from a token file and re-read whenever the file changes).
 *
 * API versions: the newest of v0.0.38, v0.0.37, v0.0.36 that slurmrestd answers (Slurm 22.05
 * answers all three; their submit and job bodies are the same for what is used here). */
#ifndef SRV_SLURM_REST_H
#define SRV_SLURM_REST_H

#include <stddef.h>
#include <stdint.h>

#define SLURM_API_VERSIONS "v0.0.38, v0.0.37, v0.0.36"

/* The outcome of a call: done, Slurm said no (the request is at fault: an unknown partition, too
 * many nodes), or Slurm could not be asked (slurmrestd down, refusing the token, an answer that
 * does not parse): the cluster's fault, worth retrying. */
enum slurm_rc { SLURM_OK = 0, SLURM_REJECTED = -1, SLURM_UNAVAILABLE = -2 };

/* One allocation: `nodes` nodes, `tasks_per_node` tasks on each (one agent per node is started
 * by the script with srun), `cpus_per_task` CPUs and `mem_per_node_mb` (0: Slurm's default) and
 * `gpus_per_node` GPUs (--gres=gpu:N) on each. time_limit_min 0: the partition's; signal_s > 0:
 * SIGUSR1 to the steps that many seconds before the time limit (--signal=USR1@N). env:
 * NAME=VALUE strings, the whole environment of the script. All strings are borrowed. */
struct slurm_alloc {
    const char *name;
    int nodes, tasks_per_node, cpus_per_task, gpus_per_node;
    int64_t mem_per_node_mb;
    int time_limit_min, signal_s;
    const char *partition, *account; /* NULL: the cluster's default */
    const char *cwd;
    const char *script;
    const char *const *env;
    size_t nenv;
};

/* What slurmrestd says of a job. state: PENDING, RUNNING, COMPLETED, CANCELLED, FAILED,
 * NODE_FAIL, PREEMPTED, TIMEOUT, ...; reason: the pending reason ("Resources", "Priority",
 * "None"); name: the job's name (--job-name), which tells an allocation of ours from a job that
 * got its id again (slurmctld restarted without its state). */
struct slurm_job_info {
    char state[32];
    char name[128];
    char reason[160];
    char nodes[256];
};

/* slurm_req.c */
/* The JSON body of POST /slurm/<version>/job/submit, malloc'd, or NULL (out of memory). */
char *slurm_submit_body(const struct slurm_alloc *a);
/* Parses a submit answer (HTTP status http). Returns SLURM_OK with *job_id; SLURM_REJECTED with
 * Slurm's message in err (Slurm may have created a job even so: *job_id is then set, else -1,
 * and the caller cancels it); SLURM_UNAVAILABLE when the answer is not slurmrestd's, or Slurm's
 * error is the cluster's passing state (slurmctld unreachable, the nodes not available yet). */
int slurm_parse_submit(long http, const char *body, int64_t *job_id, char *err, size_t errlen);
/* Parses the answer of GET /slurm/<version>/job/<id>. SLURM_OK with *info; SLURM_REJECTED when
 * Slurm no longer knows the job (it ended more than MinJobAge ago); SLURM_UNAVAILABLE with err. */
int slurm_parse_job(long http, const char *body, int64_t job_id, struct slurm_job_info *info,
                    char *err, size_t errlen);
/* The first error message of a slurmrestd answer, or a description of the HTTP status when it
 * has none, into err. */
void slurm_answer_error(long http, const char *body, char *err, size_t errlen);
/* The user name ("sun" claim) of a Slurm JWT into out and its expiry ("exp", seconds since the
 * epoch; 0 when it has none) into *exp; 0, or -1 when it has no user name. */
int slurm_jwt_claims(const char *token, char *out, size_t n, int64_t *exp);
/* True when a finished job's state means its nodes or Slurm ended it (not its own exit):
 * NODE_FAIL, PREEMPTED, TIMEOUT, BOOT_FAIL, DEADLINE. */
int slurm_state_is_lost(const char *state);
/* True when the state is a final one (anything but PENDING, RUNNING, CONFIGURING, COMPLETING,
 * REQUEUED, RESIZING, SUSPENDED). */
int slurm_state_is_final(const char *state);

/* slurm_client.c */
struct slurm_client;
/* url: "unix:/path/to/slurmrestd.sock" or "http(s)://host:port"; token_file: NULL, or a file
 * holding the JWT ("TOKEN" or "SLURM_JWT=TOKEN"), for http. NULL with err on a bad url. */
struct slurm_client *slurm_client_new(const char *url, const char *token_file, char *err,
                                      size_t errlen);
void slurm_client_free(struct slurm_client *c);
/* Each returns an enum slurm_rc; err says why when not SLURM_OK. Blocking, at most `timeout_ms`
 * set at creation (2 s). The first call finds the API version. */
int slurm_client_submit(struct slurm_client *c, const struct slurm_alloc *a, int64_t *job_id,
                        char *err, size_t errlen);
int slurm_client_job(struct slurm_client *c, int64_t job_id, struct slurm_job_info *info, char *err,
                     size_t errlen);
/* Cancels a job (scancel); a job Slurm no longer knows counts as cancelled. */
int slurm_client_cancel(struct slurm_client *c, int64_t job_id, char *err, size_t errlen);
/* The API version in use ("v0.0.38"), or "" before the first successful call. */
const char *slurm_client_version(const struct slurm_client *c);

#endif

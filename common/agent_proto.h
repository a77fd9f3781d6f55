/*
 * agent_proto.h — the agent protocol (docs/agent-protocol.md): every message trainyard-agent and
 * trainyard-server exchange over the agent websocket, as C structs with one builder and one
 * validating parser per direction, plus the protocol's names and limits. Shared by both ends
 * (worker/agent and server/control/control_agent.c, server/control/launch.c), so they cannot drift
 * apart.
 *
 * Pure: no I/O, no globals. Builders return a malloc'd compact JSON text (caller frees) or NULL
 * when out of memory. Parsers return 0 with the struct filled, or -1 with a reason naming the
 * field at fault in `err`; a parsed struct borrows its strings from `root`, which it holds a
 * reference to, and is freed with its _free function.
 *
 * Prefix aproto_ (the agent protocol: agent_ and agent__ belong to trainyard-agent itself);
 * APROTO_ for its constants, APROTO_MSG_ for its message types.
 */
#ifndef TY_AGENT_PROTO_H
#define TY_AGENT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "vocab.h"

/* The websocket subprotocol of the agent endpoint: the only place the name is written. */
#define APROTO_SUBPROTOCOL "trainyard-agent.v1"
/* Largest message either end accepts (a launch of a big job is the largest). */
#define APROTO_MAX_MESSAGE (16u * 1024u * 1024u)
/* GPU indices are below this; a node has at most this many GPUs. */
#define APROTO_MAX_GPUS 1024
/* A node's other resources (CPU, memory_mb, custom) are numbers in [0, this]: far above any real
 * machine, and small enough that CPU and memory_mb convert to int64 exactly. */
#define APROTO_MAX_RESOURCE 1e15
/* node.id in register: 1 to this many bytes. */
#define APROTO_MAX_NODE_ID 128
/* job_id: 1 to this many bytes of [A-Za-z0-9._-] (it becomes a directory name). */
#define APROTO_MAX_JOB_ID 200
/* Secrets (rendezvous_secret in launch, the node credential): at most this many bytes. */
#define APROTO_MAX_SECRET 128
/* registered.api_urls: at most this many URLs of at most APROTO_MAX_URL bytes each. */
#define APROTO_MAX_API_URLS 16
#define APROTO_MAX_URL 2048
/* artifact_store.message: at most this many bytes. */
#define APROTO_MAX_STORE_MESSAGE 2048
/* node.address in register: at most this many bytes (a host name or an IP address). */
#define APROTO_MAX_ADDRESS 255
/* node.port_range when register leaves it out. */
#define APROTO_DEFAULT_PORT_LO 29500
#define APROTO_DEFAULT_PORT_HI 29999

enum aproto_msg_type {
    APROTO_MSG_UNKNOWN = 0,
    /* server -> agent */
    APROTO_MSG_REGISTERED,
    APROTO_MSG_ERROR,
    APROTO_MSG_ACK,
    APROTO_MSG_LAUNCH,
    APROTO_MSG_STOP,
    APROTO_MSG_FORGET,
    APROTO_MSG_CHECKPOINT_DELETE,
    /* agent -> server */
    APROTO_MSG_REGISTER,
    APROTO_MSG_HEARTBEAT,
    APROTO_MSG_WORKER_STARTED,
    APROTO_MSG_WORKER_EXITED,
    APROTO_MSG_REPORT,
    APROTO_MSG_LOG,
    APROTO_MSG_PROGRESS,
    APROTO_MSG_GPUS,
    APROTO_MSG_USAGE,

    APROTO_MSG_ARTIFACT_STORE,
    APROTO_MSG_DISK_FULL,
    APROTO_MSG_PREEMPT_NOTICE,
};

/* Checks a job id that will become a path component. 0 or -1. */
int aproto_job_id_valid(const char *job_id);

/* ------------------------------------------------------------------------------------------ */
/* launch (server -> agent)                                                                    */
/* ------------------------------------------------------------------------------------------ */

struct aproto_launch_worker {
    int64_t rank;
    int64_t local_rank;
    int *gpus; /* n_gpus entries; parsed: malloc'd, built: borrowed */
    size_t n_gpus;
};

/* A `launch`: start these workers of this attempt on this node. Parsed: strings borrowed from
 * `root`. To build one, fill the wire fields (entrypoint, env, config, scalars, workers) and
 * leave root, argv and config_json NULL. */
struct aproto_launch {
    json_t *root;
    const char *job_id;
    int64_t attempt;
    const char *backend;      /* NULL when building: left out (the agent then uses torch) */
    const json_t *entrypoint; /* array of strings, or a string run with /bin/sh -c */
    const char **argv;        /* parsed: NULL-terminated; a string entrypoint: /bin/sh -c STRING */
    const char *working_dir;  /* NULL: the agent's working directory */
    const json_t *env;        /* object of strings; parsed: never NULL */
    const json_t *config;     /* train_loop_config, any JSON; NULL: absent */
    char *config_json;        /* parsed: compact JSON of `config` ("null" when absent) */
    int64_t world_size, num_nodes, node_rank, local_world_size;
    const char *master_addr;
    int64_t master_port;
    const char *checkpoint_dir;  /* NULL: none */
    int64_t checkpoint_fetch_id; /* > 0 (checkpoint_dir NULL): fetch this checkpoint from the
                                  * server's artifact store and resume from it (issue 11) */
    const char *checkpoint_fetch_sha256; /* its artifact sha256 (the cache key); with the id */
    const char *checkpoint_fetch_shared; /* NULL, or the checkpoint's directory on shared storage
                                          * (its node-* parts): copied from there, not fetched */
    const char *storage_path;            /* run_config.storage_path: checkpoints are copied there
                                          * rather than uploaded; NULL: uploaded */
    const char *code_sha256;        /* the job's code package (issue 15): fetched once per node, the
                                     * workers run in a private copy of it; NULL: none */
    const char *checkpoint_package; /* a checkpoint directory uploaded as a package (the spec's
                                     * resume_from_package), fetched like code_sha256; each
                                     * attempt's workers resume from a private copy of it when
                                     * checkpoint_dir and checkpoint_fetch are absent; NULL: none */
    const char **rank_addresses;    /* world_size entries (the node address of each rank), or NULL:
                                     * all on master_addr */
    const char *rendezvous_secret;  /* the attempt's collective rendezvous secret; NULL: none */
    int64_t cpu_milli, memory_mb;   /* each worker's limits (resources_per_worker: CPU in
                                     * thousandths, memory_mb); wire "limits", 0 or absent: none */
    struct aproto_launch_worker *workers;
    size_t n_workers;
};
void aproto_launch_free(struct aproto_launch *l);
char *aproto_msg_launch(const struct aproto_launch *l);

/* ------------------------------------------------------------------------------------------ */
/* Server -> agent                                                                             */
/* ------------------------------------------------------------------------------------------ */

struct aproto_server_msg {
    enum aproto_msg_type type;
    const char *type_name; /* borrowed from root */
    json_t *root;
    /* registered */
    const char *node_id;
    int64_t heartbeat_interval_s; /* 0 when absent */
    const char *credential;       /* a node credential minted at this join; NULL: keep yours */
    const char **api_urls;        /* the REST base URLs for uploads and fetches, the leader's first
                                   * (malloc'd array of n_api_urls strings borrowed from root); NULL:
                                   * the server named none (an older server) */
    size_t n_api_urls;
    /* error */
    const char *message;
    /* ack */
    int64_t seq;
    /* stop, forget, checkpoint_delete */
    const char *job_id;
    int64_t attempt;  /* -1: every attempt (stop) */
    int64_t index;    /* checkpoint_delete: the round */
    int64_t grace_s;  /* -1: the agent's --stop-grace-s */
    int64_t notice_s; /* stop: seconds between the checkpoint request and SIGTERM; 0: none */
    /* launch */
    struct aproto_launch launch;
};

/* Parses one server message. Returns 0 with *out filled (free with aproto_server_msg_free), or -1
 * with a reason naming the bad field in err (malformed JSON, missing type, invalid launch...);
 * then only out->type is kept (UNKNOWN when the type itself is missing), so that a refused launch
 * can be answered (aproto_launch_refused_parse). An unknown type is not an error: type is
 * APROTO_MSG_UNKNOWN. A message of an agent->server type is UNKNOWN here too. */
int aproto_server_msg_parse(const char *text, size_t len, struct aproto_server_msg *out, char *err,
                            size_t errlen);
void aproto_server_msg_free(struct aproto_server_msg *m);

/* What a `launch` that aproto_server_msg_parse refused still says most of the time: its job, its
 * attempt and the ranks of its workers, so that the agent can answer each rank with
 * worker_exited and the server fails the attempt instead of waiting for workers that will never
 * start. Lenient on purpose: job_id any string, attempt any integer, workers[].rank any integer
 * (a worker without one is skipped). */
struct aproto_launch_refused {
    json_t *root;
    const char *job_id; /* borrowed from root */
    int64_t attempt;
    int64_t *ranks; /* n_ranks entries, malloc'd */
    size_t n_ranks;
};
/* 0 with *out filled (free with aproto_launch_refused_free), or -1 when the text is not an object
 * naming job_id, attempt and a workers array (or out of memory). */
int aproto_launch_refused_parse(const char *text, size_t len, struct aproto_launch_refused *out);
void aproto_launch_refused_free(struct aproto_launch_refused *r);

/* credential: the node credential minted at this join (the agent keeps it and sends it in every
 * later register), or NULL. api_urls: n_api_urls REST base URLs (http:// or https://, no
 * trailing path needed) the agent uploads checkpoints to and fetches packages from, in the order
 * to try them (the leader's first); left out when n_api_urls is 0. */
char *aproto_msg_registered(const char *node_id, int64_t heartbeat_interval_s,
                            const char *credential, const char *const *api_urls, size_t n_api_urls);
/* Whether `url` may be an api_urls entry: http:// or https:// and a host, 1..APROTO_MAX_URL
 * bytes of printable ASCII without spaces or quotes. */
bool aproto_api_url_valid(const char *url);
char *aproto_msg_error(const char *message);
char *aproto_msg_ack(int64_t seq);
/* attempt < 0: left out (every attempt); grace_s < 0: left out (the agent's default); notice_s
 * <= 0: left out (SIGTERM at once). */
char *aproto_msg_stop(const char *job_id, int64_t attempt, int64_t grace_s, int64_t notice_s);
/* forget: the job was deleted; the agent removes what it keeps of it (checkpoint staging). */
char *aproto_msg_forget(const char *job_id);
/* checkpoint_delete: retention (num_to_keep) deleted round `index` of attempt `attempt` of the
 * job; the agent removes its staging copy of that round. */
char *aproto_msg_checkpoint_delete(const char *job_id, int64_t attempt, int64_t index);

/* ------------------------------------------------------------------------------------------ */
/* Agent -> server                                                                             */
/* ------------------------------------------------------------------------------------------ */

/* A node as `register` describes it. Parsed: strings borrowed from the message, gpus and custom
 * owned by the message struct. */
struct aproto_node_info {
    const char *id, *hostname, *address, *gpu_type, *version; /* gpu_type, version may be NULL */
    int64_t cpus, memory_mb;
    const int *gpus;
    size_t n_gpus;
    const json_t *custom; /* object of the other resources, or NULL */
    const json_t *labels; /* object or NULL */
    int port_lo, port_hi;
    const char *credential; /* register: the node credential the server gave it, or NULL */
};

/* The reason of a worker exit (worker_exited, an EXITED worker state, a spooled exit): at most
 * this many bytes (valid UTF-8, as every JSON string). */
#define APROTO_MAX_EXIT_REASON 512

/* How long a launch's steps took on the agent (worker_started's optional `startup`), in
 * seconds; < 0: not sent. Every worker of one launch on one node carries the same figures. */
struct aproto_startup {
    double code_fetch_s;       /* the job's code package made ready (fetched, unpacked) */
    double checkpoint_fetch_s; /* the checkpoint to resume from fetched, or its package unpacked */
    double process_start_s;    /* every worker of the launch forked, set up and exec'd */
};
#define APROTO_MAX_STARTUP_S 1e7

/* A worker event (worker_started, worker_exited) or a worker's state in `register`. */
struct aproto_worker_event {
    int64_t seq; /* events only; -1 in a worker state */
    const char *job_id;
    int64_t attempt, rank;
    int64_t pid;        /* worker_started and states; -1: none */
    bool exited;        /* worker_exited, or a state with status EXITED */
    int exit_code;      /* -1: null */
    int signal;         /* -1: null */
    const char *error;  /* NULL: null (the agent's own words for the end: the worker could not
                         * be started, or the out-of-memory killer ended it) */
    const char *reason; /* NULL: null or absent; else the line of the worker's output that says
                         * why it failed (a Python exception, a failed C assertion...), at most
                         * APROTO_MAX_EXIT_REASON bytes */
    struct aproto_startup startup; /* worker_started */
};

/* A worker exit in words, as the job's error says it after "worker rank R " (ty_worker_exited):
 * `error` (the agent's words), else "was killed by SIGSEGV" (the signal's name) or "exited with
 * code 3", then ": " and `reason` when there is one. exit_code/signal < 0 mean null; error,
 * reason NULL mean none. Returns a malloc'd string, or NULL when the exit is no failure (code 0
 * or null, no signal, no error) or when out of memory. */
char *aproto_exit_words(int exit_code, int signal, const char *error, const char *reason);

/* A worker's report as the server reads it (agent message `report`, docs/agent-protocol.md).
 * Its strings, names and values live in `owned`, one allocation (aproto_node_msg_free, or
 * aproto_report_free once taken over): the message's text and JSON tree may go. */
#define APROTO_MAX_METRIC_NAME 256
#define APROTO_MAX_CHECKPOINT_PATH 4096
/* One of a report's metrics: its name, and where its member ("name": value) ends in the
 * report's values_text; its value as a double when it is a number (for the summed-up blocks). */
struct aproto_metric {
    const char *name; /* 1..256 bytes, NUL-terminated */
    size_t end;       /* values_text[0..end) holds the members up to this one's */
    bool is_number;
    double number; /* is_number: the value (an integer as the nearest double) */
};
struct aproto_report {
    int64_t seq;                /* the agent's event seq (>= 1), to ack */
    int64_t job;                /* the server's job id (>= 1): a decimal string or an integer */
    int64_t attempt, rank;      /* 0 .. INT32_MAX */
    int64_t report_seq;         /* k, >= 1: the rank's report number within the attempt */
    int64_t step;               /* -1: null or absent */
    const char *time;           /* RFC 3339 date-time (aproto_rfc3339_valid) */
    const char *checkpoint_dir; /* NULL: none; else 1 to APROTO_MAX_CHECKPOINT_PATH bytes */
    int64_t checkpoint_bytes;   /* -1: null or absent (only read when checkpoint_dir is set) */
    /* the metrics with a 1..256-byte name (any JSON value), in the message's order */
    struct aproto_metric *metrics;
    size_t n_metrics;
    size_t skipped; /* metrics left out (bad names, past the server's cap) */
    /* the metrics as one JSON object's text, values_len bytes (not NUL-terminated), stored as
     * is: the members kept, each as the message wrote it (as jansson writes them when jansson
     * read the message) */
    const char *values_text;
    size_t values_len;
    char *owned;
};

/* Keeps the first n of the report's metrics (n < n_metrics): the others count as skipped. */
void aproto_report_keep(struct aproto_report *r, size_t n);
/* Frees what the report owns (metrics, owned). */
void aproto_report_free(struct aproto_report *r);

/* True when `s` is an RFC 3339 date-time: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM), 'T', 't'
 * or ' ' between date and time, fields within their ranges. Calendar errors (Feb 30) pass: the
 * server leaves them to PostgreSQL, which refuses them. */
bool aproto_rfc3339_valid(const char *s);

/* The stream a worker's output came from (vocab.h TY_LOG_STREAM_MAP): APROTO_LOG_STDOUT, ... */
#define APROTO_LOG_STREAM_ENUM(name, text) APROTO_LOG_##name,
enum aproto_log_stream { TY_LOG_STREAM_MAP(APROTO_LOG_STREAM_ENUM) APROTO_LOG_NSTREAMS };
/* "stdout", "stderr" (static). */
const char *aproto_log_stream_name(enum aproto_log_stream s);
/* The stream named `s`, or -1 when `s` names none. */
int aproto_log_stream_from_string(const char *s);

/* A `log` message: a chunk of one of a worker's two output streams (as its log file of that
 * stream holds it), cut into lines by agent_log_cut. `offset` counts bytes of that stream only.
 * Parsed: strings and `lines` borrowed from the message; `stream` absent means stdout (agents
 * older than migration 0045, which sent both streams as one). */
struct aproto_log_chunk {
    const char *job_id;
    int64_t attempt, rank;
    enum aproto_log_stream stream;
    int64_t offset;      /* byte offset of the chunk in the rank's output of that attempt */
    int64_t bytes;       /* bytes of output the chunk covers (>= 1) */
    int64_t dropped;     /* bytes skipped just before `offset` (agent backlog over its cap) */
    const json_t *lines; /* array of strings (valid UTF-8, no newline) */
};
/* Most lines one `log` message may carry. */
#define APROTO_MAX_LOG_LINES (1 << 20)

/* One worker's row of a `progress` message (agent_proto_progress.c): its last heartbeat as its
 * agent saw it. Parsed: strings borrowed from the message. */
#define APROTO_MAX_OP 32
#define APROTO_MAX_PROGRESS 4096 /* rows in one progress message */
struct aproto_progress {
    const char *job_id;
    int64_t attempt, rank;
    const char *op;           /* the collective it is in or last left; NULL: none yet */
    int64_t coll_seq;         /* that collective's number (1 = the rank's first); 0: none yet */
    bool in_collective;       /* inside collective coll_seq */
    int64_t report_seq;       /* reports it made (trainyard.report / ty_report) */
    int64_t heartbeat_age_ms; /* since its last heartbeat reached the agent */
    int64_t progress_age_ms;  /* since op, coll_seq, in_collective or report_seq last changed */
};

/* One worker's row of a `usage` message (agent_proto_usage.c): what its cgroup says it used.
 * Parsed: strings borrowed from the message. */
#define APROTO_MAX_USAGE 4096 /* rows in one usage message */
struct aproto_usage {
    const char *job_id;
    int64_t attempt, rank;
    int64_t cpu_usec;          /* CPU time of all its processes since it started, >= 0 */
    int64_t memory_bytes;      /* memory its cgroup charges now, >= 0 */
    int64_t memory_peak_bytes; /* the most it was charged (>= 0): the cgroup's own peak where it
                                * keeps one, at least the largest sample */
    bool final;                /* the sample taken once it exited: its totals */
};

/* One GPU of a `gpus` message (agent_proto_gpus.c): NVML's view of it and its latest sample.
 * Parsed: strings borrowed from the message. */
#define APROTO_MAX_GPU_ROWS 64 /* GPUs in one gpus message */
#define APROTO_MAX_GPU_TEXT 95 /* bytes of a uuid or name */
#define APROTO_MAX_XID 65535   /* largest Xid a gpus message carries */
struct aproto_gpu_row {
    int64_t index;                          /* 0 .. APROTO_MAX_GPUS - 1, unique */
    const char *uuid, *name;                /* printable ASCII; uuid non-empty */
    int64_t memory_mb, memory_used_mb;      /* >= 0 */
    int64_t utilization_pct, temperature_c; /* -1: null (NVML did not say) */
    int64_t power_mw;                       /* -1: null */
    bool lost;                              /* gone from NVML since the agent started, or
                                             * unhealthy after a critical Xid */
    int64_t xid; /* the critical Xid that made it unhealthy; 0: none (absent or null) */
};

/* An `artifact_store` message (agent_proto_store.c): whether the agent's last upload or fetch at
 * the server's REST API (its artifact store, code packages) worked. Not an event: no seq, no
 * ack. ok false: `message` says what failed, naming the URL and the error, and job_id (with
 * attempt) the job it was for, when there is one; ok true: the store answered again. Parsed:
 * strings borrowed from the message. */
struct aproto_store_status {
    bool ok;
    const char *url;     /* the URL (base) tried; aproto_api_url_valid */
    const char *message; /* ok false: 1..APROTO_MAX_STORE_MESSAGE bytes; NULL when ok */
    const char *job_id;  /* NULL: no job (aproto_job_id_valid otherwise) */
    int64_t attempt;     /* -1: absent */
};
char *aproto_msg_artifact_store(const struct aproto_store_status *s);

/* A `disk_full` message (agent_proto_store.c, issue 23): the agent could not write `path` (its
 * data directory's file system is full: ENOSPC) while doing `what` for a job's attempt; what it
 * had written there is removed. Not an event: no seq, no ack. Parsed: strings borrowed. */
#define APROTO_MAX_DISK_WHAT 64
struct aproto_disk_full {
    const char *job_id; /* aproto_job_id_valid */
    int64_t attempt;    /* >= 0 */
    const char *path;   /* 1 to APROTO_MAX_CHECKPOINT_PATH bytes */
    const char *what;   /* 1 to APROTO_MAX_DISK_WHAT bytes: "code package fetch", ... */
};
char *aproto_msg_disk_full(const struct aproto_disk_full *d);

/* A `preempt_notice` (agent -> server, issue 28): the node is about to be taken away (an ephemeral
 * agent in a Slurm allocation got Slurm's warning signal before preemption or the time limit);
 * the server preempts the node's jobs (checkpoint, restart elsewhere, not a failure). Not an
 * event: no seq, no ack. reason: 1 to APROTO_MAX_PREEMPT_REASON bytes. */
#define APROTO_MAX_PREEMPT_REASON 256
char *aproto_msg_preempt_notice(const char *reason);

/* The free space of the agent's data directory (heartbeat `disk`): its file system's size and what
 * is free for unprivileged writers (statvfs f_bavail), in MiB. */
struct aproto_disk {
    const char *path; /* the data directory (1 to APROTO_MAX_CHECKPOINT_PATH bytes) */
    int64_t free_mb, total_mb;
};

/* A parsed agent message. */
struct aproto_node_msg {
    enum aproto_msg_type type;
    const char *type_name; /* borrowed from root */
    json_t *root;
    /* register */
    const char *token;            /* NULL: none */
    struct aproto_node_info node; /* hostname defaults to the id, port_range to the defaults */
    const json_t *resources;      /* node.resources as sent (an object) */
    struct aproto_worker_event *workers; /* register: n_workers states (malloc'd) */
    size_t n_workers;
    json_t *node_custom; /* owned storage behind node.custom */
    int *node_gpus;      /* owned storage behind node.gpus */
    /* worker_started, worker_exited */
    struct aproto_worker_event event;
    /* log */
    struct aproto_log_chunk log;
    /* report */
    struct aproto_report report;
    /* progress: n_progress rows (malloc'd) */
    struct aproto_progress *progress;
    size_t n_progress;
    /* usage: n_usage rows (malloc'd) */
    struct aproto_usage *usage;
    size_t n_usage;
    /* gpus: n_gpu_rows rows (malloc'd) */
    struct aproto_gpu_row *gpu_rows;
    size_t n_gpu_rows;
    /* artifact_store */
    struct aproto_store_status store;
    /* disk_full */
    struct aproto_disk_full disk_full;

    /* heartbeat: its `disk`, when has_disk (absent: an older agent, or statvfs failed) */
    bool has_disk;
    struct aproto_disk disk;
    /* preempt_notice: its reason, borrowed */
    const char *preempt_reason;
    int64_t seq; /* -1 when absent or not an integer */
};

/* Parses one agent message. Returns 0 with *out filled (free with aproto_node_msg_free), or -1
 * with the reason in err; then only out->type (UNKNOWN when the type itself is missing) and
 * out->seq (the message's integer `seq`, or -1) are kept, so that a malformed event can be acked
 * and dropped and a malformed register answered. An unknown type is not an error. */
int aproto_node_msg_parse(const char *text, size_t len, struct aproto_node_msg *out, char *err,
                          size_t errlen);
void aproto_node_msg_free(struct aproto_node_msg *m);

/* workers: n worker states (seq ignored). token may be NULL. */
char *aproto_msg_register(const struct aproto_node_info *node, const char *token,
                          const struct aproto_worker_event *workers, size_t n_workers);
/* disk: the data directory's free space, or NULL: left out. */
char *aproto_msg_heartbeat(const struct aproto_disk *disk);
/* st: the launch's step times, or NULL (a worker re-announced after the agent restarted). */
char *aproto_msg_worker_started(int64_t seq, const char *job_id, int64_t attempt, int64_t rank,
                                long pid, const struct aproto_startup *st);
/* exit_code/signal < 0 mean null; error, reason NULL mean null. */
char *aproto_msg_worker_exited(int64_t seq, const char *job_id, int64_t attempt, int64_t rank,
                               int exit_code, int signal, const char *error, const char *reason);
/* A `log` message (the chunk's lines are copied). */
char *aproto_msg_log(int64_t seq, const struct aproto_log_chunk *c);
/* A `gpus` message of n rows (strings copied). */
char *aproto_msg_gpus(const struct aproto_gpu_row *rows, size_t n);
/* A `progress` message of n rows (strings copied). */
char *aproto_msg_progress(const struct aproto_progress *rows, size_t n);
/* A `usage` message of n rows (strings copied). */
char *aproto_msg_usage(const struct aproto_usage *rows, size_t n);
/* body: a spooled report (job_id, attempt, rank, report_seq, metrics, step, time,
 * checkpoint_dir); returns it with type and seq added. */
char *aproto_msg_report(int64_t seq, const json_t *body);
/* A spooled report body (new object) from a worker's report. step < 0: null. */
json_t *aproto_report_body(const char *job_id, int64_t attempt, int64_t rank, int64_t report_seq,
                           const json_t *metrics, int64_t step, const char *time_rfc3339,
                           const char *checkpoint_dir);

/* ------------------------------------------------------------------------------------------ */
/* Spooled bodies (agent_proto_spool.c): written by the agent, read back after a restart        */
/* ------------------------------------------------------------------------------------------ */

/* The keys of a spooled report body: its file name and the order it is resent in. Strings
 * borrowed from the body. */
struct aproto_report_body_keys {
    const char *job_id; /* not checked with aproto_job_id_valid: the caller does before a path */
    int64_t attempt, rank, report_seq;
};
/* 0 when `body` is an object with job_id (a string), attempt, rank and report_seq (integers) and
 * metrics (an object): what aproto_msg_report needs to resend it. -1 otherwise. */
int aproto_report_body_parse(const json_t *body, struct aproto_report_body_keys *out);

/* A spooled worker exit: the worker_exited event an agent restart resends. Parsed: strings
 * borrowed from root. */
struct aproto_exit_body {
    json_t *root; /* parsed only */
    const char *job_id;
    int64_t attempt, rank;
    int exit_code;      /* -1: none (killed by a signal, or never started) */
    int signal;         /* -1: none */
    const char *error;  /* NULL: none */
    const char *reason; /* NULL: none (aproto_worker_event.reason) */
};
/* The body's compact JSON text (caller frees), or NULL when out of memory. */
char *aproto_exit_body(const struct aproto_exit_body *e);
/* 0 with *out filled (free with aproto_exit_body_free), or -1 when the text is not a spooled
 * exit: not JSON, job_id not a valid job id, attempt or rank not integers. exit_code or signal
 * not an integer reads as -1, error not a string as NULL, reason not a string of at most
 * APROTO_MAX_EXIT_REASON bytes as NULL. */
int aproto_exit_body_parse(const char *text, size_t len, struct aproto_exit_body *out);
void aproto_exit_body_free(struct aproto_exit_body *e);
/* RFC 3339 UTC time with milliseconds of `ms` (since the epoch) into out (>= 32 bytes). */
void aproto_format_time(int64_t ms, char *out, size_t outlen);

#endif

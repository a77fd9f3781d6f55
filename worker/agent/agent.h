/*
 * agent.h — trainyard-agent internals shared across its files (prefix agent_, internal
 * cross-file symbols agent__).
 *
 * The protocol's messages (builders, parsers, limits) are in common/agent_proto.h, shared with
 * the server.
 *
 * Layout (pure logic first, I/O last):
 *   config.c      the option table (flag, TRAINYARD_* variable, default) and its loader
 *   parse.c       pure parsers: server URL, port range, GPU list, labels, custom resources
 *   backoff.c     pure reconnect delay (0.2 s doubling to 10 s, ±50 % jitter)
 *   env.c         pure worker environment (DESIGN §3, TF_CONFIG, PYTHONPATH, gloo/NCCL interface)
 *   checkpoint.c  taking over checkpoint directories (<data>/checkpoints), merging local ranks
 *   resources.c   node identity and resources: node-id file, CPUs, memory, NVML (dlopen)
 *   events.c      the outgoing event queue (seq, kept until acked) and the worker table
 *   supervise.c   starting workers (each through a trainyard-supervisor, posix_spawn'ed, or
 *                 fork + setuid under --run-as; the worker in its own process group)
 *   supervise_reap.c  reaping workers (SIGCHLD signalfd, poll timer), stopping process groups
 *   adopt.c       workers that outlive the agent: the agent lease, per-worker records in
 *                 <data>/workers, re-adopting them at start-up (docs/agent-restart.md)
 *   supervisor.c  not the agent: trainyard-supervisor, the program between the agent and each
 *                 worker (its parent; records its exit; kills it when the agent stays away)
 *   isolate.c     what workers run as, their private TMPDIR, data-directory modes, clean-up
 *   logcut.c      pure: cutting output into log lines, reading a log file's journal
 *   logs.c        per-rank log files
 *   tail.c        streaming the log files to the server as `log` events (rank-R.cursor journal)
 *   spool.c       durable report and worker-exit spool (<data>/spool)
 *   upload.c      background upload of checkpoint parts to the server's artifact store
 *   prepare.c     a launch's downloads (checkpoint to resume from, code package) off the event
 *                 loop, in one thread; the launch goes on when they are in the node's cache
 *   code.c        code packages: the node's cache, each attempt's private copy
 *   unpack.c      unpacking a job's archive with libarchive, as the job's uid, within caps
 *   warm.c        warm starts: interpreters started (framework imported) as the next worker's
 *                 uid and cgroup, handed a Python worker at launch (docs/decisions.md)
 *   report.c      the unix report socket (<data>/report.sock), adopted into the lws loop
 *   ws.c          the libwebsockets client: connect, reconnect, rx/tx, heartbeats
 *   main.c        start-up, signals, the event loop, shutdown
 */
#ifndef AGENT_H
#define AGENT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include <curl/curl.h>
#include <jansson.h>

#include "agent_proto.h"

#define AGENT_VERSION "0.1.0"

/* ------------------------------------------------------------------------------------------ */
/* Configuration (config.c, parse.c)                                                           */
/* ------------------------------------------------------------------------------------------ */

/* One server of --server (a comma-separated list: every server of a highly available cluster). */
struct agent_server_url {
    char *url; /* as given */
    char *host;
    int port;
    char *path;
};

struct agent_config {
    /* Raw option values, filled from the table in config.c. */
    char *server;
    char *ca_file;            /* NULL: the system's CAs (wss:// only) */
    char *server_fingerprint; /* "sha256:HEX" or NULL */
    char *token;              /* from --token, or read from --token-file */
    char *token_file;
    char *data_dir;
    char *run_as;            /* auto, uids, none, or a user name (isolate.c) */
    char *worker_uids;       /* "LO-HI": the uids of --run-as uids */
    char *uid_lock_dir;      /* host-wide uid reservations: one flock'd file per uid (isolate.c) */
    char *cgroups;           /* auto, required or off (cgroup.c) */
    int64_t worker_pids_max; /* pids.max of each worker's cgroup (0: no limit) */
    char *node_id;
    char *address;
    char *api_url;     /* the server's REST URL for uploads; NULL: the ones the server names */
    int64_t cpus;      /* 0: detect */
    int64_t memory_mb; /* 0: detect */
    char *gpus;        /* NULL: detect through NVML */
    char *gpu_type;
    char *nvml_library;            /* NULL: libnvidia-ml.so.1 */
    int64_t gpu_sample_interval_s; /* 0: no samples sent */
    char *resources;
    char *labels;
    char *port_range;
    int64_t stop_grace_s;
    char *python_path;
    int64_t warm_python;          /* warm interpreters per framework (warm.c); 0: off */
    char *warm_frameworks;        /* "torch,none": the modules they import, one pool each */
    char *warm_python_exe;        /* the Python they run */
    int64_t heartbeat_interval_s; /* 0: the server's */
    int64_t orphan_timeout_s;     /* 0: four heartbeat intervals of the server */
    int64_t ephemeral_s;          /* > 0: ephemeral (main.c), the longest wait for a server */
    char *log_level;
    char *debug;
    int64_t log_line_max;     /* longer output lines are split (bytes) */
    int64_t log_backlog_max;  /* unacked bytes of one log file before the oldest are skipped */
    int64_t max_queued_bytes; /* events held for the server above which reports are held back */
    int64_t log_flush_ms;     /* a partial last line is sent after waiting this long */
    int64_t report_hello_timeout_s;   /* a report connection must say hello within this */
    int64_t report_max_conns_per_uid; /* open report connections of one peer uid, at most */
    int64_t code_cache_bytes;         /* the node's code cache is trimmed to this (LRU, code.c) */

    /* A package unpacking to more bytes or entries fails its job (unpack.c). */
    int64_t unpack_max_bytes;
    int64_t unpack_max_entries;

    /* Derived by agent_config_load. servers[] lists --server's URLs (at least one, the same
     * scheme for all); url_host, url_port and url_path are the first one's. */
    struct agent_server_url *servers;
    size_t n_servers;
    char *url_host;
    int url_port;
    char *url_path;
    bool url_tls;
    bool pinned;           /* server_fingerprint given: pin[] holds it */
    unsigned char pin[32]; /* SHA-256 of the server certificate's DER */
    int port_lo, port_hi;
    bool gpus_declared;
    int *gpu_list; /* n_gpus entries (declared) */
    size_t n_gpus;
    json_t *resources_json; /* object: custom name -> number */
    json_t *labels_json;    /* object: name -> string */
};

/* Fills `cfg` from defaults, then TRAINYARD_* variables, then argv (flags win), and derives the
 * parsed fields. Prints --help and returns 1 when asked; prints the problem to stderr and returns
 * -1 for a bad value or an unknown flag (cfg is then freed). Free with agent_config_free(). */
int agent_config_load(struct agent_config *cfg, int argc, char **argv);
void agent_config_free(struct agent_config *cfg);

/* Pure parsers (parse.c). Each returns 0, or -1 with a reason in err. */
int agent_parse_server_url(const char *url, char **host, int *port, char **path, bool *tls,
                           char *err, size_t errlen);
/* "URL[,URL...]" -> *out (n entries; free with agent_server_urls_free), each URL as
 * agent_parse_server_url takes it, spaces around commas ignored; all ws:// or all wss:// (*tls).
 * Duplicates are refused. */
int agent_parse_server_list(const char *list, struct agent_server_url **out, size_t *n, bool *tls,
                            char *err, size_t errlen);
void agent_server_urls_free(struct agent_server_url *urls, size_t n);
/* "sha256:" followed by 64 hex digits, optionally in pairs separated by ':' (as `openssl x509
 * -fingerprint -sha256` prints them, its "SHA256 Fingerprint=" prefix accepted too) -> 32
 * bytes in out. */
int agent_parse_fingerprint(const char *text, unsigned char out[32], char *err, size_t errlen);
int agent_parse_port_range(const char *s, int *lo, int *hi, char *err, size_t errlen);
/* "0,1,3" -> ascending unique indices (caller frees *out; *out NULL when *n is 0). "" and
 * "none" mean no GPU. */
int agent_parse_gpu_list(const char *s, int **out, size_t *n, char *err, size_t errlen);
/* '{"k":"v"}' or "k=v,k2=v2" -> new object of strings. NULL or "" -> empty object. */
int agent_parse_labels(const char *s, json_t **out, char *err, size_t errlen);
/* '{"name": number}' -> new object; names CPU, GPU and memory_mb are refused (use the flags). */
int agent_parse_resources(const char *s, json_t **out, char *err, size_t errlen);

/* ------------------------------------------------------------------------------------------ */
/* Backoff (backoff.c)                                                                         */
/* ------------------------------------------------------------------------------------------ */

#define AGENT_BACKOFF_BASE_MS 200
#define AGENT_BACKOFF_MAX_MS 10000

/* Delay before reconnect attempt number `attempt` (0 for the first retry): the base doubles
 * from 200 ms up to 10 s, then jitter scales it by 0.5 + u, u in [0, 1). */
int64_t agent_backoff_delay_ms(unsigned attempt, double u);

/* ------------------------------------------------------------------------------------------ */
/* Log lines (logcut.c)                                                                        */
/* ------------------------------------------------------------------------------------------ */

/* Cuts buf[0..len), a piece of a worker's output that starts at the beginning of a line, into
 * lines appended to the array `lines` as JSON strings: each ends at '\n' (dropped); a line
 * longer than line_max bytes is split into pieces of at most line_max bytes (moved back a little
 * so as not to split a UTF-8 character); invalid UTF-8 and NUL bytes become U+FFFD, byte by byte;
 * everything else, ANSI escape sequences and '\r' included, is kept. A partial last line (no
 * '\n', not over line_max) is left for later unless `final`. Returns the number of bytes cut
 * (the next call starts there); less than len means a partial line, or out of memory. The same
 * bytes always give the same lines. */
size_t agent_log_cut(const char *buf, size_t len, size_t line_max, bool final, json_t *lines);

/* Most bytes of a worker's output agent__worker_gone reads (its end) to find its failure line. */
#define AGENT_FAILURE_SCAN (64 * 1024)
/* The line of a worker's output (the end of it: buf, len bytes; whole: buf starts at the output's
 * first byte, else its first line is skipped as the rest of an earlier one) that says why it
 * failed, into out (valid UTF-8, NUL-terminated, at most outlen - 1 bytes; control characters and
 * invalid bytes become '?'): the last of these to appear, the exception line that ends a Python
 * traceback (the first unindented line after "Traceback (most recent call last):"), a C assertion
 * ("...: Assertion `x' failed."), "Fatal Python error: ...", "terminate called after throwing...",
 * an AddressSanitizer error; when there is none, the last line that reads like an error
 * ("FooError: ...", "SomeException: ...", or starting "error:", "fatal:", "panic:"). Returns its
 * length; 0 (out "") when no line says. */
size_t agent_log_failure_line(const char *buf, size_t len, bool whole, char *out, size_t outlen);

/* A log file's journal (<rank>.cursor, written by tail.c): "c START END DROPPED\n" when a chunk
 * [START, END) is sent (DROPPED: bytes skipped just before it), "a END\n" when every byte before
 * END is acked. */
#define AGENT_LOG_JOURNAL_MAX 64
struct agent_log_journal {
    int64_t acked; /* the last acked end (0: none) */
    size_t n;      /* chunks sent after it, in order: */
    int64_t start[AGENT_LOG_JOURNAL_MAX], end[AGENT_LOG_JOURNAL_MAX];
    int64_t dropped[AGENT_LOG_JOURNAL_MAX];
};
/* Reads a journal's text (NUL-terminated; NULL: empty) into *j: the acked end and the chunks sent
 * after it that are not acked, to be resent as they were. A torn or malformed record, and a chunk
 * that does not follow the previous one, are ignored. */
void agent_log_journal_parse(const char *text, struct agent_log_journal *j);

/* ------------------------------------------------------------------------------------------ */
/* Worker environment (env.c)                                                                  */
/* ------------------------------------------------------------------------------------------ */

/* What the agent makes private to one worker (NULL fields: not given). */
/* The file in a worker's private TMPDIR whose existence asks it to checkpoint now (a stop with a
 * notice: drain, preemption, user stop); its path is TRAINYARD_CHECKPOINT_REQUEST_FILE. */
#define AGENT_CHECKPOINT_REQUEST_FILE "trainyard-checkpoint-request"

/* One GPU as NVML describes it; the sampled fields are -1 when NVML does not say. */
struct agent_gpu {
    int index;
    char uuid[96];
    char name[96];
    int64_t memory_mb, memory_used_mb;
    int utilization_pct, temperature_c;
    int64_t power_mw;
    bool lost;   /* gone from NVML since discovery, or unhealthy (xid) */
    int64_t xid; /* the critical Xid that took it down (agent__xid_takes_gpu_down); 0: none */
};

struct agent_env_private {
    const char *report_secret;    /* TRAINYARD_REPORT_SECRET: proves the worker in `hello` */
    const char *tmp_dir;          /* TMPDIR: the worker's private temporary directory */
    const char *user;             /* set when it runs under a uid of its own: USER and LOGNAME,
                                   * and HOME = tmp_dir */
    const struct agent_gpu *gpus; /* NVML's GPUs, by index: CUDA_VISIBLE_DEVICES names UUIDs */
    size_t n_gpus;
};

/* Builds the environment of one worker: the variables of `base` (the agent's environment, may be
 * NULL) that agent_env_inherited() lets through, then the private ones of `priv` (may be NULL),
 * then GLOO_SOCKET_IFNAME and NCCL_SOCKET_IFNAME = socket_ifname when it is given and `base`
 * sets neither (the user's choice wins), then the DESIGN §3 variables, the report secret and the
 * launch's rendezvous secret, then the job's env (which may override any of them); PYTHONPATH
 * gets python_path first (also in front of a PYTHONPATH the job sets). Returns a malloc'd
 * NULL-terminated "K=V" array (agent_env_free) or NULL when out of memory. */
char **agent_env_build(char *const *base, const struct aproto_launch *l,
                       const struct aproto_launch_worker *w, const char *python_path,
                       const char *report_socket, const char *socket_ifname,
                       const struct agent_env_private *priv);
/* Whether a variable of the agent's own environment is passed to workers (a fixed list: PATH,
 * HOME, the locale, LD_LIBRARY_PATH, PYTHONPATH, NCCL_*, GLOO_*, CUDA_*, ...); never TRAINYARD_*
 * or anything else the agent holds. */
bool agent_env_inherited(const char *name);
void agent_env_free(char **env);
/* The value of `name` in env, or NULL. */
const char *agent_env_get(char *const *env, const char *name);
/* TF_CONFIG for `rank` of the launch (malloc'd JSON, caller frees), NULL on OOM. */
char *agent_tf_config(const struct aproto_launch *l, int64_t rank);

/* ------------------------------------------------------------------------------------------ */
/* Checkpoint directories (checkpoint.c)                                                       */
/* ------------------------------------------------------------------------------------------ */

/* <data_dir>/checkpoints/<job>/<attempt>/<k>: where round k's parts on this node are merged
 * (malloc'd), or NULL for an invalid job id, attempt < 0, k < 1, or OOM. */
char *agent_checkpoint_path(const char *data_dir, const char *job_id, int64_t attempt, int64_t k);
/* How many local ranks made their k-th report, kept in <k>.reports beside round k's directory
 * while the round waits for the others (upload.c), so that an agent restarted between two of
 * them still completes it. _load: the count a previous agent left (0 when none). _save: writes
 * `reports` (through a temporary file and a rename; not synced: it matters across an agent crash,
 * as the worker records do) when round k has a directory, the only rounds with something of this
 * node's to upload; removes the file when reports is 0 or there is no directory. */
int64_t agent_checkpoint_count_load(const char *data_dir, const char *job_id, int64_t attempt,
                                    int64_t k);
void agent_checkpoint_count_save(const char *data_dir, const char *job_id, int64_t attempt,
                                 int64_t k, int64_t reports);
/* 0 when src is an absolute path to a directory the agent can read; else -1 with a reason naming
 * src in err (for the worker's error reply): one reason whatever the cause, so that the agent's
 * privileges tell the worker nothing of paths it cannot read itself. */
int agent_checkpoint_check_src(const char *src, char *err, size_t errlen);
/* Moves the regular files under src (recursively; symlinks and special files skipped with a
 * warning; copied and fsync'ed instead when dest is on another filesystem) into dest (created
 * with its parents) as rank `rank`'s part: on a name clash the lower rank's file wins (owners kept
 * in <dest>.owners.json) and the other stays in src. src keeps its subdirectories.
 * *bytes = total size of the regular files now under dest. 0, or -1 with the reason in err
 * (files taken so far stay). Blocking, but a few system calls per file. */
int agent_checkpoint_merge(const char *src, const char *dest, int64_t rank, int64_t *bytes,
                           char *err, size_t errlen);
/* agent_checkpoint_merge taking only what uid `owner` owns (-1: anything): a worker running under
 * a uid of its own cannot have the agent take a file it does not own. A directory or file of
 * another owner fails the merge (src itself not the owner's: with check_src's reason, naming
 * nothing under it). Messages name no path of the agent's (dest). Staged files are the agent's,
 * 0600; directories 0700. */
int agent_checkpoint_merge_as(const char *src, const char *dest, int64_t rank, long long owner,
                              int64_t *bytes, char *err, size_t errlen);

/* ------------------------------------------------------------------------------------------ */
/* Runtime state (events.c, supervise.c, ...)                                                  */
/* ------------------------------------------------------------------------------------------ */

enum agent_worker_status { AGENT_WORKER_RUNNING, AGENT_WORKER_EXITED };

/* A worker's uid when it runs as the agent's own user. */
#define AGENT_NO_UID ((uid_t)-1)
#define AGENT_CG_MAX 4 /* cgroup hierarchies a worker is in: v1 memory, cpu, cpuacct, pids */

/* The cgroups the agent puts workers in (cgroup.c). */
struct agent_cgroups {
    int version;                /* 2, 1, or 0: none */
    size_t n;                   /* hierarchies used (v2: 1) */
    char *parent[AGENT_CG_MAX]; /* the agent's own parent in each: .../trainyard-<node>-<pid> */
    int ctl[AGENT_CG_MAX];      /* the controllers of each (cgroup.c's CG_* bits) */
};

/* A uid reserved on this host for one job (isolate.c): a flock on <uid-lock-dir>/uid-<N>.lock. */
struct agent_uid_hold {
    struct agent_uid_hold *next;
    uid_t uid;
    int fd;
    char job_id[APROTO_MAX_JOB_ID + 1];
};

/* A worker's last heartbeat on the report socket (progress.c). */
struct agent_worker_progress {
    bool known;       /* a heartbeat arrived */
    char op[33];      /* "" before its first collective */
    int64_t coll_seq; /* the collective it is in or last left */
    bool in_collective;
    int64_t report_seq;
    int64_t heartbeat_ms; /* monotonic time of its last heartbeat */
    int64_t changed_ms;   /* monotonic time the four fields above last changed */
};

struct agent_worker {
    struct agent_worker *next;
    char *job_id;
    int64_t attempt, rank;
    pid_t pid;                    /* also the process group id */
    pid_t sup_pid;                /* its trainyard-supervisor (0: none, a spooled exit) */
    unsigned long long sup_start; /* the supervisor's start time (/proc/PID/stat field 22) */
    bool adopted; /* started by an earlier agent: not our child, watched through /proc */
    enum agent_worker_status status;
    int exit_code;        /* -1: null */
    int signal;           /* -1: null */
    char *error;          /* launch failure, or NULL */
    char *reason;         /* its output's failure line (agent_log_failure_line), or NULL */
    int64_t kill_at_ms;   /* SIGKILL the group at this monotonic time; 0: not stopping */
    int64_t term_at_ms;   /* SIGTERM the group at this time (end of a stop's notice); 0: none */
    int64_t term_grace_s; /* with term_at_ms: the grace between that SIGTERM and SIGKILL */
    int64_t exit_seq;     /* seq of its worker_exited event; 0 until it exited */
    uid_t uid;            /* what it runs as; AGENT_NO_UID: the agent's own user */
    gid_t gid;
    char *tmp_dir;      /* its private TMPDIR; NULL once removed */
    char *grant_dir;    /* a checkpoint directory its gid was given read access to, or NULL */
    char *storage_path; /* its job's run_config.storage_path (shared_store.c), or NULL */
    char *packages[2];  /* the code and checkpoint packages (sha256) it was launched with, or
                         * NULL: kept in the node's code cache while it runs (code.c) */
    char secret[65];    /* TRAINYARD_REPORT_SECRET: proves it on the report socket */
    struct agent_worker_progress progress;
    char *cg_dirs[AGENT_CG_MAX]; /* its cgroups, one per hierarchy (agent.cg order); NULL once
                                  * removed */
    size_t cg_n;                 /* 0: none (cgroups off, or all removed) */
    int64_t memory_mb;           /* its memory limit (resources_per_worker), 0: none */
    int64_t memory_peak;         /* the most memory its cgroup was seen charged (usage.c) */
    bool acked; /* its exit was acknowledged: freed once its cgroups and uid are cleaned up */
};

enum agent_event_kind { AGENT_EV_STARTED, AGENT_EV_EXITED, AGENT_EV_REPORT, AGENT_EV_LOG };

struct agent_event {
    struct agent_event *next;
    int64_t seq;
    enum agent_event_kind kind;
    char *text;       /* the message as sent */
    bool sent;        /* sent on the current connection */
    char *spool_path; /* reports, worker exits: the spool file to delete on ack */
};

struct agent_report_conn;
struct agent_tail;
struct lws_context;
struct lws;

struct agent {
    struct agent_config *cfg;
    struct lws_context *ctx;
    char *data_dir; /* absolute */
    char *node_id;
    char *node_credential; /* from <data>/node.credential; NULL: join with the cluster token */
    char hostname[256];
    char address[1100];
    char socket_ifname[64]; /* the interface holding `address` ("" unknown): gloo and NCCL
                             * of the workers bind to it (agent_env_build) */
    char *gpu_type;
    int64_t cpus, memory_mb;
    int *gpus;
    size_t n_gpus;
    struct agent_gpu *gpu_info; /* n_gpu_info entries when NVML found them, else NULL */
    size_t n_gpu_info;          /* lost GPUs stay here (marked) but leave gpus */
    int64_t gpus_sent_ms;       /* when the last `gpus` message went */
    char *report_socket;        /* <data>/report.sock */
    uid_t uid_lo, uid_hi;       /* the uids workers run under; AGENT_NO_UID: the agent's own */
    gid_t run_as_gid;           /* --run-as USER: that user's group */
    char run_as_user[64];       /* --run-as USER: its name; "" otherwise */
    char *spool_dir;
    char *workers_dir;        /* <data>/workers: one record per running worker (adopt.c) */
    char *supervisor_path;    /* trainyard-supervisor, beside the agent's executable */
    int lease_fd;             /* <data>/agent.lease, written by the agent (-1: none) */
    int lease_read_fd;        /* the same, read only: what the supervisors get (-1: none) */
    int64_t orphan_timeout_s; /* a supervisor kills its worker after this long without an agent */
    struct agent_cgroups cg;  /* cgroup.c */
    struct agent_uid_hold *uid_holds; /* isolate.c: uids this agent holds on the host */
    struct agent_warm *warm;          /* warm.c: started interpreters waiting for a worker */
    int64_t warm_retry_ms;            /* warm.c: no refill before this (a fill failed) */

    /* websocket */
    struct lws *wsi;
    bool connected, registered;
    unsigned reconnect_attempt;
    size_t server_index; /* the cfg->servers entry connected to, or tried next */
    int64_t heartbeat_interval_s;
    char *rx;
    size_t rx_len, rx_cap;
    bool rx_too_big;
    char **ctl; /* control messages (register, heartbeat) waiting to be written */
    size_t n_ctl, cap_ctl;

    /* events and workers */
    int64_t next_seq;
    struct agent_event *events, *events_tail;
    int64_t queued_bytes; /* text of the events in `events` */
    bool reports_held;    /* report connections are paused until queued_bytes falls */
    struct agent_worker *workers;
    struct agent_tail *tails; /* tail.c: log files being streamed */
    int inotify_fd;           /* tail.c: writes to those files (-1: none; the poll timer reads) */

    /* report socket */
    int64_t progress_sent_ms; /* progress.c: monotonic time of the last `progress` message */
    int64_t usage_sent_ms;    /* usage.c: monotonic time of the last `usage` message */
    int report_listen_fd;
    struct lws *report_listen_wsi;
    struct agent_report_conn *report_conns;
    int64_t report_accept_resume_ms;  /* accepting paused (out of descriptors) until then; 0: not */
    int64_t report_refused_logged_ms; /* when a refusal over the per-uid cap was last logged */

    /* lifecycle */
    volatile int stop_signal;
    bool shutting_down;
    bool done;
    /* --ephemeral (main.c): a worker ran here; when the server was last lost (0: connected) */
    bool ephemeral_ran;
    int64_t ephemeral_lost_ms;
    bool ephemeral_upload_wait; /* shutting down, it said it waits for its uploads */
    int64_t shutdown_deadline_ms;

    void *timers;                    /* ws.c / main.c timers (struct agent__timers) */
    struct agent_uploader *uploader; /* upload.c; NULL: not started */
    struct agent_prep *prep;         /* prepare.c; NULL: not started (launches fetch inline) */
};

/* Wall-clock milliseconds (monotonic ones: util_mono_ms). */
int64_t agent_wall_ms(void);

/* events.c */
/* Queues an event: `text` (taken over; NULL counts as out of memory) is the message as sent,
 * built with `seq` from agent__next_seq(). Takes ownership of spool_path. Returns the event or NULL
 * (OOM). Wakes the writer when registered. */
struct agent_event *agent__event_push(struct agent *a, enum agent_event_kind kind, char *text,
                                      int64_t seq, char *spool_path);
int64_t agent__next_seq(struct agent *a);
/* Drops the event `seq` (the server acks each event it committed): deletes its spool file, or
 * forgets the exited worker whose exit it reported. An unknown seq is ignored. */
void agent__events_ack(struct agent *a, int64_t seq);
/* Marks every event unsent (a new connection). */
void agent__events_reset_sent(struct agent *a);
/* The first event not yet sent on this connection, or NULL. */
struct agent_event *agent__events_next_unsent(struct agent *a);
void agent__events_free_all(struct agent *a);
/* Worker states for `register`: a malloc'd array of *n entries borrowing the workers' strings
 * (valid until the worker table changes), or NULL when there are none or out of memory. */
struct aproto_worker_event *agent__workers_state(const struct agent *a, size_t *n);
struct agent_worker *agent__worker_find(struct agent *a, const char *job_id, int64_t attempt,
                                        int64_t rank);
void agent__workers_free_all(struct agent *a);
size_t agent__workers_running(const struct agent *a);

/* supervise.c */
/* Starts every worker of the launch (skipping ranks already known). Never fails as a whole: a
 * worker that cannot start gets a worker_exited event with exit code 127 and an error. The
 * checkpoint to resume from and the code package come from this node's caches; with may_fetch a
 * cache miss is fetched here, blocking the caller (the event loop hands such launches to
 * prepare.c first, and launches them with may_fetch false once the caches are filled). */
void agent__launch(struct agent *a, const struct aproto_launch *l, bool may_fetch);
/* Marks w exited (exit code, signal or -1, error or NULL: copied) and queues its worker_exited
 * event, after its last output; spools the exit so that an agent restart resends it. */
void agent__worker_exited(struct agent *a, struct agent_worker *w, int exit_code, int sig,
                          const char *error);

/* supervise_reap.c */
/* Stops each matching running worker: first asks it to checkpoint (creates its
 * AGENT_CHECKPOINT_REQUEST_FILE, which ty_should_checkpoint() and trainyard.should_checkpoint()
 * see), then SIGTERM to its process group notice_s seconds later (at once when notice_s <= 0),
 * then SIGKILL grace_s after the SIGTERM. A worker already being stopped keeps its earlier
 * deadlines unless this stop is sooner. attempt -1 matches every attempt; job_id NULL matches
 * every job. */
void agent__stop(struct agent *a, const char *job_id, int64_t attempt, int64_t grace_s,
                 int64_t notice_s);
/* Reaps exited workers (waitpid WNOHANG), queues worker_exited, and SIGKILLs groups whose grace
 * ran out. Called from the poll timer and whenever SIGCHLD arrives. */
void agent__supervise_poll(struct agent *a);
/* Blocks SIGCHLD and adds a signalfd for it to the event loop, so that exits are reaped at once
 * rather than on the next poll tick. 0, or -1 (the poll timer still reaps). */
int agent__children_watch(struct agent *a);

/* The worker's supervisor is gone (reaped: *wait_status; an adopted one: wait_status NULL):
 * kills what is left in the worker's process group and queues its worker_exited with the status
 * the supervisor recorded (else the one it exited with). */
void agent__worker_gone(struct agent *a, struct agent_worker *w, const int *wait_status);

/* adopt.c */
/* Opens <data>/agent.lease (same file across restarts: supervisors hold it open) and writes this
 * agent into it. 0, or -1 (logged). */
int agent__lease_open(struct agent *a);
/* Rewrites the lease: "PID START ORPHAN_TIMEOUT_S" of this agent. Call when the timeout changes. */
void agent__lease_write(struct agent *a);
/* <data>/workers/<job>.<attempt>.<rank>.status, created empty for w's supervisor to write
 * (0600, the descriptor close-on-exec and numbered 10 or above). fd, or -1 with errno. */
int agent__worker_status_open(struct agent *a, const struct agent_worker *w);
/* The status w's supervisor recorded: 0 and *exit_code / *sig (-1 for null) and the error in
 * `error` ("" none), or -1 when there is none. */
int agent__worker_status_read(struct agent *a, const struct agent_worker *w, int *exit_code,
                              int *sig, char *error, size_t errlen);
/* Writes w's record (pids, supervisor start time, secret, uid, temporary directory), so
 * that a restarted agent finds it again. 0 or -1 (logged: the worker cannot be re-adopted). */
int agent__worker_record_write(struct agent *a, const struct agent_worker *w);
/* Removes w's record and status file (its exit is spooled). */
void agent__worker_record_remove(struct agent *a, const struct agent_worker *w);
/* Start-up, after the spooled exits are reloaded: every recorded worker whose supervisor still
 * runs is taken back (RUNNING, adopted, its worker_started queued again); one whose supervisor
 * is gone gets its recorded exit queued. */
void agent__workers_adopt(struct agent *a);
/* Whether an adopted worker's supervisor still runs (pid and start time). */
bool agent__supervisor_alive(const struct agent_worker *w);

/* isolate.c */
/* The job was deleted: removes its checkpoint staging (<data>/checkpoints/<job>/), unless one of
 * its workers still runs here. */
void agent__forget_job(struct agent *a, const char *job_id);
/* Retention deleted round `index` of the job's attempt `attempt`: removes its staging copy
 * (<data>/checkpoints/<job>/<attempt>/<index>/ and <index>.owners.json), unless a running worker
 * reads it (its resume checkpoint); a bad job id or a missing round does nothing. */
void agent__delete_checkpoint(struct agent *a, const char *job_id, int64_t attempt, int64_t index);
/* Decides what workers run as (--run-as, --worker-uids) and sets the modes of the data directory
 * (0711: workers reach report.sock and nothing else) and of logs/ and checkpoints/. 0, or -1
 * (logged) for a bad option or a --run-as that needs root. */
int agent__isolation_init(struct agent *a);
/* Picks w's uid and gid: the uid of a running worker of the same job, else the lowest free one of
 * the range (AGENT_NO_UID when workers run as the agent). 0, or -1 with errno EAGAIN when every
 * uid of the range is taken. */
int agent__worker_credentials(struct agent *a, struct agent_worker *w);
/* The user name a worker with its own uid sees in USER (written into buf when made up), or
 * NULL when it runs as the agent. */
const char *agent__worker_user(const struct agent *a, const struct agent_worker *w, char *buf,
                               size_t len);
/* Creates w's private temporary directory (/tmp/trainyard-JOB.ATTEMPT.RANK-XXXXXX, 0700, owned
 * by its uid) into w->tmp_dir. 0, or -1 with errno. */
int agent__worker_tmp_dir(struct agent_worker *w);
/* Lets w's group read the checkpoint directory `dir` it resumes from when that is under
 * <data>/checkpoints (taken back once the uid is free). 0, or -1 when out of memory. */
int agent__grant_checkpoint(struct agent *a, struct agent_worker *w, const char *dir);
/* After w exited: once no running worker has its uid, kills every process left under the uid,
 * removes the temporary directories of its exited workers and takes back their grants. */
void agent__isolation_worker_done(struct agent *a, struct agent_worker *w);
void agent__worker_free(struct agent_worker *w);
/* Every exited worker's cgroups emptied and removed, and every uid no worker needs any more
 * cleaned up and given back (poll timer). */
void agent__isolation_poll(struct agent *a);
/* Takes the host-wide reservation of w's uid again (an adopted worker). */
void agent__uid_rehold(struct agent *a, const struct agent_worker *w);
/* Gives back every uid still held (shutdown). */
void agent__uid_release_all(struct agent *a);
/* Removes, without following links, every entry of dir that uid owns (a directory with all it
 * holds); dir itself and what uid put into other users' directories below it are kept (a shared
 * world-writable working directory holds a job's results). For /tmp, /var/tmp and /dev/shm at a
 * job's end. */
void agent__remove_owned(const char *dir, uid_t uid);
/* Opens dir (absolute) component by component, never following a link (O_NOFOLLOW |
 * O_DIRECTORY at each step). The descriptor, or -1 with errno (ELOOP/ENOTDIR for a link). */
int agent__open_dir_nofollow(const char *dir);

/* cgroup.c */
/* Finds the cgroup hierarchies and creates the agent's parent cgroups (--cgroups). 0, or -1
 * (logged) when --cgroups required finds none or the option is bad. */
int agent__cgroup_init(struct agent *a);
/* Removes the agent's parent cgroups when empty and frees them. */
void agent__cgroup_fini(struct agent *a);
/* Creates w's cgroups (none when the agent has none) with its limits (0: none). 0, or -1 with
 * errno (what was created is in w->cg_dirs, removed by agent__cgroup_remove). */
int agent__cgroup_create(struct agent *a, struct agent_worker *w, int64_t cpu_milli,
                         int64_t memory_mb);
/* Writes the limits (0: none) and pids.max into w's existing cgroups (a warm interpreter's, at
 * hand-off). 0, or -1 with errno. */
int agent__cgroup_limit(struct agent *a, struct agent_worker *w, int64_t cpu_milli,
                        int64_t memory_mb);
/* Opens w's cgroup.procs files for writing (fds, w->cg_n of them, numbered 10 or above,
 * close-on-exec): the child writes "0" to each to join. Their count, or -1 with errno. */
int agent__cgroup_join_fds(const struct agent_worker *w, int *fds);
/* SIGKILLs every process in w's cgroups. True when none was left to kill. */
bool agent__cgroup_kill(struct agent_worker *w);
/* Removes w's cgroups (an adopted worker's: the earlier agent's parent too, once empty). True
 * when all are gone; false while a process is still in one. */
bool agent__cgroup_remove(struct agent_worker *w);
/* w's CPU time (microseconds), memory in use and the most memory it was charged (bytes; -1
 * where the cgroup keeps no peak: v2 before Linux 5.19), read from its cgroups. 0, or -1 (cpu and
 * memory -1) when it has none. */
int agent__cgroup_usage(const struct agent *a, const struct agent_worker *w, int64_t *cpu_usec,
                        int64_t *memory_bytes, int64_t *memory_peak);
/* How many processes of w the out-of-memory killer killed; -1: unknown. */
int64_t agent__cgroup_oom_kills(const struct agent *a, const struct agent_worker *w);

/* logs.c */
/* The log path of a rank's stream (malloc'd): rank-R.log for stdout, rank-R.err.log for stderr,
 * creating its directory. NULL with errno on failure. */
char *agent__log_path(const struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                      enum aproto_log_stream stream, bool create_dir);
/* Opens (creating) the rank's two log files for appending, stdout's as fd[0] and stderr's as
 * fd[1], each 3 or above (moving them onto 1 and 2 clobbers neither). 0, or -1 with errno. */
int agent__log_open(const struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                    int fd[2]);
/* The failure line of w's output (agent_log_failure_line on the end of its stderr log file, then
 * of its stdout one; malloc'd, at most APROTO_MAX_EXIT_REASON bytes), or NULL when none has one. */
char *agent__log_failure_reason(const struct agent *a, const struct agent_worker *w);

/* tail.c: streaming log files as `log` events */
/* Starts streaming the rank's two log files (once; the files must exist). */
void agent__tail_start(struct agent *a, const char *job_id, int64_t attempt, int64_t rank);
/* The worker exited: queues what its files hold now, a partial last line included. */
void agent__tail_finish(struct agent *a, const char *job_id, int64_t attempt, int64_t rank);
/* Reads what is new in every file (poll timer) and frees finished tails. */
void agent__tails_poll(struct agent *a);
/* The server acked `log` event seq: moves its file's acked offset, reads on. */
void agent__tail_acked(struct agent *a, int64_t seq);
/* Start-up: resumes every log file whose journal shows unacked bytes. */
void agent__tails_reload(struct agent *a);
void agent__tails_free_all(struct agent *a);
/* Adopts an inotify descriptor into the event loop, so that a write to a log file is read at once
 * (else the poll timer reads it within 50 ms). Call before any tail starts. 0, or -1 (logged). */
int agent__tails_watch(struct agent *a);

/* resources.c */
/* <data>/node.credential (0600): the credential the server gave this node, or NULL. */
char *agent__credential_load(const char *data_dir);

/* upload.c: checkpoint parts to the server's artifact store (docs/artifacts.md). */
/* Starts the uploader thread (REST URL: --api-url, else the ones the server names in
 * `registered`, agent__uploader_set_urls; --api-url none: no uploader), first queuing the parts
 * a previous agent left unsent. 0 or -1. */
int agent__uploader_start(struct agent *a);
/* The REST base URLs `registered` named (n 0: an older server: --server's host, port 8080); the
 * uploads and fetches that wait for one go on. Ignored with --api-url. lws thread. */
void agent__uploader_set_urls(struct agent *a, const char *const *urls, size_t n);
/* Sends the `artifact_store` messages the uploader and fetches queued (poll timer). */
void agent__uploader_poll(struct agent *a);
/* A fetch at `url` (fetch.c) worked (err NULL) or failed with err: the failure is told to the
 * server (the node's condition), a success clears it. */
void agent__fetch_noted(struct agent *a, const char *url, const char *err);
/* A fetch for (job, attempt) failed: the failure told last becomes an event of that job too. */
void agent__uploader_fetch_failed(struct agent *a, const char *job_id, int64_t attempt);
/* A write for (job, attempt) into `path` under the data directory failed with ENOSPC while
 * doing `what` ("code package fetch", "report spool", ...): the server is told (`disk_full`, an
 * event of the job naming the node, the path and ENOSPC) with the next poll. Any thread. */
void agent__disk_full(struct agent *a, const char *job_id, int64_t attempt, const char *path,
                      const char *what);
/* Asks the server to preempt this node's jobs (`preempt_notice`, an ephemeral agent that got
 * Slurm's warning signal) with the next poll. Any thread. */
void agent__preempt_notice(struct agent *a, const char *reason);
/* Counts report k of (job, attempt) on this node (lws thread, after it was spooled); once every
 * local worker of that attempt made it, queues <data>/checkpoints/<job>/<attempt>/<k> (if it
 * exists) for upload and returns at once. */
void agent__uploader_note_report(struct agent *a, const char *job_id, int64_t attempt, int64_t k);
/* The checkpoint parts queued for upload or being uploaded (0 without an uploader). */
size_t agent__uploads_pending(struct agent *a);
/* Stops and joins the uploader (an upload in progress is abandoned; the server keeps what it
 * acknowledged, and the part's marker in <data>/uploads makes the next agent resume it). */
void agent__uploader_stop(struct agent *a);
/* A new curl handle for a request to api_url + url_path as this node: its name and credential
 * in the headers (*hs: the caller frees it with curl_slist_free_all after curl_easy_cleanup),
 * no signals, a 10 s connect timeout, the agent's TLS trust (--ca-file or the pin). NULL without
 * an uploader (--api-url none) or memory. */
CURL *agent__server_request(struct agent *a, const char *url_path, struct curl_slist **hs);

/* iolib.c: libcurl and libarchive are loaded at their first use, not at the agent's start (the
 * agent links neither; iolib.c defines the functions it calls). Loads libarchive now: 0, or -1
 * (logged) when it cannot be loaded. Before a fork whose child unpacks: loading there is unsafe. */
int agent__iolib_load_archive(void);

/* fetch.c: a checkpoint to resume from, fetched to this node (docs/artifacts.md). */
/* The directory to resume from when this node holds no copy of checkpoint `id`: its archive
 * fetched from the server and unpacked into <data>/checkpoints/fetched/<sha256> (once per node:
 * kept as a cache). With may_fetch false only the cache is looked at; else a miss blocks the
 * caller for the download. One fetch at a time (prepare.c's thread). malloc'd path, or NULL
 * (logged). */
char *agent__checkpoint_fetch(struct agent *a, int64_t id, const char *sha256, const char *shared,
                              bool may_fetch);
/* GETs api_url + url_path as this node (its credential) into file `path`. Blocks the caller.
 * 0 on a 200, or -1 (logged) with errno set when writing `path` failed (ENOSPC: a full disk,
 * which is not the store's failure), else 0. */
int agent__fetch_to_file(struct agent *a, const char *url_path, const char *path);
/* The SHA-256 (hex) and size of a file. 0 or -1. */
int agent__sha256_file(const char *path, char hex[65], int64_t *size);

/* unpack.c: unpacking an archive a job controls (issue 22). */
struct agent_unpack {
    const char *archive; /* the tar (gzip, bzip2, xz or none) the agent fetched */
    const char *dir;     /* an existing empty directory: given to uid:gid, unpacked into */
    uid_t uid;           /* the child unpacks as uid:gid (no other group); AGENT_NO_UID: the */
    gid_t gid;           /* agent's own user */
    int64_t max_bytes;   /* caps on the file bytes written and on the entries; 0: none */
    int64_t max_entries;
    const char *what;       /* "code package", how messages name the archive */
    const char *bytes_flag; /* the options behind the caps, named in messages, or NULL */
    const char *entries_flag;
};
/* Unpacks u->archive into u->dir in a child process that takes u->uid and u->gid before it reads
 * the archive: regular files, directories and links inside the tree only, modes masked to 0755,
 * within the caps (unpack.c says exactly what is refused). Blocks the caller. 0, or -1 with err
 * set to a message for the job's error that names no host path (what is left in dir is the
 * caller's to remove) and errno ENOSPC when the file system was full. */
int agent__unpack(const struct agent_unpack *u, char *err, size_t errlen);

/* shared_store.c: checkpoints on shared storage (run_config.storage_path, docs/artifacts.md) */
/* Copies this node's merged directory `src` of a round to `dest` (the part's directory under the
 * storage path, made with its parents), owned by uid:gid unless they are AGENT_NO_UID, every file
 * and directory fsync'd: into dest.tmp-<pid> first, renamed to dest when complete (an earlier
 * dest is replaced). sha = its manifest digest (dir_manifest.h), *files its regular files. 0, or
 * -1 (logged). Blocks: the uploader thread calls it. */
int agent__shared_put(const char *src, const char *dest, uid_t uid, gid_t gid, char sha[65],
                      int64_t *files);
/* Copies what every node-* directory of `shared` (a checkpoint's directory on shared storage)
 * holds into existing directory `dir`, which becomes this node's private copy (workers never
 * write into the stored one): directories and regular files only, by descriptor, modes masked to
 * 0755; links and special files are skipped (logged). 0 or -1 (logged). */
int agent__shared_fetch(const char *shared, const char *dir);

/* tarstream.c: a directory as a reproducible tar stream, read at any offset (no tar file). */
struct agent_tar;
/* Walks `dir` (names sorted) and lays its tar out. NULL when it cannot be read. */
struct agent_tar *agent__tar_open(const char *dir);
/* The stream's length in bytes (end blocks included) and its regular file count. */
int64_t agent__tar_size(const struct agent_tar *t);
int64_t agent__tar_files(const struct agent_tar *t);
/* Fills buf with the stream's bytes at `off`: len of them, fewer only at its end; -1 when a file
 * is missing, unreadable or changed since agent__tar_open (agent__tar_error says which). */
ssize_t agent__tar_read(struct agent_tar *t, int64_t off, char *buf, size_t len);
/* The last read's failure ("file NAME: REASON"), "" when none. */
const char *agent__tar_error(const struct agent_tar *t);
void agent__tar_free(struct agent_tar *t);

/* isolate.c: removes a tree without following symbolic links (best effort, missing is fine). */
void agent__remove_tree(const char *path);

/* warm.c: warm starts (issue 27). A warm interpreter is a worker started ahead of its job
 * through the cold path's own spawn (supervisor, uid, cgroup, TMPDIR, log and status files), as
 * the placeholder job AGENT_WARM_JOB, running `python -c STUB FRAMEWORK`: it imports the
 * framework and then reads its launch (working directory, argv, environment) from its stdin, a
 * socket pair whose other end only the agent holds. */
#define AGENT_WARM_JOB "~warm"
struct agent_warm {
    struct agent_warm *next;
    struct agent_worker *w; /* the placeholder: uid, tmp_dir, cgroups, sup_pid, pid, sup_start */
    char framework[64];     /* the module it imports, or "none" */
    char *log_path[2]; /* its stdout and stderr log files, renamed to the worker's at hand-off */
    char **env;        /* the environment it started with */
    int ctl;           /* the agent's end of its stdin; -1 once handed off or discarded */
};
/* From the poll timer: discards dead interpreters and those whose uid went to a job, removes the
 * cgroups of discarded ones once empty, and starts new ones up to --warm-python per framework. */
void agent__warm_poll(struct agent *a);
/* A warm interpreter for worker lw of launch l, taken out of the pool, or NULL when none fits
 * (the cold path then runs): `program` is the real path of the Python its entrypoint runs and
 * env the worker's environment without its private part. Under --run-as uids a job without a
 * uid on this node takes the pool's uid with it. */
struct agent_warm *agent__warm_take(struct agent *a, const struct aproto_launch *l,
                                    const char *program, char *const *env);
/* Hands w's launch (working_dir, argv, env) to e and closes e's stdin: its user code runs from
 * now on. Renames e's status file to w's. 0, or -1 (e then exits without running anything). */
int agent__warm_send(struct agent *a, struct agent_warm *e, const struct agent_worker *w,
                     const char *working_dir, const char *const *argv, char *const *env);
/* Frees e (after a hand-off or a discard). */
void agent__warm_free(struct agent_warm *e);
/* Kills e's processes and keeps it for agent__warm_poll to remove its cgroups and files. */
void agent__warm_discard(struct agent *a, struct agent_warm *e);
/* Whether a warm interpreter (or one discarded, not yet gone) runs as uid. */
bool agent__warm_uses_uid(const struct agent *a, uid_t uid);
/* Shutdown: kills every warm interpreter and removes what it had. */
void agent__warm_fini(struct agent *a);
/* supervise.c: starts program (argv) for the placeholder w under a trainyard-supervisor as the
 * cold path starts a worker (stdout to logfd[0], stderr to logfd[1]), with stdin on in_fd; waits
 * for its exec. 0, or an errno. */
int agent__spawn_warm(struct agent *a, struct agent_worker *w, const char *program,
                      const char *const *argv, char *const *env, const int logfd[2], int in_fd);
/* isolate.c: the job holding uid on this node ("" pool's or NULL: none) and moving a hold. */
const char *agent__uid_holder(const struct agent *a, uid_t uid);
/* The uid job_id holds on this node, or AGENT_NO_UID. */
uid_t agent__uid_of_job(const struct agent *a, const char *job_id);
void agent__uid_give(struct agent *a, uid_t uid, const char *job_id);
/* adopt.c: <workers>/<job>.<attempt>.<rank><suffix> (malloc'd), or NULL. */
char *agent__record_path(const struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                         const char *suffix);

/* prepare.c: downloads a launch needs, off the event loop */
/* Starts the preparation thread. 0 or -1. */
int agent__prepare_start(struct agent *a);
/* Stops and joins it; launches still waiting are dropped (the server resends them: their workers
 * stay PLACED). */
void agent__prepare_stop(struct agent *a);
/* Called with a launch just received (its message text, len bytes): when it needs a download (a
 * checkpoint to resume from, a code package) this node's caches lack, hands it to the
 * preparation thread and returns true; the event loop launches it later (agent__prepare_poll).
 * False: launch it now, nothing to fetch. */
bool agent__prepare_launch(struct agent *a, const struct aproto_launch *l, const char *text,
                           size_t len);
/* A stop of (job, attempt) (job NULL: every job; attempt -1: every attempt) that arrives while
 * its launch waits for downloads: the launch is dropped when they are done. */
void agent__prepare_cancel(struct agent *a, const char *job_id, int64_t attempt);
/* From the event loop's timer: launches the launches whose downloads are done. */
void agent__prepare_poll(struct agent *a);

/* code.c: code packages (issue 15) */
/* The path of the private copy of code package `sha256` for (job, attempt) on this node,
 * <data>/code/run/<job>/<attempt>, which agent__code_unpack fills from the node's cache
 * <data>/code/<sha256>/package.tar.gz (fetched from the server once, its SHA-256 verified, then
 * kept; with may_fetch false a cache miss fails). Returns the malloc'd path, or NULL with *why
 * set to a static reason (logged). */
char *agent__code_prepare(struct agent *a, const char *job_id, int64_t attempt, const char *sha256,
                          bool may_fetch, const char **why);
/* The same for a checkpoint directory uploaded as a package (a launch's checkpoint_package):
 * <data>/code/run/<job>/<attempt>.checkpoint, the workers' TRAINYARD_CHECKPOINT_DIR. */
#define AGENT_CHECKPOINT_COPY_SUFFIX ".checkpoint"
char *agent__code_checkpoint_prepare(struct agent *a, const char *job_id, int64_t attempt,
                                     const char *sha256, bool may_fetch, const char **why);
/* Fills this node's cache of code package `sha256` for (job_id, attempt) (fetching it when
 * absent; blocks the caller). 0, or -1 with *why set (a full disk is told: agent__disk_full). */
int agent__code_fetch(struct agent *a, const char *job_id, int64_t attempt, const char *sha256,
                      const char **why);
/* Unpacks package `sha256` from the node's cache into the private copy `dir` (the path
 * agent__code_prepare or agent__code_checkpoint_prepare returned) as the worker's uid and gid
 * (agent__unpack), unless another worker of the attempt already did; `what` names the package
 * in messages. 0, or -1 with err set to the job's error. */
int agent__code_unpack(struct agent *a, const struct agent_worker *w, const char *dir,
                       const char *sha256, const char *what, char *err, size_t errlen);
/* Whether this node's cache holds package `sha256`. */
bool agent__code_cached(const struct agent *a, const char *sha256);
/* Trims the node's code cache (<data>/code/<sha256>) to --code-cache-bytes: removes the least
 * recently used packages first, never one a running worker was launched with or a pending
 * launch waits for. Event loop only. */
void agent__code_trim(struct agent *a);
/* During a launch, before its workers are recorded (adopt.c keeps the packages in each worker's
 * record, so a restarted agent still knows them): notes on each started worker (workers[i]
 * non-NULL) the packages it runs with (code_sha256, ckpt_sha256: NULL for none). The launch
 * trims the cache afterwards if it used one. */
void agent__code_track(struct agent_worker **workers, size_t n, const char *code_sha256,
                       const char *ckpt_sha256);
/* Whether a launch waiting in the preparation thread (queued, being fetched or done) needs
 * package `sha256`. */
bool agent__prepare_wants(struct agent *a, const char *sha256);
/* Removes the private copies (code, checkpoint) of (job, attempt) on this node, if any. */
void agent__code_release(struct agent *a, const char *job_id, int64_t attempt);
/* Keeps a credential the server minted (durably, 0600) and uses it from now on. 0 or -1. */
int agent__credential_save(struct agent *a, const char *credential);
/* Reads or creates <data>/node-id. Returns malloc'd id or NULL (logged). */
char *agent__node_id_load(const char *data_dir, const char *declared);
int64_t agent__detect_cpus(void);
int64_t agent__detect_memory_mb(void);
/* nvml.c: GPUs through NVML (dlopen'ed from `library`, NULL: libnvidia-ml.so.1). Returns the
 * number of GPUs with *gpus their indices and *info their identity and first sample (both
 * malloc'd, NULL when 0); 0 GPUs (logged) when the library is missing or fails. */
size_t agent__detect_gpus(const char *library, int **gpus, struct agent_gpu **info);
/* Samples the n GPUs of `info` again (use, temperature, power) in the session discovery opened
 * (initialising NVML once more when it fails), marking those whose index no longer has a device,
 * or has one with another UUID, as lost, and those with a pending critical Xid that takes them
 * down as lost with that xid. 0, or -1 when NVML fails again (all marked lost). */
int agent__sample_gpus(const char *library, struct agent_gpu *info, size_t n);
/* Whether a critical Xid error makes its GPU unhealthy (out of the node), per NVIDIA's guidance
 * (docs/gpu.md): false for application faults and the Xids the GPU survives. */
bool agent__xid_takes_gpu_down(unsigned long long xid);
/* Shuts down the agent's NVML session, if open. */
void agent__nvml_close(void);
/* From the poll loop: every --gpu-sample-interval seconds while registered, samples the GPUs
 * NVML found, takes lost ones out of a->gpus (the next register offers fewer) and sends them in
 * a `gpus` message. */
void agent__gpus_tick(struct agent *a);

/* spool.c */
/* Writes body durably to the spool (write + fdatasync + rename + directory fsync). Returns the
 * malloc'd path, or NULL (logged). *dup is set when the same report is already spooled. */
char *agent__spool_write(struct agent *a, const json_t *body, bool *dup);
/* True when report (job, attempt, rank, report_seq) is already in the spool (acked before). */
bool agent__spool_has(struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                      int64_t report_seq);
/* Queues every spooled report as a report event (start-up). */
void agent__spool_reload(struct agent *a);
/* Writes a worker's exit durably (<data>/spool/<job>.<attempt>.<rank>.exit) before its
 * worker_exited is queued. Returns the malloc'd path (the event deletes it when acked), or NULL
 * (logged: the exit then lives in memory only). */
char *agent__spool_exit(struct agent *a, const struct agent_worker *w);
/* Start-up: puts every spooled exit back into the worker table (EXITED, so that `register` lists
 * it) and queues its worker_exited again. */
void agent__spool_reload_exits(struct agent *a);

/* report.c */
int agent__report_listen(struct agent *a);
void agent__report_close_all(struct agent *a);
/* Called when events were acked: once the queue is down to three quarters of
 * --max-queued-bytes, resumes reading the report connections paused while it was full. */
void agent__report_queue_drained(struct agent *a);
/* From the poll timer: accepting on the report socket again once a pause for want of
 * descriptors is over. */
void agent__report_poll(struct agent *a);

/* progress.c */
struct rproto_progress;
/* Keeps worker w's heartbeat p (a `progress` frame on the report socket). */
void agent__progress_note(struct agent_worker *w, const struct rproto_progress *p);
/* Poll timer: at most once a second, sends the server one `progress` message with the last
 * heartbeat of every running worker that sent one. */
void agent__progress_tick(struct agent *a);

/* usage.c */
/* Poll timer: about once a second, sends the server one `usage` message with what every running
 * worker with a cgroup used so far (CPU time, memory now and at most). */
void agent__usage_tick(struct agent *a);
/* Sends the server w's last sample, marked final, once it exited (before its cgroups go). */
void agent__usage_final(struct agent *a, struct agent_worker *w);

/* ws.c */
int agent__ws_init(struct agent *a);
/* Queues a control message (takes ownership of text) and asks for WRITEABLE. */
void agent__ws_send_ctl(struct agent *a, char *text);
/* Asks for WRITEABLE when connected and something is pending. */
void agent__ws_kick(struct agent *a);
void agent__ws_fini(struct agent *a);
/* Frees the timers; after lws_context_destroy. */
void agent__ws_free_timers(struct agent *a);

/* The lws protocol table (ws.c): the agent client and the raw report-socket protocol. */
const struct lws_protocols *agent__protocols(void);

#endif

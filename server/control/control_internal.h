/* Shared by control*.c only. All of it is touched by the control thread alone, except the fields
 * marked as guarded by `lock`. */
#ifndef SRV_CONTROL_INTERNAL_H
#define SRV_CONTROL_INTERNAL_H

#include "agent_proto.h"
#include "control.h"
#include "db.h"
#include "hub.h"
#include "jobspec.h"
#include "store.h"

#include <jansson.h>
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>

/* The types of a node's conditions (nodes.conditions, migration 0033): its agent's uploads or
 * fetches fail (control_store.c); its data directory is below --disk-pressure-mb
 * (control_agent.c). */
#define CTL_CONDITION_STORE "artifact-store-unreachable"
#define CTL_CONDITION_DISK "disk-pressure"

struct ctl_node {
    struct ctl_node *next;
    char *id;
    uint64_t conn;    /* 0 while the agent is not connected */
    double last_seen; /* monotonic seconds */
    double flushed;   /* the last_seen last written to the database (control_ha.c) */
    bool alive;
    bool disk_known;      /* disk_free_mb and disk_pressure were stored since it registered */
    bool disk_pressure;   /* as stored in nodes.disk */
    int64_t disk_free_mb; /* as stored in nodes.disk */
};

struct ctl_stop_sent {
    struct ctl_stop_sent *next;
    int64_t job;
    double at;
};

/* A RUNNING elastic job below its max for which the scheduling passes have found room for more
 * workers since `since` (control_sched.c, growth probes). */
struct ctl_grow {
    struct ctl_grow *next;
    int64_t job;
    double since;
};

/* The control loop's tick: its timed duties (control_thread), and its longest sleep. */
#define CTL_TICK_MS 200

/* worker_started messages received but not yet committed (control_agent.c): consecutive ones
 * are recorded in one transaction, then acked. */
#define CTL_STARTED_MAX 128
struct ctl_started {
    size_t n;
    struct store_worker_start rows[CTL_STARTED_MAX];
    uint64_t conn[CTL_STARTED_MAX];
    json_int_t seq[CTL_STARTED_MAX]; /* to ack, when has_seq */
    bool has_seq[CTL_STARTED_MAX];
};

/* Reports received but not yet committed (control_report.c): queued per lane (struct ctl_queue,
 * struct ctl_flight below), then stored in batches (struct ctl_reports) of at most
 * CTL_BATCH_MAX, one statement each, and acked once committed. A lane queues up to 8 batches
 * before the loop waits for it: the hub's events come in one queue, so while the loop waits for
 * one lane the agents of the others are not read. One queue of one batch for all lanes filled
 * with the reports of the lane whose batch was running, and the other lane's batches held a few
 * reports (issue 27). */
#define CTL_BATCH_MAX 512
#define CTL_QUEUE_MAX (8 * CTL_BATCH_MAX)
struct ctl_report_item {
    uint64_t conn;
    struct aproto_report r; /* owned: aproto_report_free */
    bool acked;             /* may be acked once the batch is done */
};
struct ctl_reports {
    size_t n;
    struct ctl_report_item items[CTL_BATCH_MAX];
};
struct ctl_queue {
    size_t n;
    struct ctl_report_item items[CTL_QUEUE_MAX];
};
/* A batch of reports whose statement may be running (conn not NULL: on that pooled
 * connection) while the control thread reads the next messages (control_report.c). One per
 * lane: a connection's reports all go by lane conn % CTL_LANES, so that batches of different
 * agents are stored by several PostgreSQL backends at once (one backend was the bound: issue
 * 27) while each agent's reports are stored and acked in its order. */
#define CTL_LANES 2
struct ctl_flight {
    struct ctl_reports b;
    struct db_conn *conn;
    size_t n; /* rows: b's reports from nodes still attached; idx: their places in b */
    struct store_report rows[CTL_BATCH_MAX];
    struct store_report_outcome outs[CTL_BATCH_MAX];
    int64_t steps[CTL_BATCH_MAX];
    size_t idx[CTL_BATCH_MAX];
    struct store_report_names names;   /* the rows' names not known stored (report_names.h) */
    bool names_sent;                   /* with the statement: settled once it committed */
    struct store_report_blocks blocks; /* the blocks summed up as the rows were made
                                        * (report_fold.h), sent with them */
};

/* log messages received but not yet committed (control_logs.c): all of them are committed in one
 * transaction once the hub queue is drained (or the batch is full), then acked. */
#define CTL_LOGS_MAX 1024
struct ctl_logs {
    size_t n;
    json_t *rows; /* array of ty_log_append_batch rows */
    uint64_t conn[CTL_LOGS_MAX];
    int64_t seq[CTL_LOGS_MAX];
};

/* Parsed specs of pending jobs (control_specs.c). */
struct ctl_spec;
struct ctl_specs {
    struct ctl_spec **slots;
    size_t cap, count;
    unsigned pass;
};

/* A placement announced by another server (control_ha.c): launch its workers connected here. */
struct ctl_launch_note {
    int64_t job;
    int attempt;
};

/* A waiting job whose Slurm allocation runs and was not used by an attempt yet (control_slurm.c).
 */
struct ctl_slurm_ready {
    int64_t job;
    int64_t slurm_job_id;
};

struct slurm_client;
struct control {
    struct srv *srv;
    struct hub *hub;
    struct db_conn *db;
    pthread_t thread;
    pthread_mutex_t lock;
    pthread_cond_t cond;
    bool kicked;     /* guarded by lock */
    int64_t *forget; /* guarded by lock: deleted jobs to tell the agents about */
    size_t nforget, forget_cap;
    bool stopping; /* guarded by lock */
    bool woken;    /* guarded by lock: the hub queued events */
    bool polling;  /* guarded by lock: the loop waits in poll() for its batches or wake_fd */
    int wake_fd;   /* eventfd, written by ctl__signal_locked while `polling` */
    bool dirty;    /* a scheduling pass is due */
    bool gained;   /* ... and capacity was added since the last one (a node, freed resources) */
    bool tune_due; /* reports were committed since the trial schedulers last read them */
    bool sweeps;   /* a sweep was RUNNING at the last tick (control_tune.c) */
    double last_pass;
    double last_pass_cost; /* seconds the last scheduling pass took */
    bool last_pass_placed; /* the last scheduling pass placed a job */
    double last_tick;
    double last_ckpt_deletes; /* when ctl__send_ckpt_deletes last ran */
    double last_heard;        /* when this server's --public-url was last written (servers) */
    double last_upload_gc;    /* when gc_uploads (control.c) last ran */
    double last_hang_check;   /* control_hang.c */
    char *cluster_token_hash; /* NULL: agents need no token (--auth none) */
    struct ctl_node *nodes;
    struct ctl_stop_sent *stops;
    struct ctl_grow *grows;
    struct ctl_specs specs;
    struct ctl_started started;
    struct ctl_queue queued[CTL_LANES]; /* the reports of each lane, not yet sent */
    struct ctl_flight flights[CTL_LANES];
    struct report_names *known_names; /* NULL: none yet (the reports' trigger finds them) */
    struct report_fold *fold;         /* NULL: none yet (the maintenance sums up every block) */
    struct ctl_logs logs;
    /* Several servers on one database (control_ha.c, leader.h). */
    struct leader *leader;
    /* The maintenance of report_blocks (control_report.c): its thread and its stop. */
    pthread_t blocks_thread;
    pthread_mutex_t blocks_lock;
    pthread_cond_t blocks_cond;
    bool blocks_started;
    bool blocks_stopping;          /* guarded by blocks_lock */
    char instance[40];             /* this server's id in launch notifications */
    bool leading;                  /* as of the start of this loop iteration */
    double lead_since;             /* monotonic seconds */
    bool remote_kick;              /* guarded by lock: a follower asked for a pass */
    bool resync;                   /* guarded by lock: notifications may have been lost */
    struct ctl_launch_note *notes; /* guarded by lock */
    size_t nnotes, notes_cap;
    /* --slurm (control_slurm.c): NULL without it. */
    struct slurm_client *slurm;
    char *slurm_cluster_token;           /* the cluster token the allocations' agents join with */
    double slurm_last;                   /* when the allocations were last looked at */
    double slurm_asked;                  /* when slurmrestd was last asked about them */
    struct ctl_slurm_ready *slurm_ready; /* as of that look */
    size_t nslurm_ready;
    int64_t *remote_forget; /* guarded by lock: jobs deleted through other servers */
    size_t nremote_forget, remote_forget_cap;
};

struct ctl_node *ctl__node_by_conn(struct control *ctl, uint64_t conn);
struct ctl_node *ctl__node_by_id(struct control *ctl, const char *id);
/* Sends `checkpoint_delete` to the agents connected here for the checkpoints retention deleted
 * on their nodes (migration 0021), and drops those rows. Control thread. */
void ctl__send_ckpt_deletes(struct control *ctl);

/* control_tune.c: sweeps on the leader (submits trials, runs the trial schedulers). The tick
 * reads the new results and then submits the next trials; ctl__tune_results only reads the
 * results, as soon as reports were committed (a rung's decision follows its report). */
void ctl__tune_tick(struct control *ctl);
void ctl__tune_results(struct control *ctl);
/* control_job_stop.c: plain jobs' stopping criteria (run_config.stop) on the leader. */
void ctl__job_stop_tick(struct control *ctl);

/* control_enrol.c */
#define CTL_CREDENTIAL_MAX 48 /* a minted node credential ("tyn_" + 40 hex) and its NUL */
struct aproto_node_msg;
/* Decides whether `reg` may register its node id: with that node's credential, or with the
 * cluster token when the node is new, LOST or has none; then a new credential is minted into
 * minted (its SHA-256 hex into minted_hash) for the caller to store and send. Both are "" when
 * nothing was minted (the credential was proven, or --auth none). Returns 0, or -1 with the
 * reason for the agent in why. */
int ctl__enrol(struct control *ctl, const struct aproto_node_msg *reg,
               char minted[CTL_CREDENTIAL_MAX], char minted_hash[65], char *why, size_t whylen);
/* Sends a message built by common/agent_proto.c to a connection (text taken over; NULL, out of
 * memory while building it, is logged and dropped). */
void ctl__send_text(struct control *ctl, uint64_t conn, char *text);
/* Wakes the control loop (ctl->lock held): its condition variable, or its poll() on the batches
 * in flight (control_report.c). */
void ctl__signal_locked(struct control *ctl);

/* control_agent.c */
/* Handles one agent message. A worker_started is only queued (ctl->started): the caller must
 * call ctl__flush_started() once the hub queue is drained and before any other hub event. */
void ctl__on_agent_message(struct control *ctl, uint64_t conn, const char *text, size_t len);
/* Commits the queued worker_started messages in one transaction and acks them. When that fails,
 * applies them one by one as before: each that fails closes its connection, so that the agent
 * resends what was not acked. */
void ctl__flush_started(struct control *ctl);
/* control_report.c: agent message `report`, parsed. Queues it in its connection's lane (taking
 * over m->report); with the lane's queue full, waits until the lane takes some. The caller must
 * call ctl__flush_reports(ctl, conn) before any other message or event of that connection. */
void ctl__queue_report(struct control *ctl, uint64_t conn, struct aproto_node_msg *m);
/* Waits until every report queued from connection `conn` is committed (its lane's batches, in
 * their order; the other lanes go on meanwhile), its checkpoints registered and acked. When a
 * batch's transaction fails, its reports are applied one by one: a report the database refuses
 * is acked and dropped; one that cannot be committed closes its connection, so that the agent
 * resends what was not acked. */
void ctl__flush_reports(struct control *ctl, uint64_t conn);
/* ctl__flush_reports without waiting, per lane (struct ctl_flight): each lane whose batch is
 * done is finished (acks) and sends its queued reports as one statement on a pooled connection,
 * so that PostgreSQL stores them while the control thread reads the next messages; a lane whose
 * batch is still running keeps its reports queued. With the queue full, waits until a lane
 * takes some; with `wait` (a round without messages), waits until a lane's batch is done or the
 * loop is signalled (ctl__signal_locked), whichever comes first. Falls back to
 * ctl__flush_reports when no connection is free. */
void ctl__push_reports(struct control *ctl, bool wait);
/* Waits for the pushed batches, if any, and finishes them (acks). */
void ctl__finish_reports(struct control *ctl);
/* Frees the reports still queued, not acked (at stop, after ctl__finish_reports): their agents
 * send them again. */
void ctl__reports_free(struct control *ctl);
/* True while a pushed batch is not finished: the control thread does not sleep then. */
bool ctl__reports_in_flight(const struct control *ctl);
/* The leader's maintenance of report_blocks, on a thread of its own (with a pooled connection
 * while it works), so that it runs beside the control thread's batches rather than between them:
 * the complete blocks of 16 reports that any writer stored are summed up in bulk
 * (store_report_blocks_fill), call after call while series move on, then again after a tick.
 * Reads combine the stored blocks with the reports not summed up yet. Start after
 * ctl__ha_start (it asks ctl->leader); stop before leader_stop. */
int ctl__report_blocks_start(struct control *ctl);
void ctl__report_blocks_stop(struct control *ctl);
/* control_logs.c: agent message `log`, queued (ctl->logs); ctl__flush_logs commits the queue in
 * one transaction and acks it. The caller flushes once the hub queue is drained and before a
 * message that changes a job's state (worker_exited, register, a closed connection). */
void ctl__on_log(struct control *ctl, struct ctl_node *node, uint64_t conn,
                 const struct aproto_node_msg *m);
void ctl__flush_logs(struct control *ctl);

/* control_hang.c: agent message `progress`, stored at once (one statement); and the hang check
 * of the periodic tick (at most once a second): names each hang once in the job's events and
 * fails the job past its hang_timeout_s. */
void ctl__on_progress(struct control *ctl, struct ctl_node *node, const struct aproto_node_msg *m);
/* control_gpus.c: agent message `gpus`, stored at once in nodes.gpus (one statement). */
void ctl__on_gpus(struct control *ctl, struct ctl_node *node, const struct aproto_node_msg *m);
/* control_usage.c: agent message `usage`, stored at once in worker_usage (one statement). */
void ctl__on_usage(struct control *ctl, struct ctl_node *node, const struct aproto_node_msg *m);
void ctl__check_hangs(struct control *ctl);
/* control_store.c: the REST base URL agent connection conn is told in `registered` into out (n
 * bytes): --public-url, else http(s)://<the host it dialled>:<--http-port>. 0, or -1 when there
 * is none to tell (no Host header). */
int ctl__api_url(struct control *ctl, uint64_t conn, char *out, size_t n);
/* control_store.c: the REST base URLs told to agent connection conn (at most max, malloc'd into
 * urls[]): the servers with a --public-url heard lately, the leader's first, then this server's
 * own (ctl__api_url) unless listed. Returns how many. */
size_t ctl__api_urls(struct control *ctl, uint64_t conn, char **urls, size_t max);
/* control_store.c: writes this server's --public-url to the servers table every few seconds
 * (periodic tick). */
void ctl__server_heard(struct control *ctl);
/* control_store.c: agent message `artifact_store`: the node's artifact-store-unreachable
 * condition set or cleared, and a failure an event of the job it was for. */
void ctl__on_artifact_store(struct control *ctl, struct ctl_node *node,
                            const struct aproto_node_msg *m);
/* control_store.c: agent message `disk_full`: an event of the job naming the node, the path and
 * ENOSPC. */
void ctl__on_disk_full(struct control *ctl, struct ctl_node *node, const struct aproto_node_msg *m);

/* control_specs.c: the parsed spec of a pending job, or NULL if not cached yet. */
const struct jobspec *ctl__spec_get(struct ctl_specs *t, int64_t id);
/* Parses and caches a spec; returns it, or NULL when it does not parse. */
const struct jobspec *ctl__spec_put(struct ctl_specs *t, int64_t id, const char *spec_json);
/* True (and remembered) when `message` differs from the last one recorded for the job. */
bool ctl__spec_message_changed(struct ctl_specs *t, int64_t id, const char *message);
/* Starts a pass: forgets the specs the previous pass did not use. */
void ctl__specs_next_pass(struct ctl_specs *t);
void ctl__specs_free(struct ctl_specs *t);

/* control_sched.c */
/* Runs one scheduling pass and launches what it placed. Returns how many jobs it placed. */
int ctl__schedule(struct control *ctl);
/* Sends `stop` to every node with a live worker of the job's current attempt. */
void ctl__send_stops(struct control *ctl, int64_t job);

/* control_launch.c */
/* Sends `launch` for the workers of job/attempt still PLACED (on one node, or all if NULL). */
void ctl__send_launches(struct control *ctl, int64_t job, int attempt, const char *node_id);
/* The same for a placement another server made: to the nodes connected here, quietly. */
void ctl__send_launches_here(struct control *ctl, int64_t job, int attempt);
/* Sends `launch` for every PLACED worker of the nodes connected here (after notifications may
 * have been lost). An agent ignores a launch it already has. */
void ctl__launch_placed_here(struct control *ctl);

/* control_slurm.c (--slurm) */
/* Connects the slurmrestd client when --slurm is set. 0, or -1 (logged: a bad URL). */
int ctl__slurm_start(struct control *ctl);
void ctl__slurm_stop(struct control *ctl);
/* Periodic tick: submits the allocations of waiting jobs, says what Slurm says of them in their
 * status messages and events, fails the jobs whose allocation Slurm rejects, cancels the
 * allocations of finished jobs and ended attempts. At most every 0.2 s, unless `now` (a job was
 * submitted or changed: no wait for the next look). */
void ctl__slurm_tick(struct control *ctl, bool now);
/* Before a pass: leaves out (specs[i] = NULL) the jobs with no unused allocation, and binds
 * the others to theirs, so that their workers go to that allocation's agents only. */
void ctl__slurm_filter(struct control *ctl, const int64_t *ids, size_t n,
                       const struct jobspec **specs);
/* After a placement: the attempt records the job's allocation. */
void ctl__slurm_placed(struct control *ctl, int64_t job, int attempt);
/* A `preempt_notice` from an agent (an ephemeral agent that got Slurm's warning signal): the
 * node is drained with preemption, its jobs checkpoint and restart on a new allocation. */
void ctl__slurm_preempt_notice(struct control *ctl, struct ctl_node *node, const char *reason);

/* control_ha.c */
/* Starts the leadership thread (leader.h) with this control's hooks. 0 or -1. */
int ctl__ha_start(struct control *ctl);
/* Once per loop iteration, before the hub's events: reads the leadership (a new leader runs a
 * pass at once), a follower's request for a pass, and sends the launches announced by other
 * servers. */
void ctl__ha_poll(struct control *ctl);
/* Every tick: writes when the nodes connected here were last heard from (closing those the
 * leader marked LOST meanwhile); the leader then marks LOST the nodes no server heard from for
 * --heartbeat-timeout-s (none during its first timeout as leader: the agents of a dead leader are
 * still reconnecting). */
void ctl__ha_tick(struct control *ctl);
/* A follower: asks the leader for a pass when one is due here (ctl->dirty). */
void ctl__ha_forward_kick(struct control *ctl);
/* Tells the other servers that job `id` was deleted through this one (they send `forget` to
 * their agents). */
void ctl__ha_announce_forget(struct control *ctl, int64_t id);

#endif

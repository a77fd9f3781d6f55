/* Trainyard's vocabulary, spelled once (STYLE.md "One vocabulary", DESIGN.md sections 2 and 11):
 * every name the API, the database and the dashboard share, as X-macros. C code expands them into
 * its enums and name tables (job_status.h, worker_status.h, node_status.h, jobspec.h, the
 * scheduler's strategies, the SDK's and the agent's backends). The other languages get them from
 * here:
 * - JavaScript: `vocab-dump js` (vocab_dump.c, run by CMake) writes <build>/vocab/vocab.js, which
 *   the dashboard imports as the module `vocab` (web/vite.config.js); nothing generated is
 *   committed.
 * - Python (worker/python/trainyard/train/_vocab.py), the OpenAPI enums (server/api/openapi.json)
 *   and the database (job_statuses, the status columns' constraints, job_transitions' events, the
 *   names SQL functions use) keep their own spelling; tests compare each with `vocab-dump json`
 *   (<build>/vocab/vocab.json) and fail on any difference: tests/unit/python/test_vocab.py,
 *   tests/integration/test_openapi.py, tests/integration/test_vocab_sql.py.
 * Append only: the strings are the API's. Pure macros: no includes, nothing to link. */
#ifndef TY_VOCAB_H
#define TY_VOCAB_H

/* X(NAME, terminal): every job status in lifecycle order (DESIGN.md section 2). */
#define JOB_STATUS_MAP(X)                                                                          \
    X(PENDING, false)                                                                              \
    X(STARTING, false)                                                                             \
    X(RUNNING, false)                                                                              \
    X(RESTARTING, false)                                                                           \
    X(STOPPING, false)                                                                             \
    X(SUCCEEDED, true)                                                                             \
    X(FAILED, true)                                                                                \
    X(STOPPED, true)

/* X(NAME, live): a worker's status; a live worker holds its node's resources (it is placed or
 * running), which is what the scheduler and GET /api/v1/nodes count. */
#define WORKER_STATUS_MAP(X)                                                                       \
    X(PLACED, true)                                                                                \
    X(RUNNING, true)                                                                               \
    X(EXITED, false)                                                                               \
    X(LOST, false)

/* X(NAME): a node's status: ALIVE while heartbeats arrive, LOST after the heartbeat timeout. */
#define NODE_STATUS_MAP(X)                                                                         \
    X(ALIVE)                                                                                       \
    X(LOST)

/* X(NAME): a checkpoint's status: UPLOADING until all its files are stored, then COMMITTED;
 * DELETED by retention (num_to_keep). */
#define CHECKPOINT_STATUS_MAP(X)                                                                   \
    X(UPLOADING)                                                                                   \
    X(COMMITTED)                                                                                   \
    X(DELETED)

/* X(NAME): a sweep's status (migrations/0037_sweeps.sql, docs/sweeps.md): RUNNING while trials
 * remain to run or finish, SUCCEEDED once all finished, STOPPED when a user stopped it. */
#define SWEEP_STATUS_MAP(X)                                                                        \
    X(RUNNING)                                                                                     \
    X(SUCCEEDED)                                                                                   \
    X(STOPPED)

/* X(NAME, "name"): the events of the job state machine (docs/lifecycle.md, the event column of
 * table job_transitions). */
#define JOB_EVENT_MAP(X)                                                                           \
    X(SUBMIT, "submit")                                                                            \
    X(PLACE, "place")                                                                              \
    X(RUNNING, "running")                                                                          \
    X(WORKER_FAILED, "worker_failed")                                                              \
    X(TIMEOUT, "timeout")                                                                          \
    X(NODE_LOST, "node_lost")                                                                      \
    X(STOP, "stop")                                                                                \
    X(SUCCEEDED, "succeeded")                                                                      \
    X(STOPPED, "stopped")                                                                          \
    X(FAILED, "failed")                                                                            \
    X(DELETE, "delete")                                                                            \
    X(RETRY, "retry")                                                                              \
    X(PREEMPTED, "preempted")                                                                      \
    X(RESIZE, "resize")

/* X(NAME, "name"): the job spec's `backend`; the first is the default. */
#define JOBSPEC_BACKEND_MAP(X)                                                                     \
    X(TORCH, "torch")                                                                              \
    X(TENSORFLOW, "tensorflow")                                                                    \
    X(NATIVE, "native")                                                                            \
    X(NONE, "none")

/* X(NAME): scaling_config.placement_strategy; the first is the default. */
#define JOBSPEC_STRATEGY_MAP(X)                                                                    \
    X(PACK)                                                                                        \
    X(SPREAD)                                                                                      \
    X(STRICT_PACK)                                                                                 \
    X(STRICT_SPREAD)

/* X(NAME, "name"): run_config.checkpoint_config.checkpoint_score_order; the first is the
 * default. */
#define JOBSPEC_SCORE_ORDER_MAP(X)                                                                 \
    X(MAX, "max")                                                                                  \
    X(MIN, "min")

/* X(NAME, "name"): the output stream of a worker's log line (docs/streams.md); the first is the
 * default (log chunks of older agents, rows stored before migration 0045). */
#define TY_LOG_STREAM_MAP(X)                                                                       \
    X(STDOUT, "stdout")                                                                            \
    X(STDERR, "stderr")

/* X(NAME, "name"): the kinds of a job stream's rows (job_stream.kind, the `kind` of /stream's
 * job events; docs/streams.md). */
#define TY_STREAM_KIND_MAP(X)                                                                      \
    X(EVENT, "event")                                                                              \
    X(WORKER, "worker")                                                                            \
    X(REPORT, "report")                                                                            \
    X(LOG, "log")                                                                                  \
    X(LOG_DROPPED, "log_dropped")                                                                  \
    X(CHECKPOINT, "checkpoint")                                                                    \
    X(USAGE, "usage")

#endif

/* A job's workers, events and attempts as JSON (GET /jobs/{id}/workers, /events, /attempts). */
#include "store.h"

#include "db_query.h"

#include <stdio.h>

int store_job_workers(struct db_conn *c, int64_t job, char **json_out)
{
    static const struct db_stmt st = {
        "job_workers",
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint) THEN NULL ELSE "
        " coalesce(jsonb_agg(jsonb_build_object('attempt', w.attempt, 'rank', w.rank, "
        "  'local_rank', w.local_rank, 'node_rank', w.node_rank, 'node_id', w.node_id, "
        "  'gpus', to_jsonb(w.gpus), 'resources', w.resources, 'status', w.status, 'pid', w.pid, "
        "  'exit_code', w.exit_code, 'signal', w.signal, 'started_at', ty_ts(w.started_at), "
        "  'finished_at', ty_ts(w.finished_at), 'progress', CASE WHEN p.rank IS NOT NULL THEN "
        "  jsonb_build_object('op', p.op, 'coll_seq', p.coll_seq, 'in_collective', "
        "  p.in_collective, 'report_seq', p.report_seq, 'progress_at', ty_ts(p.progress_at), "
        "  'heartbeat_at', ty_ts(p.heartbeat_at)) END, 'usage', CASE WHEN u.rank IS NOT NULL "
        "  THEN jsonb_build_object('cpu_seconds', (u.cpu_usec / 1e6)::float8, 'memory_bytes', "
        "  u.memory_bytes, 'memory_peak_bytes', u.memory_peak_bytes, 'final', u.final, "
        "  'sampled_at', ty_ts(u.sampled_at)) END) ORDER BY w.attempt, w.rank), '[]') "
        "END::text "
        "FROM workers w LEFT JOIN worker_progress p ON p.job_id = w.job_id "
        " AND p.attempt = w.attempt AND p.rank = w.rank "
        "LEFT JOIN worker_usage u ON u.job_id = w.job_id AND u.attempt = w.attempt "
        " AND u.rank = w.rank WHERE w.job_id = $1::bigint",
        1, true};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    return db_exec_text(c, &st, p, json_out);
}

int store_job_events(struct db_conn *c, int64_t job, char **json_out)
{
    static const struct db_stmt st = {
        "job_events",
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint) THEN NULL ELSE "
        " coalesce(jsonb_agg(jsonb_build_object('attempt', e.attempt, 'status', e.status, "
        "  'message', e.message, 'at', ty_ts(e.at)) ORDER BY e.id), '[]') END::text "
        "FROM job_events e WHERE e.job_id = $1::bigint",
        1, true};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    return db_exec_text(c, &st, p, json_out);
}

int store_job_attempts(struct db_conn *c, int64_t job, char **json_out)
{
    static const struct db_stmt st = {
        "job_attempts",
        "SELECT CASE WHEN NOT EXISTS (SELECT 1 FROM jobs WHERE id = $1::bigint) THEN NULL ELSE "
        " coalesce(jsonb_agg(jsonb_build_object('attempt', a.attempt, 'status', a.status, "
        "  'world_size', a.world_size, 'master_addr', a.master_addr, "
        "  'master_port', a.master_port, 'error', a.error, 'created_at', ty_ts(a.created_at), "
        "  'finished_at', ty_ts(a.finished_at), 'resumed_from_checkpoint', a.resumed_from, "
        "  'end_reason', a.end_reason, 'slurm_job_id', a.slurm_job_id) "
        "  || ty_attempt_startup(j, a) ORDER BY a.attempt), "
        "  '[]') END::text "
        "FROM attempts a JOIN jobs j ON j.id = a.job_id WHERE a.job_id = $1::bigint",
        1, true};
    char j[32];
    STORE_NUM(j, job);
    const char *p[] = {j};
    return db_exec_text(c, &st, p, json_out);
}

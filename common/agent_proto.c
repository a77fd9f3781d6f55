/* The agent protocol's builders (docs/agent-protocol.md, agent_proto.h): one function per
 * message, in both directions, each returning the message as a malloc'd JSON string. The
 * validating parsers are in agent_proto_parse.c. No I/O, no globals. */
#include "agent_proto.h"
#include "worker_status.h"

#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* Frees a json value on a failed step and nulls the pointer. */
#define DROP(o) (json_decref(o), (o) = NULL)

/* ------------------------------------------------------------------------------------------ */
/* Builders                                                                                     */
/* ------------------------------------------------------------------------------------------ */

/* Dumps and frees `o` (NULL in, NULL out). */
static char *dump_steal(json_t *o)
{
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

static json_t *int_or_null(int64_t v)
{
    return v < 0 ? json_null() : json_integer(v);
}

static json_t *str_or_null(const char *s)
{
    return s ? json_string(s) : json_null();
}

/* A worker state of `register` (new object), or NULL. */
static json_t *worker_state(const struct aproto_worker_event *w)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:s, s:o, s:o, s:o, s:s*}", "job_id", w->job_id,
                     "attempt", (json_int_t)w->attempt, "rank", (json_int_t)w->rank, "pid",
                     (json_int_t)w->pid, "status",
                     worker_status_name(w->exited ? WORKER_STATUS_EXITED : WORKER_STATUS_RUNNING),
                     "exit_code", int_or_null(w->exit_code), "signal", int_or_null(w->signal),
                     "error", str_or_null(w->error), "reason", w->reason);
}

char *aproto_msg_register(const struct aproto_node_info *n, const char *token,
                          const struct aproto_worker_event *workers, size_t n_workers)
{
    json_t *gpus = json_array();
    for (size_t i = 0; gpus && i < n->n_gpus; i++)
        json_array_append_new(gpus, json_integer(n->gpus[i]));
    json_t *res = json_pack("{s:I, s:I, s:o?}", "CPU", (json_int_t)n->cpus, "memory_mb",
                            (json_int_t)n->memory_mb, "GPU", gpus);
    if (!res)
        return NULL;
    if (n->custom)
        json_object_update_missing(res, (json_t *)n->custom);
    json_t *labels = n->labels ? json_deep_copy(n->labels) : json_object();
    json_t *node = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:o, s:[i,i]}", "id", n->id,
                             "hostname", n->hostname, "address", n->address, "resources", res,
                             "gpu_type", str_or_null(n->gpu_type), "labels", labels, "version",
                             str_or_null(n->version), "port_range", n->port_lo, n->port_hi);
    if (!node)
        return NULL;
    json_t *ws = json_array();
    for (size_t i = 0; ws && i < n_workers; i++)
        if (json_array_append_new(ws, worker_state(&workers[i])) != 0) {
            json_decref(ws);
            ws = NULL;
        }
    if (!ws) {
        json_decref(node);
        return NULL;
    }
    return dump_steal(json_pack("{s:s, s:o, s:o, s:o, s:s*}", "type", "register", "token",
                                str_or_null(token), "node", node, "workers", ws, "credential",
                                n->credential));
}

char *aproto_msg_heartbeat(const struct aproto_disk *disk)
{
    if (!disk)
        return dump_steal(json_pack("{s:s}", "type", "heartbeat"));
    return dump_steal(json_pack("{s:s, s:{s:s, s:I, s:I}}", "type", "heartbeat", "disk", "path",
                                disk->path, "free_mb", (json_int_t)disk->free_mb, "total_mb",
                                (json_int_t)disk->total_mb));
}

char *aproto_msg_worker_started(int64_t seq, const char *job_id, int64_t attempt, int64_t rank,
                                long pid, const struct aproto_startup *st)
{
    json_t *startup = NULL;
    if (st) {
        startup = json_object();
        const double v[] = {st->code_fetch_s, st->checkpoint_fetch_s, st->process_start_s};
        const char *k[] = {"code_fetch_s", "checkpoint_fetch_s", "process_start_s"};
        for (size_t i = 0; startup && i < 3; i++)
            if (v[i] >= 0)
                json_object_set_new(startup, k[i], json_real(v[i]));
    }
    return dump_steal(json_pack("{s:s, s:I, s:s, s:I, s:I, s:I, s:o*}", "type", "worker_started",
                                "seq", (json_int_t)seq, "job_id", job_id, "attempt",
                                (json_int_t)attempt, "rank", (json_int_t)rank, "pid",
                                (json_int_t)pid, "startup", startup));
}

char *aproto_msg_worker_exited(int64_t seq, const char *job_id, int64_t attempt, int64_t rank,
                               int exit_code, int signal, const char *error, const char *reason)
{
    return dump_steal(json_pack("{s:s, s:I, s:s, s:I, s:I, s:o, s:o, s:o, s:s*}", "type",
                                "worker_exited", "seq", (json_int_t)seq, "job_id", job_id,
                                "attempt", (json_int_t)attempt, "rank", (json_int_t)rank,
                                "exit_code", int_or_null(exit_code), "signal", int_or_null(signal),
                                "error", str_or_null(error), "reason", reason));
}

char *aproto_exit_words(int exit_code, int signal, const char *error, const char *reason)
{
    char how[64];
    if (error == NULL && signal >= 0) {
        const char *name = sigabbrev_np(signal);
        if (name)
            snprintf(how, sizeof(how), "was killed by SIG%s", name);
        else
            snprintf(how, sizeof(how), "was killed by signal %d", signal);
    } else if (error == NULL && exit_code > 0) {
        snprintf(how, sizeof(how), "exited with code %d", exit_code);
    } else if (error == NULL) {
        return NULL;
    }
    const char *head = error ? error : how;
    size_t n = strlen(head) + (reason ? strlen(reason) + 2 : 0) + 1;
    char *out = malloc(n);
    if (out)
        snprintf(out, n, "%s%s%s", head, reason ? ": " : "", reason ? reason : "");
    return out;
}

#define APROTO_LOG_STREAM_TEXT(name, text) text,
static const char *const log_streams[] = {TY_LOG_STREAM_MAP(APROTO_LOG_STREAM_TEXT)};

const char *aproto_log_stream_name(enum aproto_log_stream s)
{
    return (unsigned)s < APROTO_LOG_NSTREAMS ? log_streams[s] : log_streams[0];
}

int aproto_log_stream_from_string(const char *s)
{
    for (int i = 0; s && i < APROTO_LOG_NSTREAMS; i++)
        if (strcmp(s, log_streams[i]) == 0)
            return i;
    return -1;
}

char *aproto_msg_log(int64_t seq, const struct aproto_log_chunk *c)
{
    json_t *o = json_pack("{s:s, s:I, s:s, s:I, s:I, s:s, s:I, s:I, s:O}", "type", "log", "seq",
                          (json_int_t)seq, "job_id", c->job_id, "attempt", (json_int_t)c->attempt,
                          "rank", (json_int_t)c->rank, "stream", aproto_log_stream_name(c->stream),
                          "offset", (json_int_t)c->offset, "bytes", (json_int_t)c->bytes, "lines",
                          (json_t *)c->lines);
    if (o && c->dropped > 0 && json_object_set_new(o, "dropped", json_integer(c->dropped)) != 0)
        DROP(o);
    return dump_steal(o);
}

json_t *aproto_report_body(const char *job_id, int64_t attempt, int64_t rank, int64_t report_seq,
                           const json_t *metrics, int64_t step, const char *time_rfc3339,
                           const char *checkpoint_dir)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:O, s:o, s:s, s:o}", "job_id", job_id, "attempt",
                     (json_int_t)attempt, "rank", (json_int_t)rank, "report_seq",
                     (json_int_t)report_seq, "metrics", (json_t *)metrics, "step",
                     int_or_null(step), "time", time_rfc3339, "checkpoint_dir",
                     str_or_null(checkpoint_dir));
}

char *aproto_msg_report(int64_t seq, const json_t *body)
{
    json_t *o = json_deep_copy(body);
    if (!o)
        return NULL;
    if (json_object_set_new(o, "type", json_string("report")) != 0 ||
        json_object_set_new(o, "seq", json_integer(seq)) != 0) {
        json_decref(o);
        return NULL;
    }
    return dump_steal(o);
}

void aproto_format_time(int64_t ms, char *out, size_t outlen)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[32];
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outlen, "%s.%03dZ", buf, (int)(ms % 1000));
}

/* ------------------------------------------------------------------------------------------ */
/* Builders: server -> agent                                                                    */
/* ------------------------------------------------------------------------------------------ */

char *aproto_msg_registered(const char *node_id, int64_t heartbeat_interval_s,
                            const char *credential, const char *const *api_urls, size_t n_api_urls)
{
    json_t *msg = json_pack("{s:s, s:s, s:I, s:s*}", "type", "registered", "node_id", node_id,
                            "heartbeat_interval_s", (json_int_t)heartbeat_interval_s, "credential",
                            credential);
    json_t *urls = msg && n_api_urls > 0 ? json_array() : NULL;
    for (size_t i = 0; urls && i < n_api_urls; i++)
        if (json_array_append_new(urls, json_string(api_urls[i])) != 0) {
            json_decref(urls);
            urls = NULL;
        }
    if (msg && n_api_urls > 0 && (!urls || json_object_set_new(msg, "api_urls", urls) != 0)) {
        json_decref(msg);
        msg = NULL;
    }
    return dump_steal(msg);
}

char *aproto_msg_error(const char *message)
{
    return dump_steal(json_pack("{s:s, s:s}", "type", "error", "message", message));
}

char *aproto_msg_ack(int64_t seq)
{
    return dump_steal(json_pack("{s:s, s:I}", "type", "ack", "seq", (json_int_t)seq));
}

char *aproto_msg_stop(const char *job_id, int64_t attempt, int64_t grace_s, int64_t notice_s)
{
    json_t *o = json_pack("{s:s, s:s}", "type", "stop", "job_id", job_id);
    if (o && attempt >= 0 && json_object_set_new(o, "attempt", json_integer(attempt)) != 0)
        DROP(o);
    if (o && grace_s >= 0 && json_object_set_new(o, "grace_s", json_integer(grace_s)) != 0)
        DROP(o);
    if (o && notice_s > 0 && json_object_set_new(o, "notice_s", json_integer(notice_s)) != 0)
        DROP(o);
    return dump_steal(o);
}

char *aproto_msg_forget(const char *job_id)
{
    return dump_steal(json_pack("{s:s, s:s}", "type", "forget", "job_id", job_id));
}

char *aproto_msg_preempt_notice(const char *reason)
{
    return dump_steal(json_pack("{s:s, s:s}", "type", "preempt_notice", "reason", reason));
}

char *aproto_msg_checkpoint_delete(const char *job_id, int64_t attempt, int64_t index)
{
    return dump_steal(json_pack("{s:s, s:s, s:I, s:I}", "type", "checkpoint_delete", "job_id",
                                job_id, "attempt", (json_int_t)attempt, "index",
                                (json_int_t)index));
}

/* [{"rank", "local_rank", "gpus"}...] of a launch (new array), or NULL. */
static json_t *launch_workers(const struct aproto_launch *l)
{
    json_t *ws = json_array();
    for (size_t i = 0; ws && i < l->n_workers; i++) {
        const struct aproto_launch_worker *w = &l->workers[i];
        json_t *gpus = json_array();
        for (size_t g = 0; gpus && g < w->n_gpus; g++)
            if (json_array_append_new(gpus, json_integer(w->gpus[g])) != 0)
                DROP(gpus);
        json_t *o = json_pack("{s:I, s:I, s:o}", "rank", (json_int_t)w->rank, "local_rank",
                              (json_int_t)w->local_rank, "gpus", gpus);
        if (json_array_append_new(ws, o) != 0 || o == NULL)
            DROP(ws);
    }
    return ws;
}

char *aproto_msg_launch(const struct aproto_launch *l)
{
    json_t *ra = NULL;
    if (l->rank_addresses) {
        ra = json_array();
        for (int64_t r = 0; ra && r < l->world_size; r++)
            if (json_array_append_new(ra, json_string(l->rank_addresses[r])) != 0)
                DROP(ra);
        if (!ra)
            return NULL;
    }
    json_t *workers = launch_workers(l);
    if (!workers) {
        json_decref(ra);
        return NULL;
    }
    return dump_steal(json_pack(
        "{s:s, s:s, s:I, s:s?, s:O, s:o, s:O?, s:O?, s:I, s:I, s:I, s:I, s:s, s:I, s:o, s:o?, "
        "s:o, s:s?, s:o?, s:s*, s:s*, s:s*, s:{s:I, s:I}}",
        "type", "launch", "job_id", l->job_id, "attempt", (json_int_t)l->attempt, "backend",
        l->backend, "entrypoint", (json_t *)l->entrypoint, "working_dir",
        str_or_null(l->working_dir), "env", (json_t *)l->env, "config", (json_t *)l->config,
        "world_size", (json_int_t)l->world_size, "num_nodes", (json_int_t)l->num_nodes, "node_rank",
        (json_int_t)l->node_rank, "local_world_size", (json_int_t)l->local_world_size,
        "master_addr", l->master_addr, "master_port", (json_int_t)l->master_port, "checkpoint_dir",
        str_or_null(l->checkpoint_dir), "rank_addresses", ra, "workers", workers,
        "rendezvous_secret", l->rendezvous_secret, "checkpoint_fetch",
        l->checkpoint_fetch_id > 0 && l->checkpoint_fetch_sha256
            ? json_pack("{s:I, s:s, s:s*}", "id", (json_int_t)l->checkpoint_fetch_id, "sha256",
                        l->checkpoint_fetch_sha256, "shared", l->checkpoint_fetch_shared)
            : NULL,
        "code_package", l->code_sha256, "storage_path", l->storage_path, "checkpoint_package",
        l->checkpoint_package, "limits", "cpu_milli", (json_int_t)l->cpu_milli, "memory_mb",
        (json_int_t)l->memory_mb));
}

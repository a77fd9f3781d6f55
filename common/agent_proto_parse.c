/* The agent protocol's parsers (docs/agent-protocol.md, agent_proto.h): a validating parser for
 * every message in both directions (server -> agent: aproto_server_msg_parse, launch included;
 * agent -> server: aproto_node_msg_parse, with report/progress/gpus/usage in agent_proto_report.c,
 * agent_proto_progress.c, agent_proto_gpus.c and agent_proto_usage.c), and the frees of what they
 * fill. The builders are in agent_proto.c. No I/O, no globals. */
#include "agent_proto.h"
#include "agent_proto_internal.h"
#include "jobspec.h"
#include "util_json.h"
#include "worker_status.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)
/* " torch", " tensorflow", ...: the backends as one string literal. */
#define BACKEND_TEXT(name, text) " " text

/* ------------------------------------------------------------------------------------------ */
/* Parser                                                                                       */
/* ------------------------------------------------------------------------------------------ */

int aproto_job_id_valid(const char *id)
{
    if (!id || !*id || strlen(id) > APROTO_MAX_JOB_ID || strcmp(id, ".") == 0 ||
        strcmp(id, "..") == 0)
        return -1;
    for (const char *p = id; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return -1;
    }
    return 0;
}

/* String field: required=false allows absent/null (*out NULL). */
static int get_str(const json_t *o, const char *name, bool required, bool nonempty,
                   const char **out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, name);
    *out = NULL;
    if (!v || json_is_null(v)) {
        if (required)
            return ERR("'%s' is missing", name);
        return 0;
    }
    if (!json_is_string(v))
        return ERR("'%s' must be a string", name);
    if (nonempty && json_string_length(v) == 0)
        return ERR("'%s' must not be empty", name);
    if (strlen(json_string_value(v)) != json_string_length(v))
        return ERR("'%s' contains a NUL byte", name);
    *out = json_string_value(v);
    return 0;
}

void aproto_launch_free(struct aproto_launch *l)
{
    if (!l)
        return;
    for (size_t i = 0; l->workers && i < l->n_workers; i++)
        free(l->workers[i].gpus);
    free(l->workers);
    free(l->argv);
    free(l->rank_addresses);
    free(l->config_json);
    json_decref(l->root);
    memset(l, 0, sizeof(*l));
}

static int parse_launch_workers(const json_t *root, struct aproto_launch *l, char *err,
                                size_t errlen)
{
    json_t *ws = json_object_get(root, "workers");
    if (!json_is_array(ws) || json_array_size(ws) == 0)
        return ERR("'workers' must be a non-empty array");
    l->n_workers = json_array_size(ws);
    if ((int64_t)l->n_workers > l->world_size)
        return ERR("'workers' has more entries than world_size");
    l->workers = calloc(l->n_workers, sizeof(*l->workers));
    if (!l->workers)
        return ERR("out of memory");
    for (size_t i = 0; i < l->n_workers; i++) {
        json_t *w = json_array_get(ws, i);
        struct aproto_launch_worker *lw = &l->workers[i];
        char sub[200];
        if (!json_is_object(w))
            return ERR("'workers[%zu]' must be an object", i);
        if (util_json_int(w, "rank", false, 0, l->world_size - 1, &lw->rank, sub, sizeof(sub)) <
                0 ||
            util_json_int(w, "local_rank", false, 0, l->local_world_size - 1, &lw->local_rank, sub,
                          sizeof(sub)) < 0)
            return ERR("workers[%zu]: %s", i, sub);
        for (size_t j = 0; j < i; j++)
            if (l->workers[j].rank == lw->rank)
                return ERR("workers[%zu]: rank %lld appears twice", i, (long long)lw->rank);
        json_t *g = json_object_get(w, "gpus");
        if (g && !json_is_null(g)) {
            if (!json_is_array(g) || json_array_size(g) > APROTO_MAX_GPUS)
                return ERR("workers[%zu]: 'gpus' must be an array of GPU indices", i);
            lw->n_gpus = json_array_size(g);
            lw->gpus = calloc(lw->n_gpus ? lw->n_gpus : 1, sizeof(int));
            if (!lw->gpus)
                return ERR("out of memory");
            for (size_t j = 0; j < lw->n_gpus; j++) {
                json_t *x = json_array_get(g, j);
                if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                    json_integer_value(x) >= APROTO_MAX_GPUS)
                    return ERR("workers[%zu]: 'gpus[%zu]' must be a GPU index", i, j);
                lw->gpus[j] = (int)json_integer_value(x);
            }
        }
    }
    return 0;
}

static int parse_launch(json_t *root, struct aproto_launch *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof(*l));
    l->root = json_incref(root);
    if (get_str(root, "job_id", true, true, &l->job_id, err, errlen) != 0)
        return -1;
    if (aproto_job_id_valid(l->job_id) != 0)
        return ERR("'job_id' must be 1-200 characters of [A-Za-z0-9._-]");
    if (util_json_int(root, "attempt", false, 0, INT32_MAX, &l->attempt, err, errlen) < 0)
        return -1;
    if (get_str(root, "backend", false, true, &l->backend, err, errlen) != 0)
        return -1;
    enum jobspec_backend backend = JOBSPEC_BACKEND_TORCH;
    if (!l->backend)
        l->backend = jobspec_backend_name(backend);
    if (jobspec_backend_from_string(l->backend, &backend) != 0)
        return ERR("'backend' must be one of" JOBSPEC_BACKEND_MAP(BACKEND_TEXT));

    json_t *ep = json_object_get(root, "entrypoint");
    l->entrypoint = ep;
    if (json_is_string(ep)) {
        if (json_string_length(ep) == 0)
            return ERR("'entrypoint' must not be empty");
        l->argv = calloc(4, sizeof(char *));
        if (!l->argv)
            return ERR("out of memory");
        l->argv[0] = "/bin/sh";
        l->argv[1] = "-c";
        l->argv[2] = json_string_value(ep);
    } else if (json_is_array(ep)) {
        size_t n = json_array_size(ep);
        if (n == 0)
            return ERR("'entrypoint' must not be empty");
        l->argv = calloc(n + 1, sizeof(char *));
        if (!l->argv)
            return ERR("out of memory");
        for (size_t i = 0; i < n; i++) {
            json_t *s = json_array_get(ep, i);
            if (!json_is_string(s) || (i == 0 && json_string_length(s) == 0))
                return ERR("'entrypoint[%zu]' must be a%s string", i, i == 0 ? " non-empty" : "");
            l->argv[i] = json_string_value(s);
        }
    } else {
        return ERR("'entrypoint' must be an array of strings or a string");
    }

    if (get_str(root, "working_dir", false, false, &l->working_dir, err, errlen) != 0)
        return -1;
    if (l->working_dir && !*l->working_dir)
        l->working_dir = NULL;
    json_t *env = json_object_get(root, "env");
    if (env && !json_is_null(env)) {
        if (!json_is_object(env))
            return ERR("'env' must be an object of strings");
        const char *k;
        json_t *v;
        json_object_foreach(env, k, v)
        {
            if (!*k || strchr(k, '=') || !json_is_string(v))
                return ERR("'env.%s' must be a string with a name without '='", k);
        }
        l->env = env;
    } else {
        json_t *e = json_object();
        if (!e || json_object_set_new(root, "env", e) != 0) /* kept alive by root */
            return ERR("out of memory");
        l->env = e;
    }
    json_t *cfg = json_object_get(root, "config");
    l->config = cfg;
    l->config_json = cfg ? json_dumps(cfg, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("null");
    if (!l->config_json)
        return ERR("out of memory");

    if (util_json_int(root, "world_size", false, 1, 1 << 20, &l->world_size, err, errlen) < 0 ||
        util_json_int(root, "num_nodes", false, 1, 1 << 20, &l->num_nodes, err, errlen) < 0 ||
        util_json_int(root, "node_rank", false, 0, l->num_nodes - 1, &l->node_rank, err, errlen) <
            0 ||
        util_json_int(root, "local_world_size", false, 1, l->world_size, &l->local_world_size, err,
                      errlen) < 0 ||
        get_str(root, "master_addr", true, true, &l->master_addr, err, errlen) != 0 ||
        util_json_int(root, "master_port", false, 1, 65535, &l->master_port, err, errlen) < 0 ||
        get_str(root, "checkpoint_dir", false, false, &l->checkpoint_dir, err, errlen) != 0 ||
        get_str(root, "rendezvous_secret", false, true, &l->rendezvous_secret, err, errlen) != 0)
        return -1;
    if (l->rendezvous_secret && strlen(l->rendezvous_secret) > APROTO_MAX_SECRET)
        return ERR("'rendezvous_secret' is longer than %d bytes", APROTO_MAX_SECRET);
    if (l->checkpoint_dir && !*l->checkpoint_dir)
        l->checkpoint_dir = NULL;
    json_t *cf = json_object_get(root, "checkpoint_fetch");
    if (cf && !json_is_null(cf)) {
        json_t *cid = json_object_get(cf, "id");
        const char *sha = json_string_value(json_object_get(cf, "sha256"));
        if (!json_is_integer(cid) || json_integer_value(cid) <= 0 || sha == NULL ||
            strlen(sha) != 64 || strspn(sha, "0123456789abcdef") != 64)
            return ERR("'checkpoint_fetch' must be {\"id\": N, \"sha256\": 64 hex digits}");
        l->checkpoint_fetch_id = json_integer_value(cid);
        l->checkpoint_fetch_sha256 = sha;
        json_t *shared = json_object_get(cf, "shared");
        if (shared && !json_is_null(shared) &&
            (!json_is_string(shared) || json_string_value(shared)[0] != '/'))
            return ERR("'checkpoint_fetch.shared' must be an absolute path");
        l->checkpoint_fetch_shared = json_string_value(shared);
    }
    json_t *lim = json_object_get(root, "limits");
    if (lim && !json_is_null(lim)) {
        if (!json_is_object(lim) ||
            util_json_int(lim, "cpu_milli", true, 0, INT64_C(1) << 40, &l->cpu_milli, err, errlen) <
                0 ||
            util_json_int(lim, "memory_mb", true, 0, INT64_C(1) << 40, &l->memory_mb, err, errlen) <
                0)
            return ERR("'limits' must be {\"cpu_milli\": N, \"memory_mb\": N}");
    }
    json_t *sp = json_object_get(root, "storage_path");
    if (sp && !json_is_null(sp)) {
        if (!json_is_string(sp) || json_string_value(sp)[0] != '/')
            return ERR("'storage_path' must be an absolute path");
        l->storage_path = json_string_value(sp);
    }
    json_t *cp = json_object_get(root, "code_package");
    if (cp && !json_is_null(cp)) {
        const char *sha = json_string_value(cp);
        if (sha == NULL || strlen(sha) != 64 || strspn(sha, "0123456789abcdef") != 64)
            return ERR("'code_package' must be a SHA-256 of 64 lowercase hex digits");
        l->code_sha256 = sha;
    }
    json_t *kp = json_object_get(root, "checkpoint_package");
    if (kp && !json_is_null(kp)) {
        const char *sha = json_string_value(kp);
        if (sha == NULL || strlen(sha) != 64 || strspn(sha, "0123456789abcdef") != 64)
            return ERR("'checkpoint_package' must be a SHA-256 of 64 lowercase hex digits");
        l->checkpoint_package = sha;
    }

    json_t *ra = json_object_get(root, "rank_addresses");
    if (ra && !json_is_null(ra)) {
        if (!json_is_array(ra) || (int64_t)json_array_size(ra) != l->world_size)
            return ERR("'rank_addresses' must be an array of world_size strings");
        l->rank_addresses = calloc((size_t)l->world_size, sizeof(char *));
        if (!l->rank_addresses)
            return ERR("out of memory");
        for (size_t i = 0; i < (size_t)l->world_size; i++) {
            json_t *s = json_array_get(ra, i);
            if (!json_is_string(s) || json_string_length(s) == 0)
                return ERR("'rank_addresses[%zu]' must be a non-empty string", i);
            l->rank_addresses[i] = json_string_value(s);
        }
    }
    return parse_launch_workers(root, l, err, errlen);
}

/* Parses one message: at most APROTO_MAX_MESSAGE bytes of JSON holding an object. Returns
 * the object (the caller owns it), or NULL with the reason in err. */
static json_t *load_object(const char *text, size_t len, char *err, size_t errlen)
{
    if (len > APROTO_MAX_MESSAGE) {
        snprintf(err, errlen, "message of %zu bytes is over the limit of %u", len,
                 APROTO_MAX_MESSAGE);
        return NULL;
    }
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root) {
        snprintf(err, errlen, "invalid JSON: %s", je.text);
        return NULL;
    }
    if (!json_is_object(root)) {
        json_decref(root);
        snprintf(err, errlen, "not a JSON object");
        return NULL;
    }
    return root;
}

int aproto_server_msg_parse(const char *text, size_t len, struct aproto_server_msg *out, char *err,
                            size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_t *root = load_object(text, len, err, errlen);
    if (!root)
        return -1;
    out->root = root;
    json_t *t = json_object_get(root, "type");
    if (!json_is_string(t)) {
        snprintf(err, errlen, "'type' is missing or not a string");
        goto fail;
    }
    out->type_name = json_string_value(t);
    const char *type = out->type_name;
    if (strcmp(type, "registered") == 0) {
        out->type = APROTO_MSG_REGISTERED;
        if (get_str(root, "node_id", false, false, &out->node_id, err, errlen) != 0 ||
            util_json_int(root, "heartbeat_interval_s", true, 1, 3600, &out->heartbeat_interval_s,
                          err, errlen) < 0 ||
            get_str(root, "credential", false, true, &out->credential, err, errlen) != 0 ||
            aproto__parse_api_urls(root, &out->api_urls, &out->n_api_urls, err, errlen) != 0)
            goto fail;
        if (out->credential && strlen(out->credential) > APROTO_MAX_SECRET) {
            snprintf(err, errlen, "'credential' is longer than %d bytes", APROTO_MAX_SECRET);
            goto fail;
        }
    } else if (strcmp(type, "error") == 0) {
        out->type = APROTO_MSG_ERROR;
        if (get_str(root, "message", false, false, &out->message, err, errlen) != 0)
            goto fail;
        if (!out->message)
            out->message = "(no message)";
    } else if (strcmp(type, "ack") == 0) {
        out->type = APROTO_MSG_ACK;
        if (util_json_int(root, "seq", false, 0, INT64_MAX, &out->seq, err, errlen) < 0)
            goto fail;
    } else if (strcmp(type, "stop") == 0) {
        out->type = APROTO_MSG_STOP;
        out->attempt = -1;
        out->grace_s = -1;
        out->notice_s = 0;
        if (get_str(root, "job_id", true, true, &out->job_id, err, errlen) != 0 ||
            util_json_int(root, "attempt", true, 0, INT32_MAX, &out->attempt, err, errlen) < 0 ||
            util_json_int(root, "grace_s", true, 0, 86400, &out->grace_s, err, errlen) < 0 ||
            util_json_int(root, "notice_s", true, 0, 86400, &out->notice_s, err, errlen) < 0)
            goto fail;
    } else if (strcmp(type, "forget") == 0) {
        out->type = APROTO_MSG_FORGET;
        if (get_str(root, "job_id", true, true, &out->job_id, err, errlen) != 0)
            goto fail;
        if (aproto_job_id_valid(out->job_id) != 0) {
            snprintf(err, errlen, "'job_id' is not a valid job id");
            goto fail;
        }
    } else if (strcmp(type, "checkpoint_delete") == 0) {
        out->type = APROTO_MSG_CHECKPOINT_DELETE;
        if (get_str(root, "job_id", true, true, &out->job_id, err, errlen) != 0 ||
            util_json_int(root, "attempt", false, 0, INT32_MAX, &out->attempt, err, errlen) < 0 ||
            util_json_int(root, "index", false, 0, INT32_MAX, &out->index, err, errlen) < 0)
            goto fail;
        if (aproto_job_id_valid(out->job_id) != 0) {
            snprintf(err, errlen, "'job_id' is not a valid job id");
            goto fail;
        }
    } else if (strcmp(type, "launch") == 0) {
        out->type = APROTO_MSG_LAUNCH;
        if (parse_launch(root, &out->launch, err, errlen) != 0) {
            aproto_launch_free(&out->launch);
            goto fail;
        }
    } else {
        out->type = APROTO_MSG_UNKNOWN;
    }
    return 0;
fail:;
    enum aproto_msg_type keep_type = out->type;
    free(out->api_urls); /* parsed before a later field failed (found by fuzz_agent_server_msg) */
    json_decref(out->root);
    memset(out, 0, sizeof(*out));
    out->type = keep_type;
    return -1;
}

void aproto_server_msg_free(struct aproto_server_msg *m)
{
    if (!m)
        return;
    if (m->type == APROTO_MSG_LAUNCH)
        aproto_launch_free(&m->launch);
    free(m->api_urls);
    json_decref(m->root);
    memset(m, 0, sizeof(*m));
}

int aproto_launch_refused_parse(const char *text, size_t len, struct aproto_launch_refused *out)
{
    memset(out, 0, sizeof(*out));
    char err[8];
    json_t *root = load_object(text, len, err, sizeof(err));
    const char *job = json_string_value(json_object_get(root, "job_id"));
    json_t *att = json_object_get(root, "attempt");
    json_t *ws = json_object_get(root, "workers");
    if (!job || !json_is_integer(att) || !json_is_array(ws)) {
        json_decref(root);
        return -1;
    }
    out->root = root;
    out->job_id = job;
    out->attempt = json_integer_value(att);
    out->ranks = calloc(json_array_size(ws) + 1, sizeof(*out->ranks));
    if (!out->ranks) {
        aproto_launch_refused_free(out);
        return -1;
    }
    size_t i;
    json_t *w;
    json_array_foreach(ws, i, w)
    {
        json_t *r = json_object_get(w, "rank");
        if (json_is_integer(r))
            out->ranks[out->n_ranks++] = json_integer_value(r);
    }
    return 0;
}

void aproto_launch_refused_free(struct aproto_launch_refused *r)
{
    if (!r)
        return;
    free(r->ranks);
    json_decref(r->root);
    memset(r, 0, sizeof(*r));
}

/* ------------------------------------------------------------------------------------------ */
/* Parser: agent -> server                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* An integer or null field into *out (-1 for null or absent). */
static int get_int_or_null(const json_t *o, const char *name, int64_t max, int *out, char *err,
                           size_t errlen)
{
    int64_t v = -1;
    if (util_json_int(o, name, true, 0, max, &v, err, errlen) < 0)
        return -1;
    *out = (int)v;
    return 0;
}

/* The fields shared by worker events and worker states: job_id, attempt, rank. */
static int parse_worker_ids(const json_t *o, struct aproto_worker_event *w, char *err,
                            size_t errlen)
{
    if (get_str(o, "job_id", true, true, &w->job_id, err, errlen) != 0)
        return -1;
    if (aproto_job_id_valid(w->job_id) != 0)
        return ERR("'job_id' must be 1-%d characters of [A-Za-z0-9._-]", APROTO_MAX_JOB_ID);
    return util_json_int(o, "attempt", false, 0, INT32_MAX, &w->attempt, err, errlen) < 0 ||
                   util_json_int(o, "rank", false, 0, INT32_MAX, &w->rank, err, errlen) < 0
               ? -1
               : 0;
}

/* worker_exited's result fields (also in an EXITED worker state). */
static int parse_exit(const json_t *o, struct aproto_worker_event *w, char *err, size_t errlen)
{
    w->exited = true;
    if (get_int_or_null(o, "exit_code", 255, &w->exit_code, err, errlen) != 0 ||
        get_int_or_null(o, "signal", 255, &w->signal, err, errlen) != 0 ||
        get_str(o, "error", false, false, &w->error, err, errlen) != 0 ||
        get_str(o, "reason", false, false, &w->reason, err, errlen) != 0)
        return -1;
    if (w->reason && strlen(w->reason) > APROTO_MAX_EXIT_REASON)
        return ERR("'reason' must be at most %d bytes", APROTO_MAX_EXIT_REASON);
    return 0;
}

/* One worker state of `register`: {job_id, attempt, rank, pid, status, exit_code, signal}. */
static int parse_worker_state(const json_t *o, struct aproto_worker_event *w, char *err,
                              size_t errlen)
{
    *w = (struct aproto_worker_event){.seq = -1, .pid = -1, .exit_code = -1, .signal = -1};
    if (!json_is_object(o))
        return ERR("must be an object");
    const char *status;
    if (parse_worker_ids(o, w, err, errlen) != 0 ||
        util_json_int(o, "pid", true, -1, INT32_MAX, &w->pid, err, errlen) < 0 ||
        get_str(o, "status", true, true, &status, err, errlen) != 0)
        return -1;
    enum worker_status ws;
    if (worker_status_from_string(status, &ws) == 0 && ws == WORKER_STATUS_EXITED)
        return parse_exit(o, w, err, errlen);
    if (worker_status_from_string(status, &ws) != 0 || ws != WORKER_STATUS_RUNNING)
        return ERR("'status' must be %s or %s", worker_status_name(WORKER_STATUS_RUNNING),
                   worker_status_name(WORKER_STATUS_EXITED));
    return 0;
}

/* node.resources: CPU and memory_mb numbers, GPU an array of indices; the rest is custom. */
static int parse_resources(struct aproto_node_msg *m, const json_t *res, char *err, size_t errlen)
{
    struct aproto_node_info *n = &m->node;
    m->node_custom = json_object();
    if (!m->node_custom)
        return ERR("out of memory");
    n->custom = m->node_custom;
    const char *k;
    json_t *v;
    json_object_foreach((json_t *)res, k, v)
    {
        if (strcmp(k, "GPU") == 0) {
            if (!json_is_array(v) || json_array_size(v) > APROTO_MAX_GPUS)
                return ERR("'node.resources.GPU' must be an array of GPU indices");
            m->node_gpus = calloc(json_array_size(v) + 1, sizeof(int));
            if (!m->node_gpus)
                return ERR("out of memory");
            for (size_t i = 0; i < json_array_size(v); i++) {
                json_t *g = json_array_get(v, i);
                if (!json_is_integer(g) || json_integer_value(g) < 0 ||
                    json_integer_value(g) >= APROTO_MAX_GPUS)
                    return ERR("'node.resources.GPU[%zu]' must be a GPU index", i);
                m->node_gpus[i] = (int)json_integer_value(g);
            }
            n->gpus = m->node_gpus;
            n->n_gpus = json_array_size(v);
        } else if (!json_is_number(v) || !(json_number_value(v) >= 0) ||
                   json_number_value(v) > APROTO_MAX_RESOURCE) {
            return ERR("'node.resources.%s' must be a number from 0 to %g", k, APROTO_MAX_RESOURCE);
        } else if (strcmp(k, "CPU") == 0) {
            n->cpus = (int64_t)json_number_value(v);
        } else if (strcmp(k, "memory_mb") == 0) {
            n->memory_mb = (int64_t)json_number_value(v);
        } else if (json_object_set(m->node_custom, k, v) != 0) {
            return ERR("out of memory");
        }
    }
    return 0;
}

static int parse_register(struct aproto_node_msg *m, char *err, size_t errlen)
{
    struct aproto_node_info *n = &m->node;
    json_t *node = json_object_get(m->root, "node");
    if (get_str(m->root, "token", false, false, &m->token, err, errlen) != 0 ||
        get_str(m->root, "credential", false, true, &n->credential, err, errlen) != 0)
        return -1;
    if (n->credential && strlen(n->credential) > APROTO_MAX_SECRET)
        return ERR("'credential' is longer than %d bytes", APROTO_MAX_SECRET);
    if (!json_is_object(node))
        return ERR("'node' must be an object");
    char sub[200];
    if (get_str(node, "id", true, true, &n->id, sub, sizeof(sub)) != 0 ||
        get_str(node, "address", true, true, &n->address, sub, sizeof(sub)) != 0 ||
        get_str(node, "hostname", false, false, &n->hostname, sub, sizeof(sub)) != 0 ||
        get_str(node, "gpu_type", false, false, &n->gpu_type, sub, sizeof(sub)) != 0 ||
        get_str(node, "version", false, false, &n->version, sub, sizeof(sub)) != 0)
        return ERR("node: %s", sub);
    if (strlen(n->id) > APROTO_MAX_NODE_ID || aproto_job_id_valid(n->id) != 0)
        return ERR("'node.id' must be 1 to %d bytes of [A-Za-z0-9._-]", APROTO_MAX_NODE_ID);
    if (strlen(n->address) > APROTO_MAX_ADDRESS ||
        (n->hostname && strlen(n->hostname) > APROTO_MAX_ADDRESS))
        return ERR("'node.address' and 'node.hostname' must be at most %d bytes",
                   APROTO_MAX_ADDRESS);
    if ((n->gpu_type && strlen(n->gpu_type) > 64) || (n->version && strlen(n->version) > 64))
        return ERR("'node.gpu_type' and 'node.version' must be at most 64 bytes");
    if (!n->hostname || !*n->hostname)
        n->hostname = n->id;
    m->resources = json_object_get(node, "resources");
    if (!json_is_object(m->resources))
        return ERR("'node.resources' must be an object");
    if (parse_resources(m, m->resources, err, errlen) != 0)
        return -1;
    n->labels = json_object_get(node, "labels");
    if (n->labels && json_is_null(n->labels))
        n->labels = NULL;
    if (n->labels && !json_is_object(n->labels))
        return ERR("'node.labels' must be an object");
    n->port_lo = APROTO_DEFAULT_PORT_LO;
    n->port_hi = APROTO_DEFAULT_PORT_HI;
    json_t *range = json_object_get(node, "port_range");
    if (range && !json_is_null(range)) {
        json_t *lo = json_array_get(range, 0), *hi = json_array_get(range, 1);
        if (!json_is_array(range) || json_array_size(range) != 2 || !json_is_integer(lo) ||
            !json_is_integer(hi) || json_integer_value(lo) < 1 || json_integer_value(hi) > 65535 ||
            json_integer_value(lo) > json_integer_value(hi))
            return ERR("'node.port_range' must be [lo, hi] within 1..65535");
        n->port_lo = (int)json_integer_value(lo);
        n->port_hi = (int)json_integer_value(hi);
    }
    json_t *ws = json_object_get(m->root, "workers");
    if (!ws || json_is_null(ws))
        return 0;
    if (!json_is_array(ws))
        return ERR("'workers' must be an array");
    m->workers = calloc(json_array_size(ws) + 1, sizeof(*m->workers));
    if (!m->workers)
        return ERR("out of memory");
    for (size_t i = 0; i < json_array_size(ws); i++, m->n_workers++)
        if (parse_worker_state(json_array_get(ws, i), &m->workers[i], sub, sizeof(sub)) != 0)
            return ERR("workers[%zu]: %s", i, sub);
    return 0;
}

/* worker_started's optional startup {code_fetch_s, checkpoint_fetch_s, process_start_s}: each
 * optional, a number of seconds from 0 to APROTO_MAX_STARTUP_S. */
static int parse_startup(const json_t *o, struct aproto_startup *st, char *err, size_t errlen)
{
    *st = (struct aproto_startup){-1, -1, -1};
    const json_t *s = json_object_get(o, "startup");
    if (s == NULL || json_is_null(s))
        return 0;
    if (!json_is_object(s))
        return ERR("'startup' must be an object");
    const char *k[] = {"code_fetch_s", "checkpoint_fetch_s", "process_start_s"};
    double *v[] = {&st->code_fetch_s, &st->checkpoint_fetch_s, &st->process_start_s};
    for (size_t i = 0; i < 3; i++) {
        const json_t *x = json_object_get(s, k[i]);
        if (x == NULL || json_is_null(x))
            continue;
        if (!json_is_number(x) || !(json_number_value(x) >= 0) ||
            json_number_value(x) > APROTO_MAX_STARTUP_S)
            return ERR("'startup.%s' must be a number of seconds, 0 or more", k[i]);
        *v[i] = json_number_value(x);
    }
    return 0;
}

static int parse_worker_event(struct aproto_node_msg *m, char *err, size_t errlen)
{
    struct aproto_worker_event *e = &m->event;
    *e = (struct aproto_worker_event){
        .seq = m->seq, .pid = -1, .exit_code = -1, .signal = -1, .startup = {-1, -1, -1}};
    if (util_json_int(m->root, "seq", false, 0, INT64_MAX, &e->seq, err, errlen) < 0 ||
        parse_worker_ids(m->root, e, err, errlen) != 0)
        return -1;
    if (m->type == APROTO_MSG_WORKER_STARTED)
        return util_json_int(m->root, "pid", false, 1, INT32_MAX, &e->pid, err, errlen) < 0
                   ? -1
                   : parse_startup(m->root, &e->startup, err, errlen);
    return parse_exit(m->root, e, err, errlen);
}

/* log: seq, job_id, attempt, rank, stream (optional: stdout or stderr), offset >= 0, bytes >= 1,
 * dropped >= 0 (optional), lines: an array of strings without NUL bytes. */
static int parse_preempt_notice(struct aproto_node_msg *m, char *err, size_t errlen)
{
    json_t *r = json_object_get(m->root, "reason");
    const char *s = json_is_string(r) ? json_string_value(r) : NULL;
    if (s == NULL || s[0] == '\0' || strlen(s) != json_string_length(r) ||
        strlen(s) > APROTO_MAX_PREEMPT_REASON)
        return ERR("'reason' must be a string of 1 to %d bytes", APROTO_MAX_PREEMPT_REASON);
    m->preempt_reason = s;
    return 0;
}

static int parse_log(struct aproto_node_msg *m, char *err, size_t errlen)
{
    struct aproto_log_chunk *c = &m->log;
    struct aproto_worker_event ids = {0};
    memset(c, 0, sizeof(*c));
    if (util_json_int(m->root, "seq", false, 0, INT64_MAX, &m->seq, err, errlen) < 0 ||
        parse_worker_ids(m->root, &ids, err, errlen) != 0 ||
        util_json_int(m->root, "offset", false, 0, INT64_MAX, &c->offset, err, errlen) < 0 ||
        util_json_int(m->root, "bytes", false, 1, APROTO_MAX_MESSAGE, &c->bytes, err, errlen) < 0 ||
        util_json_int(m->root, "dropped", true, 0, INT64_MAX, &c->dropped, err, errlen) < 0)
        return -1;
    c->job_id = ids.job_id;
    c->attempt = ids.attempt;
    c->rank = ids.rank;
    json_t *st = json_object_get(m->root, "stream");
    int stream = st ? aproto_log_stream_from_string(json_string_value(st)) : APROTO_LOG_STDOUT;
    if (stream < 0)
        return ERR("'stream' must be \"stdout\" or \"stderr\"");
    c->stream = (enum aproto_log_stream)stream;
    json_t *lines = json_object_get(m->root, "lines");
    if (!json_is_array(lines) || json_array_size(lines) > APROTO_MAX_LOG_LINES)
        return ERR("'lines' must be an array of at most %d strings", APROTO_MAX_LOG_LINES);
    for (size_t i = 0; i < json_array_size(lines); i++) {
        json_t *l = json_array_get(lines, i);
        if (!json_is_string(l) || strlen(json_string_value(l)) != json_string_length(l))
            return ERR("'lines[%zu]' must be a string without NUL bytes", i);
    }
    c->lines = lines;
    return 0;
}

/* heartbeat: its optional `disk` {path, free_mb, total_mb}. */
static int parse_heartbeat(struct aproto_node_msg *m, char *err, size_t errlen)
{
    json_t *d = json_object_get(m->root, "disk");
    if (!d || json_is_null(d))
        return 0;
    if (!json_is_object(d))
        return ERR("'disk' must be an object");
    if (get_str(d, "path", true, true, &m->disk.path, err, errlen) != 0)
        return -1;
    if (strlen(m->disk.path) > APROTO_MAX_CHECKPOINT_PATH)
        return ERR("'disk.path' must be at most %d bytes", APROTO_MAX_CHECKPOINT_PATH);
    if (util_json_int(d, "free_mb", false, 0, (int64_t)APROTO_MAX_RESOURCE, &m->disk.free_mb, err,
                      errlen) < 0 ||
        util_json_int(d, "total_mb", false, 0, (int64_t)APROTO_MAX_RESOURCE, &m->disk.total_mb, err,
                      errlen) < 0)
        return -1;
    m->has_disk = true;
    return 0;
}

int aproto_node_msg_parse(const char *text, size_t len, struct aproto_node_msg *out, char *err,
                          size_t errlen)
{
    memset(out, 0, sizeof(*out));
    out->seq = -1;
    if (len <= APROTO_MAX_MESSAGE && aproto__scan_report(text, len, &out->report) == 0) {
        out->type = APROTO_MSG_REPORT;
        out->type_name = "report";
        out->seq = out->report.seq;
        return 0;
    }
    json_t *root = load_object(text, len, err, errlen);
    if (!root)
        return -1;
    out->root = root;
    json_t *seq = json_object_get(root, "seq");
    if (json_is_integer(seq) && json_integer_value(seq) >= 0)
        out->seq = json_integer_value(seq);
    json_t *t = json_object_get(root, "type");
    if (!json_is_string(t)) {
        snprintf(err, errlen, "'type' is missing or not a string");
        goto fail;
    }
    out->type_name = json_string_value(t);
    static const struct {
        const char *name;
        enum aproto_msg_type type;
    } types[] = {
        {"register", APROTO_MSG_REGISTER},
        {"heartbeat", APROTO_MSG_HEARTBEAT},
        {"worker_started", APROTO_MSG_WORKER_STARTED},
        {"worker_exited", APROTO_MSG_WORKER_EXITED},
        {"report", APROTO_MSG_REPORT},
        {"log", APROTO_MSG_LOG},
        {"progress", APROTO_MSG_PROGRESS},
        {"gpus", APROTO_MSG_GPUS},
        {"usage", APROTO_MSG_USAGE},

        {"artifact_store", APROTO_MSG_ARTIFACT_STORE},
        {"disk_full", APROTO_MSG_DISK_FULL},
        {"preempt_notice", APROTO_MSG_PREEMPT_NOTICE},
    };
    for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++)
        if (strcmp(out->type_name, types[i].name) == 0)
            out->type = types[i].type;
    int rc = 0;
    if (out->type == APROTO_MSG_REGISTER)
        rc = parse_register(out, err, errlen);
    else if (out->type == APROTO_MSG_WORKER_STARTED || out->type == APROTO_MSG_WORKER_EXITED)
        rc = parse_worker_event(out, err, errlen);
    else if (out->type == APROTO_MSG_REPORT)
        rc = aproto__parse_report(out->root, &out->report, err, errlen);
    else if (out->type == APROTO_MSG_LOG)
        rc = parse_log(out, err, errlen);
    else if (out->type == APROTO_MSG_PROGRESS)
        rc = aproto__parse_progress(out->root, &out->progress, &out->n_progress, err, errlen);
    else if (out->type == APROTO_MSG_GPUS)
        rc = aproto__parse_gpus(out->root, &out->gpu_rows, &out->n_gpu_rows, err, errlen);
    else if (out->type == APROTO_MSG_HEARTBEAT)
        rc = parse_heartbeat(out, err, errlen);
    else if (out->type == APROTO_MSG_USAGE)
        rc = aproto__parse_usage(out->root, &out->usage, &out->n_usage, err, errlen);

    else if (out->type == APROTO_MSG_ARTIFACT_STORE)
        rc = aproto__parse_store_status(out->root, &out->store, err, errlen);
    else if (out->type == APROTO_MSG_DISK_FULL)
        rc = aproto__parse_disk_full(out->root, &out->disk_full, err, errlen);
    else if (out->type == APROTO_MSG_PREEMPT_NOTICE)
        rc = parse_preempt_notice(out, err, errlen);
    if (rc == 0)
        return 0;
fail:;
    int64_t keep_seq = out->seq;
    enum aproto_msg_type keep_type = out->type;
    aproto_node_msg_free(out);
    out->seq = keep_seq;
    out->type = keep_type;
    return -1;
}

void aproto_node_msg_free(struct aproto_node_msg *m)
{
    if (!m)
        return;
    free(m->workers);
    free(m->progress);
    free(m->usage);
    free(m->gpu_rows);
    free(m->node_gpus);
    aproto_report_free(&m->report);
    json_decref(m->node_custom);
    json_decref(m->root);
    memset(m, 0, sizeof(*m));
    m->seq = -1;
}

int aproto__parse_rows(json_t *root, const char *key, size_t max, size_t size, aproto__row_fn fn,
                       void **rows, size_t *n, char *err, size_t errlen)
{
    *rows = NULL;
    *n = 0;
    json_t *arr = json_object_get(root, key);
    if (!json_is_array(arr) || json_array_size(arr) > max)
        return ERR("'%s' must be an array of at most %zu objects", key, max);
    size_t count = json_array_size(arr);
    if (count == 0)
        return 0;
    char *out = calloc(count, size);
    if (out == NULL)
        return ERR("out of memory");
    for (size_t i = 0; i < count; i++)
        if (fn(json_array_get(arr, i), i, out + i * size, err, errlen) != 0) {
            free(out);
            return -1;
        }
    *rows = out;
    *n = count;
    return 0;
}

char *aproto__msg_rows(const char *type, const char *key, const void *rows, size_t n, size_t size,
                       aproto__row_json_fn fn)
{
    json_t *arr = json_array();
    json_t *msg = json_pack("{s:s, s:o}", "type", type, key, arr);
    for (size_t i = 0; msg && i < n; i++) {
        json_t *o = fn((const char *)rows + i * size);
        if (!o || json_array_append_new(arr, o) != 0) {
            json_decref(msg);
            msg = NULL;
        }
    }
    if (!msg)
        return NULL;
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    return text;
}

int aproto__parse_worker_key(const json_t *o, size_t i, const char **job_id, int64_t *attempt,
                             int64_t *rank, char *err, size_t errlen)
{
    if (!json_is_object(o))
        return ERR("'workers[%zu]' must be an object", i);
    *job_id = json_string_value(json_object_get(o, "job_id"));
    if (*job_id == NULL || aproto_job_id_valid(*job_id) != 0)
        return ERR("'workers[%zu].job_id' must be a job id", i);
    char sub[160];
    if (util_json_int(o, "attempt", false, 0, INT32_MAX, attempt, sub, sizeof(sub)) < 0 ||
        util_json_int(o, "rank", false, 0, INT32_MAX, rank, sub, sizeof(sub)) < 0)
        return ERR("'workers[%zu].%s", i, sub + 1);
    return 0;
}

/* The agent protocol (docs/agent-protocol.md) as pure functions: builders for what the agent
 * sends, a validating parser for what the server sends. No I/O, no globals. */
#include "agent.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

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

char *agent_msg_register(const struct agent_node_info *n, const char *token, const json_t *workers)
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
    json_t *node = json_pack("{s:s, s:s, s:s, s:o, s:o, s:o, s:s, s:[i,i]}", "id", n->id,
                             "hostname", n->hostname, "address", n->address, "resources", res,
                             "gpu_type", str_or_null(n->gpu_type), "labels", labels, "version",
                             n->version, "port_range", n->port_lo, n->port_hi);
    if (!node)
        return NULL;
    json_t *ws = workers ? json_deep_copy(workers) : json_array();
    return dump_steal(json_pack("{s:s, s:o, s:o, s:o}", "type", "register", "token",
                                str_or_null(token), "node", node, "workers", ws));
}

char *agent_msg_heartbeat(void)
{
    return dump_steal(json_pack("{s:s}", "type", "heartbeat"));
}

char *agent_msg_worker_started(int64_t seq, const char *job_id, int64_t attempt, int64_t rank,
                               long pid)
{
    return dump_steal(json_pack("{s:s, s:I, s:s, s:I, s:I, s:I}", "type", "worker_started", "seq",
                                (json_int_t)seq, "job_id", job_id, "attempt", (json_int_t)attempt,
                                "rank", (json_int_t)rank, "pid", (json_int_t)pid));
}

char *agent_msg_worker_exited(int64_t seq, const char *job_id, int64_t attempt, int64_t rank,
                              int exit_code, int signal, const char *error)
{
    return dump_steal(json_pack(
        "{s:s, s:I, s:s, s:I, s:I, s:o, s:o, s:o}", "type", "worker_exited", "seq", (json_int_t)seq,
        "job_id", job_id, "attempt", (json_int_t)attempt, "rank", (json_int_t)rank, "exit_code",
        int_or_null(exit_code), "signal", int_or_null(signal), "error", str_or_null(error)));
}

json_t *agent_report_body(const char *job_id, int64_t attempt, int64_t rank, int64_t report_seq,
                          const json_t *metrics, int64_t step, const char *time_rfc3339,
                          const char *checkpoint_dir)
{
    return json_pack("{s:s, s:I, s:I, s:I, s:O, s:o, s:s, s:o}", "job_id", job_id, "attempt",
                     (json_int_t)attempt, "rank", (json_int_t)rank, "report_seq",
                     (json_int_t)report_seq, "metrics", (json_t *)metrics, "step",
                     int_or_null(step), "time", time_rfc3339, "checkpoint_dir",
                     str_or_null(checkpoint_dir));
}

char *agent_msg_report(int64_t seq, const json_t *body)
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

void agent_format_time(int64_t ms, char *out, size_t outlen)
{
    time_t secs = (time_t)(ms / 1000);
    struct tm tm;
    gmtime_r(&secs, &tm);
    char buf[32];
    strftime(buf, sizeof(buf), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outlen, "%s.%03dZ", buf, (int)(ms % 1000));
}

/* ------------------------------------------------------------------------------------------ */
/* Parser                                                                                       */
/* ------------------------------------------------------------------------------------------ */

int agent_job_id_valid(const char *id)
{
    if (!id || !*id || strlen(id) > 200 || strcmp(id, ".") == 0 || strcmp(id, "..") == 0)
        return -1;
    for (const char *p = id; *p; p++) {
        char c = *p;
        if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') ||
              c == '-' || c == '_' || c == '.'))
            return -1;
    }
    return 0;
}

/* Reads integer field `name` of o into *out within [min, max]. required=false: absent or null
 * leaves *out unchanged. 0 or -1 with err. */
static int get_int(const json_t *o, const char *name, bool required, int64_t min, int64_t max,
                   int64_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(o, name);
    if (!v || json_is_null(v)) {
        if (required)
            return ERR("'%s' is missing", name);
        return 0;
    }
    if (!json_is_integer(v))
        return ERR("'%s' must be an integer", name);
    json_int_t i = json_integer_value(v);
    if (i < min || i > max)
        return ERR("'%s' must be in [%lld, %lld]", name, (long long)min, (long long)max);
    *out = i;
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

void agent_launch_free(struct agent_launch *l)
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

static int parse_launch_workers(const json_t *root, struct agent_launch *l, char *err,
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
        struct agent_launch_worker *lw = &l->workers[i];
        char sub[200];
        if (!json_is_object(w))
            return ERR("'workers[%zu]' must be an object", i);
        if (get_int(w, "rank", true, 0, l->world_size - 1, &lw->rank, sub, sizeof(sub)) != 0 ||
            get_int(w, "local_rank", true, 0, l->local_world_size - 1, &lw->local_rank, sub,
                    sizeof(sub)) != 0)
            return ERR("workers[%zu]: %s", i, sub);
        for (size_t j = 0; j < i; j++)
            if (l->workers[j].rank == lw->rank)
                return ERR("workers[%zu]: rank %lld appears twice", i, (long long)lw->rank);
        json_t *g = json_object_get(w, "gpus");
        if (g && !json_is_null(g)) {
            if (!json_is_array(g) || json_array_size(g) > AGENT_MAX_GPUS)
                return ERR("workers[%zu]: 'gpus' must be an array of GPU indices", i);
            lw->n_gpus = json_array_size(g);
            lw->gpus = calloc(lw->n_gpus ? lw->n_gpus : 1, sizeof(int));
            if (!lw->gpus)
                return ERR("out of memory");
            for (size_t j = 0; j < lw->n_gpus; j++) {
                json_t *x = json_array_get(g, j);
                if (!json_is_integer(x) || json_integer_value(x) < 0 ||
                    json_integer_value(x) >= AGENT_MAX_GPUS)
                    return ERR("workers[%zu]: 'gpus[%zu]' must be a GPU index", i, j);
                lw->gpus[j] = (int)json_integer_value(x);
            }
        }
    }
    return 0;
}

static int parse_launch(json_t *root, struct agent_launch *l, char *err, size_t errlen)
{
    memset(l, 0, sizeof(*l));
    l->root = json_incref(root);
    if (get_str(root, "job_id", true, true, &l->job_id, err, errlen) != 0)
        return -1;
    if (agent_job_id_valid(l->job_id) != 0)
        return ERR("'job_id' must be 1-200 characters of [A-Za-z0-9._-]");
    if (get_int(root, "attempt", true, 0, INT32_MAX, &l->attempt, err, errlen) != 0)
        return -1;
    if (get_str(root, "backend", false, true, &l->backend, err, errlen) != 0)
        return -1;
    if (!l->backend)
        l->backend = "torch";
    if (strcmp(l->backend, "torch") != 0 && strcmp(l->backend, "tensorflow") != 0 &&
        strcmp(l->backend, "native") != 0 && strcmp(l->backend, "none") != 0)
        return ERR("'backend' must be torch, tensorflow, native or none");

    json_t *ep = json_object_get(root, "entrypoint");
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
    l->config_json = cfg ? json_dumps(cfg, JSON_COMPACT | JSON_ENCODE_ANY) : strdup("null");
    if (!l->config_json)
        return ERR("out of memory");

    if (get_int(root, "world_size", true, 1, 1 << 20, &l->world_size, err, errlen) != 0 ||
        get_int(root, "num_nodes", true, 1, 1 << 20, &l->num_nodes, err, errlen) != 0 ||
        get_int(root, "node_rank", true, 0, l->num_nodes - 1, &l->node_rank, err, errlen) != 0 ||
        get_int(root, "local_world_size", true, 1, l->world_size, &l->local_world_size, err,
                errlen) != 0 ||
        get_str(root, "master_addr", true, true, &l->master_addr, err, errlen) != 0 ||
        get_int(root, "master_port", true, 1, 65535, &l->master_port, err, errlen) != 0 ||
        get_str(root, "checkpoint_dir", false, false, &l->checkpoint_dir, err, errlen) != 0)
        return -1;
    if (l->checkpoint_dir && !*l->checkpoint_dir)
        l->checkpoint_dir = NULL;

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

int agent_server_msg_parse(const char *text, size_t len, struct agent_server_msg *out, char *err,
                           size_t errlen)
{
    memset(out, 0, sizeof(*out));
    json_error_t je;
    json_t *root = json_loadb(text, len, 0, &je);
    if (!root)
        return ERR("invalid JSON: %s", je.text);
    if (!json_is_object(root)) {
        json_decref(root);
        return ERR("not a JSON object");
    }
    out->root = root;
    json_t *t = json_object_get(root, "type");
    if (!json_is_string(t)) {
        snprintf(err, errlen, "'type' is missing or not a string");
        goto fail;
    }
    out->type_name = json_string_value(t);
    const char *type = out->type_name;
    if (strcmp(type, "registered") == 0) {
        out->type = AGENT_MSG_REGISTERED;
        if (get_str(root, "node_id", false, false, &out->node_id, err, errlen) != 0 ||
            get_int(root, "heartbeat_interval_s", false, 1, 3600, &out->heartbeat_interval_s, err,
                    errlen) != 0)
            goto fail;
    } else if (strcmp(type, "error") == 0) {
        out->type = AGENT_MSG_ERROR;
        if (get_str(root, "message", false, false, &out->message, err, errlen) != 0)
            goto fail;
        if (!out->message)
            out->message = "(no message)";
    } else if (strcmp(type, "ack") == 0) {
        out->type = AGENT_MSG_ACK;
        if (get_int(root, "seq", true, 0, INT64_MAX, &out->seq, err, errlen) != 0)
            goto fail;
    } else if (strcmp(type, "stop") == 0) {
        out->type = AGENT_MSG_STOP;
        out->attempt = -1;
        out->grace_s = -1;
        if (get_str(root, "job_id", true, true, &out->job_id, err, errlen) != 0 ||
            get_int(root, "attempt", false, 0, INT32_MAX, &out->attempt, err, errlen) != 0 ||
            get_int(root, "grace_s", false, 0, 86400, &out->grace_s, err, errlen) != 0)
            goto fail;
    } else if (strcmp(type, "launch") == 0) {
        out->type = AGENT_MSG_LAUNCH;
        if (parse_launch(root, &out->launch, err, errlen) != 0) {
            agent_launch_free(&out->launch);
            goto fail;
        }
    } else {
        out->type = AGENT_MSG_UNKNOWN;
    }
    return 0;
fail:
    json_decref(out->root);
    memset(out, 0, sizeof(*out));
    return -1;
}

void agent_server_msg_free(struct agent_server_msg *m)
{
    if (!m)
        return;
    if (m->type == AGENT_MSG_LAUNCH)
        agent_launch_free(&m->launch);
    json_decref(m->root);
    memset(m, 0, sizeof(*m));
}

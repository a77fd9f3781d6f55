/* The worker environment (DESIGN §3, docs/agent-protocol.md "Worker environment"): pure
 * functions over string arrays, no getenv/setenv. */
#include "agent.h"
#include "jobspec.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct envb {
    char **v;
    size_t n, cap;
    bool oom;
};

/* Sets NAME=value, replacing an earlier NAME. Records OOM in b->oom. */
static void envb_set(struct envb *b, const char *name, const char *value)
{
    if (b->oom)
        return;
    size_t nl = strlen(name), vl = strlen(value);
    char *kv = malloc(nl + vl + 2);
    if (!kv) {
        b->oom = true;
        return;
    }
    memcpy(kv, name, nl);
    kv[nl] = '=';
    memcpy(kv + nl + 1, value, vl + 1);
    for (size_t i = 0; i < b->n; i++) {
        if (strncmp(b->v[i], name, nl) == 0 && b->v[i][nl] == '=') {
            free(b->v[i]);
            b->v[i] = kv;
            return;
        }
    }
    if (b->n + 2 > b->cap) {
        size_t cap = b->cap ? b->cap * 2 : 64;
        char **nv = realloc(b->v, cap * sizeof(*nv));
        if (!nv) {
            free(kv);
            b->oom = true;
            return;
        }
        b->v = nv;
        b->cap = cap;
    }
    b->v[b->n++] = kv;
    b->v[b->n] = NULL;
}

static void envb_set_int(struct envb *b, const char *name, int64_t v)
{
    char buf[32];
    snprintf(buf, sizeof(buf), "%lld", (long long)v);
    envb_set(b, name, buf);
}

static const char *envb_get(const struct envb *b, const char *name)
{
    return agent_env_get(b->v, name);
}

const char *agent_env_get(char *const *env, const char *name)
{
    size_t nl = strlen(name);
    for (size_t i = 0; env && env[i]; i++)
        if (strncmp(env[i], name, nl) == 0 && env[i][nl] == '=')
            return env[i] + nl + 1;
    return NULL;
}

void agent_env_free(char **env)
{
    for (size_t i = 0; env && env[i]; i++)
        free(env[i]);
    free(env);
}

char *agent_tf_config(const struct aproto_launch *l, int64_t rank)
{
    json_t *workers = json_array();
    if (!workers)
        return NULL;
    for (int64_t r = 0; r < l->world_size; r++) {
        const char *addr = l->rank_addresses ? l->rank_addresses[r] : l->master_addr;
        char hp[300];
        bool v6 = strchr(addr, ':') != NULL;
        snprintf(hp, sizeof(hp), "%s%s%s:%lld", v6 ? "[" : "", addr, v6 ? "]" : "",
                 (long long)(l->master_port + r));
        json_array_append_new(workers, json_string(hp));
    }
    json_t *o = json_pack("{s:{s:o}, s:{s:s, s:I}}", "cluster", "worker", workers, "task", "type",
                          "worker", "index", (json_int_t)rank);
    if (!o)
        return NULL;
    char *s = json_dumps(o, JSON_COMPACT);
    json_decref(o);
    return s;
}

/* The UUID NVML gave GPU `index`, or NULL when the agent knows none (declared GPUs). */
static const char *gpu_uuid(const struct agent_env_private *priv, int index)
{
    for (size_t i = 0; priv && i < priv->n_gpus; i++)
        if (priv->gpus[i].index == index && priv->gpus[i].uuid[0])
            return priv->gpus[i].uuid;
    return NULL;
}

/* CUDA_VISIBLE_DEVICES of a worker, "GPU-8f2c...,GPU-11aa..." by UUID where NVML gave them (an
 * index can name another device once CUDA_DEVICE_ORDER or a lost GPU renumbers them), else
 * "0,1,3" by index ("" without GPUs). Returns a malloc'd string or NULL. */
static char *gpu_list_text(const struct aproto_launch_worker *w,
                           const struct agent_env_private *priv)
{
    size_t len = w->n_gpus * (sizeof(priv->gpus[0].uuid) + 1) + 1, off = 0;
    char *buf = malloc(len);
    if (!buf)
        return NULL;
    buf[0] = '\0';
    for (size_t i = 0; i < w->n_gpus && off < len; i++) {
        const char *uuid = gpu_uuid(priv, w->gpus[i]);
        int n = uuid ? snprintf(buf + off, len - off, "%s%s", i ? "," : "", uuid)
                     : snprintf(buf + off, len - off, "%s%d", i ? "," : "", w->gpus[i]);
        if (n < 0)
            break;
        off += (size_t)n;
    }
    return buf;
}

/* python_path, then `rest` (when non-empty), joined by ':' (malloc'd). */
static char *prepend_path(const char *python_path, const char *rest)
{
    size_t a = strlen(python_path), b = rest ? strlen(rest) : 0;
    char *s = malloc(a + b + 2);
    if (!s)
        return NULL;
    memcpy(s, python_path, a);
    if (b) {
        s[a] = ':';
        memcpy(s + a + 1, rest, b + 1);
    } else {
        s[a] = '\0';
    }
    return s;
}

/* Variables of the agent's environment a worker inherits: the locale, the search paths, and
 * the tuning of the libraries a training program uses (NCCL, gloo, CUDA, OpenMP, the
 * sanitizers). Everything else stays with the agent: TRAINYARD_* (the cluster token), database
 * URLs, cloud credentials, SSH agent sockets. */
static const char *const inherited_names[] = {
    "PATH",
    "HOME",
    "USER",
    "LOGNAME",
    "SHELL",
    "LANG",
    "LANGUAGE",
    "TZ",
    "TERM",
    "LD_LIBRARY_PATH",
    "PYTHONPATH",
    "PYTHONDONTWRITEBYTECODE",
    "PYTHONUNBUFFERED",
};
static const char *const inherited_prefixes[] = {
    "LC_", "NCCL_", "GLOO_", "CUDA_", "NVIDIA_", "OMP_", "MKL_", "ASAN_", "LSAN_", "UBSAN_",
};

bool agent_env_inherited(const char *name)
{
    for (size_t i = 0; i < sizeof(inherited_names) / sizeof(inherited_names[0]); i++)
        if (strcmp(name, inherited_names[i]) == 0)
            return true;
    for (size_t i = 0; i < sizeof(inherited_prefixes) / sizeof(inherited_prefixes[0]); i++)
        if (strncmp(name, inherited_prefixes[i], strlen(inherited_prefixes[i])) == 0)
            return true;
    return false;
}

char **agent_env_build(char *const *base, const struct aproto_launch *l,
                       const struct aproto_launch_worker *w, const char *python_path,
                       const char *report_socket, const char *socket_ifname,
                       const struct agent_env_private *priv)
{
    struct envb b = {0};
    b.v = calloc(1, sizeof(char *));
    if (!b.v)
        return NULL;
    b.cap = 1;
    for (size_t i = 0; base && base[i]; i++) {
        const char *eq = strchr(base[i], '=');
        if (!eq || eq == base[i])
            continue;
        char name[256];
        size_t nl = (size_t)(eq - base[i]);
        if (nl >= sizeof(name))
            continue;
        memcpy(name, base[i], nl);
        name[nl] = '\0';
        if (agent_env_inherited(name))
            envb_set(&b, name, eq + 1);
    }
    if (priv && priv->tmp_dir) {
        envb_set(&b, "TMPDIR", priv->tmp_dir);
        char request[4200];
        if ((size_t)snprintf(request, sizeof(request), "%s/%s", priv->tmp_dir,
                             AGENT_CHECKPOINT_REQUEST_FILE) < sizeof(request))
            envb_set(&b, "TRAINYARD_CHECKPOINT_REQUEST_FILE", request);
        if (priv->user) { /* a uid of its own: its home is its private directory */
            envb_set(&b, "HOME", priv->tmp_dir);
            envb_set(&b, "USER", priv->user);
            envb_set(&b, "LOGNAME", priv->user);
        }
    }
    if (socket_ifname && *socket_ifname && !envb_get(&b, "GLOO_SOCKET_IFNAME") &&
        !envb_get(&b, "NCCL_SOCKET_IFNAME")) {
        envb_set(&b, "GLOO_SOCKET_IFNAME", socket_ifname);
        envb_set(&b, "NCCL_SOCKET_IFNAME", socket_ifname);
    }
    envb_set_int(&b, "RANK", w->rank);
    envb_set_int(&b, "WORLD_SIZE", l->world_size);
    envb_set_int(&b, "LOCAL_RANK", w->local_rank);
    envb_set_int(&b, "LOCAL_WORLD_SIZE", l->local_world_size);
    envb_set_int(&b, "NODE_RANK", l->node_rank);
    envb_set(&b, "MASTER_ADDR", l->master_addr);
    envb_set_int(&b, "MASTER_PORT", l->master_port);
    char *gpus = gpu_list_text(w, priv);
    if (!gpus)
        b.oom = true;
    else
        envb_set(&b, "CUDA_VISIBLE_DEVICES", gpus);
    free(gpus);
    if (strcmp(l->backend, jobspec_backend_name(JOBSPEC_BACKEND_TENSORFLOW)) == 0) {
        char *tf = agent_tf_config(l, w->rank);
        if (!tf)
            b.oom = true;
        else
            envb_set(&b, "TF_CONFIG", tf);
        free(tf);
    }
    envb_set(&b, "TRAINYARD_JOB_ID", l->job_id);
    envb_set_int(&b, "TRAINYARD_ATTEMPT", l->attempt);
    envb_set(&b, "TRAINYARD_CONFIG", l->config_json ? l->config_json : "null");
    envb_set(&b, "TRAINYARD_CHECKPOINT_DIR", l->checkpoint_dir ? l->checkpoint_dir : "");
    envb_set(&b, "TRAINYARD_REPORT_SOCKET", report_socket ? report_socket : "");
    envb_set(&b, "TRAINYARD_BACKEND", l->backend);
    if (priv && priv->report_secret)
        envb_set(&b, "TRAINYARD_REPORT_SECRET", priv->report_secret);
    if (l->rendezvous_secret)
        envb_set(&b, "TRAINYARD_RENDEZVOUS_SECRET", l->rendezvous_secret);

    const char *k;
    json_t *v;
    json_object_foreach((json_t *)l->env, k, v)
    {
        if (json_is_string(v))
            envb_set(&b, k, json_string_value(v));
    }
    if (python_path && *python_path) {
        const char *cur = envb_get(&b, "PYTHONPATH");
        char *pp = prepend_path(python_path, cur);
        if (!pp)
            b.oom = true;
        else
            envb_set(&b, "PYTHONPATH", pp);
        free(pp);
    }
    if (b.oom) {
        agent_env_free(b.v);
        return NULL;
    }
    return b.v;
}

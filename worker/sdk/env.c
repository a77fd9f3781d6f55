/*
 * env.c — build a context's identity from the environment of DESIGN §3 and from argv.
 *
 * Every variable the SDK reads, in one table: name, whether managed mode requires it, bounds.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "common/vocab.h"
#include "internal.h"

#define ERRF(...) snprintf(err, errlen, __VA_ARGS__)

/* Parse a decimal integer in [lo, hi] from s (whole string). 0 or TY_ERANGE / TY_EINVAL. */
static int env_parse_long(const char *s, long lo, long hi, long *out)
{
    if (!s || !*s)
        return TY_EINVAL;
    char *end;
    errno = 0;
    long v = strtol(s, &end, 10);
    if (errno || *end != '\0')
        return TY_EINVAL;
    if (v < lo || v > hi)
        return TY_ERANGE;
    *out = v;
    return 0;
}

/* Parse a positive number of seconds into milliseconds. */
static int env_parse_seconds(const char *s, int64_t *ms)
{
    char *end;
    errno = 0;
    double v = strtod(s, &end);
    if (errno || end == s || *end != '\0' || !(v > 0) || v > 1e6)
        return TY_EINVAL;
    *ms = (int64_t)(v * 1000.0);
    if (*ms < 1)
        *ms = 1;
    return 0;
}

struct env_int {
    const char *name;
    bool required; /* in managed mode */
    long lo, hi;
    int *field;
};

/* Read an integer variable; a missing optional variable leaves *field untouched. */
static int env_read_int(const struct env_int *e, char *err, size_t errlen)
{
    const char *s = getenv(e->name);
    if (!s || !*s) {
        if (e->required) {
            ERRF("%s is not set", e->name);
            return TY_ECONFIG;
        }
        return 0;
    }
    long v;
    if (env_parse_long(s, e->lo, e->hi, &v) < 0) {
        ERRF("%s='%s' is not an integer in [%ld, %ld]", e->name, s, e->lo, e->hi);
        return TY_ECONFIG;
    }
    *e->field = (int)v;
    return 0;
}

/* Duplicate s into *dst (NULL stays NULL). */
static int env_dup(char **dst, const char *s)
{
    *dst = NULL;
    if (!s)
        return 0;
    *dst = strdup(s);
    return *dst ? 0 : TY_ENOMEM;
}

/* Find and remove `--config FILE` / `--config=FILE` from argv; *path borrows from argv. */
static int env_take_config_flag(int *argc, char ***argv, const char **path, char *err,
                                size_t errlen)
{
    *path = NULL;
    if (!argc || !argv || !*argv)
        return 0;
    char **av = *argv;
    int n = *argc;
    for (int i = 1; i < n; i++) {
        int drop = 0;
        if (strcmp(av[i], "--config") == 0) {
            if (i + 1 >= n) {
                ERRF("--config needs a file argument");
                return TY_ECONFIG;
            }
            *path = av[i + 1];
            drop = 2;
        } else if (strncmp(av[i], "--config=", 9) == 0) {
            *path = av[i] + 9;
            drop = 1;
        }
        if (drop) {
            memmove(&av[i], &av[i + drop], (size_t)(n - i - drop + 1) * sizeof *av);
            *argc = n - drop;
            return 0;
        }
    }
    return 0;
}

/* Parse the backend name; unknown names are a configuration error. */
static int env_backend(const char *s, ty__backend *out)
{
    static const struct {
        const char *name;
        ty__backend b;
    } names[] = {
#define ENV_BACKEND(name, text) {text, TY__BACKEND_##name},
        JOBSPEC_BACKEND_MAP(ENV_BACKEND)
#undef ENV_BACKEND
    };
    if (!s || !*s) {
        *out = TY__BACKEND_NATIVE;
        return 0;
    }
    for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
        if (strcmp(s, names[i].name) == 0) {
            *out = names[i].b;
            return 0;
        }
    }
    return TY_ECONFIG;
}

int ty__ctx_from_env(ty_ctx *c, int *argc, char ***argv, char *err, size_t errlen)
{
    const char *cfg_path;
    int rc = env_take_config_flag(argc, argv, &cfg_path, err, errlen);
    if (rc < 0)
        return rc;

    const char *job = getenv("TRAINYARD_JOB_ID");
    const char *rank_s = getenv("RANK");
    c->standalone = (!job || !*job) && (!rank_s || !*rank_s);
    c->rank = 0;
    c->world = 1;
    c->local_rank = -1;
    c->local_world = -1;
    c->node_rank = 0;
    c->attempt = 0;
    c->master_port = 0;
    c->coll_timeout_ms = TY__DEFAULT_COLLECTIVE_TIMEOUT_MS;
    c->report_timeout_ms = TY__DEFAULT_REPORT_TIMEOUT_MS;

    if (!c->standalone) {
        const struct env_int ints[] = {
            {"RANK", true, 0, 1 << 20, &c->rank},
            {"WORLD_SIZE", true, 1, 1 << 20, &c->world},
            {"LOCAL_RANK", false, 0, 1 << 20, &c->local_rank},
            {"LOCAL_WORLD_SIZE", false, 1, 1 << 20, &c->local_world},
            {"NODE_RANK", false, 0, 1 << 20, &c->node_rank},
            {"TRAINYARD_ATTEMPT", false, 0, INT_MAX, &c->attempt},
            {"MASTER_PORT", false, 1, 65535, &c->master_port},
        };
        for (size_t i = 0; i < sizeof ints / sizeof ints[0]; i++) {
            if ((rc = env_read_int(&ints[i], err, errlen)) < 0)
                return rc;
        }
        if (c->rank >= c->world) {
            ERRF("RANK=%d is not below WORLD_SIZE=%d", c->rank, c->world);
            return TY_ECONFIG;
        }
        if (env_backend(getenv("TRAINYARD_BACKEND"), &c->backend) < 0) {
            ERRF("TRAINYARD_BACKEND='%s' is not torch, tensorflow, native or none",
                 getenv("TRAINYARD_BACKEND"));
            return TY_ECONFIG;
        }
        const char *ma = getenv("MASTER_ADDR");
        if ((rc = env_dup(&c->master_addr, ma && *ma ? ma : "127.0.0.1")) < 0)
            return rc;
        const char *sock = getenv("TRAINYARD_REPORT_SOCKET");
        if ((rc = env_dup(&c->report_socket, sock && *sock ? sock : NULL)) < 0)
            return rc;
        const char *secret = getenv("TRAINYARD_REPORT_SECRET");
        if ((rc = env_dup(&c->report_secret, secret && *secret ? secret : NULL)) < 0)
            return rc;
        secret = getenv("TRAINYARD_RENDEZVOUS_SECRET");
        if ((rc = env_dup(&c->rendezvous_secret, secret && *secret ? secret : NULL)) < 0)
            return rc;
    }
    if (c->local_rank < 0)
        c->local_rank = c->rank;
    if (c->local_world < 0)
        c->local_world = c->world;
    if (c->local_rank >= c->local_world) {
        ERRF("LOCAL_RANK=%d is not below LOCAL_WORLD_SIZE=%d", c->local_rank, c->local_world);
        return TY_ECONFIG;
    }
    if ((rc = env_dup(&c->job_id, job && *job ? job : "local")) < 0)
        return rc;
    const char *ck = getenv("TRAINYARD_CHECKPOINT_DIR");
    if (!c->standalone && (rc = env_dup(&c->checkpoint_dir, ck && *ck ? ck : NULL)) < 0)
        return rc;
    const char *req = getenv("TRAINYARD_CHECKPOINT_REQUEST_FILE");
    if (!c->standalone && (rc = env_dup(&c->checkpoint_request_file, req && *req ? req : NULL)) < 0)
        return rc;

    const char *tmo = getenv("TRAINYARD_COLLECTIVE_TIMEOUT_S");
    if (tmo && *tmo && env_parse_seconds(tmo, &c->coll_timeout_ms) < 0) {
        ERRF("TRAINYARD_COLLECTIVE_TIMEOUT_S='%s' is not a positive number", tmo);
        return TY_ECONFIG;
    }
    tmo = getenv("TRAINYARD_REPORT_TIMEOUT_S");
    if (tmo && *tmo && env_parse_seconds(tmo, &c->report_timeout_ms) < 0) {
        ERRF("TRAINYARD_REPORT_TIMEOUT_S='%s' is not a positive number", tmo);
        return TY_ECONFIG;
    }

    int chunk_kib = TY__RING_CHUNK / 1024, sockbuf_kib = TY__RING_SOCKBUF / 1024;
    int shm_kib = TY__SHM_CHUNK / 1024, shm_small_kib = TY__SHM_SMALL / 1024;
    const struct env_int tuning[] = {
        {"TRAINYARD_RING_CHUNK_KIB", false, 4, 64 * 1024, &chunk_kib},
        {"TRAINYARD_RING_SOCKBUF_KIB", false, 0, 1024 * 1024, &sockbuf_kib},
        {"TRAINYARD_SHM_CHUNK_KIB", false, 4, 256 * 1024, &shm_kib},
        {"TRAINYARD_SHM_SMALL_KIB", false, 0, 256 * 1024, &shm_small_kib},
    };
    for (size_t i = 0; i < sizeof tuning / sizeof tuning[0]; i++) {
        if ((rc = env_read_int(&tuning[i], err, errlen)) < 0)
            return rc;
    }
    c->ring_chunk = (size_t)chunk_kib * 1024;
    c->ring_sockbuf = sockbuf_kib * 1024;
    c->shm_chunk = (size_t)shm_kib * 1024;
    c->shm_small = (size_t)shm_small_kib * 1024;
    const char *tr = getenv("TRAINYARD_TRANSPORT");
    if (tr && *tr && strcmp(tr, "auto") != 0 && strcmp(tr, "tcp") != 0) {
        ERRF("TRAINYARD_TRANSPORT='%s' is not auto or tcp", tr);
        return TY_ECONFIG;
    }
    c->tcp_only = tr && strcmp(tr, "tcp") == 0;

    /* config: TRAINYARD_CONFIG (managed) > --config FILE > {} */
    const char *cfg = c->standalone ? NULL : getenv("TRAINYARD_CONFIG");
    json_error_t jerr;
    if (cfg && *cfg) {
        c->config = json_loads(cfg, JSON_DECODE_ANY, &jerr);
        if (!c->config) {
            ERRF("TRAINYARD_CONFIG is not valid JSON: %s", jerr.text);
            return TY_ECONFIG;
        }
    } else if (cfg_path) {
        c->config = json_load_file(cfg_path, JSON_DECODE_ANY, &jerr);
        if (!c->config) {
            ERRF("--config %s: %s (line %d)", cfg_path, jerr.text, jerr.line);
            return TY_ECONFIG;
        }
    } else {
        c->config = json_object();
        if (!c->config)
            return TY_ENOMEM;
    }
    return 0;
}

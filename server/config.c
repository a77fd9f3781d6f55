/* The server's options, declared once. Every option has a flag and a TRAINYARD_* variable. */
#include "config.h"

#include "log.h"
#include "util.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum opt_type { OPT_STRING, OPT_INT };

struct opt {
    const char *flag; /* without the leading "--" */
    const char *env;
    enum opt_type type;
    size_t offset;
    const char *def; /* default as text; NULL: unset */
    int64_t min, max;
    const char *help;
};

#define S(field) OPT_STRING, offsetof(struct srv_config, field)
#define I(field) OPT_INT, offsetof(struct srv_config, field)

static const struct opt options[] = {
    {"http-host", "TRAINYARD_HTTP_HOST", S(http_host), "0.0.0.0", 0, 0,
     "address the REST API and dashboard listen on"},
    {"http-port", "TRAINYARD_HTTP_PORT", I(http_port), "8080", 1, 65535, "REST API port"},
    {"ws-port", "TRAINYARD_WS_PORT", I(ws_port), "8081", 1, 65535,
     "websocket port for agents and live streams"},
    {"http-threads", "TRAINYARD_HTTP_THREADS", I(http_threads), "16", 1, 256,
     "HTTP worker threads (each holds one database connection)"},
    {"max-body-bytes", "TRAINYARD_MAX_BODY_BYTES", I(max_body_bytes), "1048576", 1024,
     1073741824, "largest request body accepted (413 beyond)"},
    {"data-dir", "TRAINYARD_DATA_DIR", S(data_dir), "./trainyard-data", 0, 0,
     "state directory: embedded database, admin token, artifacts"},
    {"database-url", "TRAINYARD_DATABASE_URL", S(database_url), NULL, 0, 0,
     "PostgreSQL connection string; unset: run an embedded PostgreSQL under --data-dir"},
    {"pg-bin-dir", "TRAINYARD_PG_BIN_DIR", S(pg_bin_dir), NULL, 0, 0,
     "directory of initdb and pg_ctl (default: newest /usr/lib/postgresql/*/bin)"},
    {"auth", "TRAINYARD_AUTH", S(auth), "token", 0, 0,
     "token: bearer API tokens with roles; none: no authentication (local experiments)"},
    {"heartbeat-timeout-s", "TRAINYARD_HEARTBEAT_TIMEOUT_S", I(heartbeat_timeout_s), "10", 1,
     86400, "seconds without a heartbeat before a node is marked LOST"},
    {"stop-grace-s", "TRAINYARD_STOP_GRACE_S", I(stop_grace_s), "10", 0, 3600,
     "seconds between SIGTERM and SIGKILL when workers are stopped"},
    {"cluster-token", "TRAINYARD_CLUSTER_TOKEN", S(cluster_token), NULL, 0, 0,
     "token agents join with (default: made on first start, in <data-dir>/cluster.token)"},
    {"log-level", "TRAINYARD_LOG_LEVEL", S(log_level), "info", 0, 0, "error, warn, info or debug"},
    {"debug", "TRAINYARD_DEBUG", S(debug), "", 0, 0,
     "comma separated subsystems to debug-log (http,db,auth,all)"},
};

#undef S
#undef I

static void usage(FILE *out)
{
    fprintf(out, "usage: trainyard-server [OPTIONS]\n\nOptions (flag, environment variable, "
                 "default):\n");
    for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
        const struct opt *o = &options[i];
        fprintf(out, "  --%-22s %-32s %s\n  %25s %s\n", o->flag, o->env,
                o->def ? o->def : "(unset)", "", o->help);
    }
    fprintf(out, "  --%-22s print this help\n", "help");
}

static int set_option(struct srv_config *cfg, const struct opt *o, const char *value,
                      const char *source)
{
    char *base = (char *)cfg + o->offset;
    if (o->type == OPT_STRING) {
        char **slot = (char **)base;
        free(*slot);
        *slot = value ? strdup(value) : NULL;
        return 0;
    }
    int64_t v;
    if (ty_parse_int64(value, o->min, o->max, &v) != 0) {
        fprintf(stderr, "trainyard-server: %s: '%s' is not an integer in [%lld, %lld]\n", source,
                value, (long long)o->min, (long long)o->max);
        return -1;
    }
    *(int64_t *)base = v;
    return 0;
}

int srv_config_load(struct srv_config *cfg, int argc, char **argv)
{
    memset(cfg, 0, sizeof(*cfg));
    const size_t n = sizeof(options) / sizeof(options[0]);
    for (size_t i = 0; i < n; i++) {
        const char *env = getenv(options[i].env);
        const char *v = env && *env ? env : options[i].def;
        if (v && set_option(cfg, &options[i], v, env && *env ? options[i].env : "default") != 0)
            goto fail;
    }
    for (int a = 1; a < argc; a++) {
        const char *arg = argv[a];
        if (strcmp(arg, "--help") == 0 || strcmp(arg, "-h") == 0) {
            usage(stdout);
            srv_config_free(cfg);
            exit(0);
        }
        if (strncmp(arg, "--", 2) != 0) {
            fprintf(stderr, "trainyard-server: unexpected argument '%s' (see --help)\n", arg);
            goto fail;
        }
        const char *name = arg + 2;
        const char *eq = strchr(name, '=');
        size_t nlen = eq ? (size_t)(eq - name) : strlen(name);
        const struct opt *o = NULL;
        for (size_t i = 0; i < n; i++)
            if (strlen(options[i].flag) == nlen && strncmp(options[i].flag, name, nlen) == 0)
                o = &options[i];
        if (o == NULL) {
            fprintf(stderr, "trainyard-server: unknown option '%s' (see --help)\n", arg);
            goto fail;
        }
        const char *value = eq ? eq + 1 : (a + 1 < argc ? argv[++a] : NULL);
        if (value == NULL) {
            fprintf(stderr, "trainyard-server: option --%s needs a value\n", o->flag);
            goto fail;
        }
        if (set_option(cfg, o, value, arg) != 0)
            goto fail;
    }
    if (strcmp(cfg->auth, "token") == 0) {
        cfg->auth_mode = SRV_AUTH_TOKEN;
    } else if (strcmp(cfg->auth, "none") == 0) {
        cfg->auth_mode = SRV_AUTH_NONE;
    } else {
        fprintf(stderr, "trainyard-server: --auth must be 'token' or 'none', not '%s'\n",
                cfg->auth);
        goto fail;
    }
    enum ty_log_level lvl;
    if (ty_log_level_from_string(cfg->log_level, &lvl) != 0) {
        fprintf(stderr, "trainyard-server: --log-level must be error, warn, info or debug\n");
        goto fail;
    }
    ty_log_set_level(lvl);
    ty_log_set_debug(cfg->debug);
    if (cfg->database_url && cfg->database_url[0] == '\0')
        TY_FREE(cfg->database_url);
    return 0;
fail:
    srv_config_free(cfg);
    return -1;
}

void srv_config_free(struct srv_config *cfg)
{
    for (size_t i = 0; i < sizeof(options) / sizeof(options[0]); i++) {
        if (options[i].type == OPT_STRING) {
            char **slot = (char **)((char *)cfg + options[i].offset);
            TY_FREE(*slot);
        }
    }
}

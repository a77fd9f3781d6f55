/* The server's options, declared once. Every option has a flag and a TRAINYARD_* variable. */
#include "config.h"

#include "log.h"
#include "options.h"
#include "util.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define S(field) TY_OPT_S(struct srv_config, field)
#define I(field) TY_OPT_I(struct srv_config, field)

static const struct option_def options[] = {
    {"http-host", "TRAINYARD_HTTP_HOST", S(http_host), "0.0.0.0", 0, 0,
     "address the REST API and the websocket port listen on"},
    {"http-port", "TRAINYARD_HTTP_PORT", I(http_port), "8080", 1, 65535, "REST API port"},
    {"ws-port", "TRAINYARD_WS_PORT", I(ws_port), "8081", 1, 65535,
     "websocket port for agents and live streams"},
    {"http-threads", "TRAINYARD_HTTP_THREADS", I(http_threads), "16", 1, 256,
     "HTTP worker threads (each holds one database connection)"},
    {"max-body-bytes", "TRAINYARD_MAX_BODY_BYTES", I(max_body_bytes), "1048576", 1024, 1073741824,
     "largest request body accepted (413 beyond)"},
    {"data-dir", "TRAINYARD_DATA_DIR", S(data_dir), "./trainyard-data", 0, 0,
     "state directory: embedded database, admin token, artifacts"},
    {"artifact-dir", "TRAINYARD_ARTIFACT_DIR", S(artifact_dir), NULL, 0, 0,
     "where the artifact store keeps uploaded checkpoints (default: <data-dir>/artifacts)"},
    {"database-url", "TRAINYARD_DATABASE_URL", S(database_url), NULL, 0, 0,
     "PostgreSQL connection string; unset: run an embedded PostgreSQL under --data-dir"},
    {"pg-bin-dir", "TRAINYARD_PG_BIN_DIR", S(pg_bin_dir), NULL, 0, 0,
     "directory of initdb and pg_ctl (default: newest /usr/lib/postgresql/*/bin)"},
    {"pg-fallback-dir", "TRAINYARD_PG_FALLBACK_DIR", S(pg_fallback_dir),
     "/var/lib/trainyard/postgres", 0, 0,
     "as root, where the embedded PostgreSQL lives when the postgres user cannot reach "
     "--data-dir (e.g. under /root); \"none\": refuse to start instead"},
    {"auth", "TRAINYARD_AUTH", S(auth), "token", 0, 0,
     "token: bearer API tokens with roles; none: no authentication (local experiments)"},
    {"heartbeat-timeout-s", "TRAINYARD_HEARTBEAT_TIMEOUT_S", I(heartbeat_timeout_s), "10", 1, 86400,
     "seconds without a heartbeat before a node is marked LOST"},
    {"stop-grace-s", "TRAINYARD_STOP_GRACE_S", I(stop_grace_s), "10", 0, 3600,
     "seconds between SIGTERM and SIGKILL when workers are stopped"},
    {"stream-queue-max", "TRAINYARD_STREAM_QUEUE_MAX", I(stream_queue_max), "10000", 4, 10000000,
     "messages queued for one /stream subscriber before it is closed as too slow (it may resume)"},
    {"max-stream-clients", "TRAINYARD_MAX_STREAM_CLIENTS", I(max_stream_clients), "1000", 1,
     1000000, "open /stream connections at most; more are refused with an error"},
    {"max-log-bytes-per-job", "TRAINYARD_MAX_LOG_BYTES_PER_JOB", I(max_log_bytes_per_job),
     "268435456", 0, INT64_C(1) << 50,
     "workers' output kept per job; past it the oldest log lines go (down to 90 %) and a "
     "log_dropped note says how many bytes (0: no cap)"},
    {"cluster-token", "TRAINYARD_CLUSTER_TOKEN", S(cluster_token), NULL, 0, 0,
     "token agents join with (default: made on first start, in <data-dir>/cluster.token)"},
    {"log-level", "TRAINYARD_LOG_LEVEL", S(log_level), "info", 0, 0, "error, warn, info or debug"},
    {"debug", "TRAINYARD_DEBUG", S(debug), "", 0, 0,
     "comma separated subsystems to debug-log (http,db,auth,all)"},
};

#undef S
#undef I

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

int srv_config_load(struct srv_config *cfg, int argc, char **argv)
{
    memset(cfg, 0, sizeof(*cfg));
    int rc = options_load(options, N_OPTIONS, cfg, "trainyard-server", argc, argv);
    if (rc == 1)
        exit(0);
    if (rc != 0)
        return -1;
    if (strcmp(cfg->auth, "token") == 0) {
        cfg->auth_mode = SRV_AUTH_TOKEN;
    } else if (strcmp(cfg->auth, "none") == 0) {
        cfg->auth_mode = SRV_AUTH_NONE;
    } else {
        fprintf(stderr, "trainyard-server: --auth must be 'token' or 'none', not '%s'\n",
                cfg->auth);
        goto fail;
    }
    enum log_level lvl;
    if (log_level_from_string(cfg->log_level, &lvl) != 0) {
        fprintf(stderr, "trainyard-server: --log-level must be error, warn, info or debug\n");
        goto fail;
    }
    log_set_level(lvl);
    log_set_debug(cfg->debug);
    if (cfg->database_url && cfg->database_url[0] == '\0')
        UTIL_FREE(cfg->database_url);
    return 0;
fail:
    srv_config_free(cfg);
    return -1;
}

void srv_config_free(struct srv_config *cfg)
{
    options_free(options, N_OPTIONS, cfg);
}

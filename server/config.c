/* The server's options, declared once. Every option has a flag and a TRAINYARD_* variable. */
#include "config.h"

#include "agent_proto.h"
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
    {"http-host", "TRAINYARD_HTTP_HOST", S(http_host), NULL, 0, 0,
     "address the REST API and the websocket port listen on (default: 0.0.0.0; 127.0.0.1 "
     "with --auth none)"},
    {"http-port", "TRAINYARD_HTTP_PORT", I(http_port), "8080", 1, 65535, "REST API port"},
    {"ws-port", "TRAINYARD_WS_PORT", I(ws_port), "8081", 1, 65535,
     "websocket port for agents and live streams"},
    {"public-url", "TRAINYARD_PUBLIC_URL", S(public_url), NULL, 0, 0,
     "this server's REST API as agents reach it (http(s)://host:port), told to each agent when it "
     "registers: its checkpoint uploads and code package fetches go there (default: the host "
     "the agent's --server names, on --http-port)"},
    {"http-threads", "TRAINYARD_HTTP_THREADS", I(http_threads), "16", 1, 256,
     "HTTP worker threads (each holds one database connection)"},
    {"http-max-connections", "TRAINYARD_HTTP_MAX_CONNECTIONS", I(http_max_connections), "1000", 1,
     100000, "open HTTP connections at most; more are refused"},
    {"http-max-connections-per-ip", "TRAINYARD_HTTP_MAX_CONNECTIONS_PER_IP", I(http_max_per_ip),
     "64", 0, 100000, "open HTTP connections from one address at most (0: no per-address cap)"},
    {"http-idle-timeout-s", "TRAINYARD_HTTP_IDLE_TIMEOUT_S", I(http_idle_timeout_s), "15", 1, 3600,
     "seconds an HTTP connection may stay silent (mid-request or between requests)"},
    {"http-head-timeout-s", "TRAINYARD_HTTP_HEAD_TIMEOUT_S", I(http_head_timeout_s), "10", 1, 3600,
     "seconds a request's line and headers may take to arrive, however steadily they trickle "
     "in; then the connection is closed (a kept-alive connection's next request gets the larger "
     "of this and --http-idle-timeout-s from the end of the one before)"},
    {"ws-max-connections", "TRAINYARD_WS_MAX_CONNECTIONS", I(ws_max_connections), "2000", 1, 100000,
     "open websocket connections (agents and /stream) at most; more are refused"},
    {"ws-max-preauth-per-ip", "TRAINYARD_WS_MAX_PREAUTH_PER_IP", I(ws_max_preauth_per_ip), "32", 1,
     100000, "websocket connections from one address not yet registered or authenticated"},
    {"ws-preauth-max-bytes", "TRAINYARD_WS_PREAUTH_MAX_BYTES", I(ws_preauth_max_bytes), "65536",
     1024, 16777216, "largest websocket message before a register or auth is accepted"},
    {"ws-auth-timeout-s", "TRAINYARD_WS_AUTH_TIMEOUT_S", I(ws_auth_timeout_s), "10", 1, 3600,
     "seconds a websocket peer has to register or authenticate before it is closed"},
    {"ws-queue-max", "TRAINYARD_WS_QUEUE_MAX", I(ws_queue_max), "100000", 16, 100000000,
     "websocket messages waiting for the server (past it reading pauses) or for one agent "
     "(past it the agent is disconnected; it reconnects and resends)"},
    {"ws-ping-s", "TRAINYARD_WS_PING_S", I(ws_ping_s), "30", 1, 3600,
     "seconds a websocket peer may stay silent before it is pinged; closed after three times "
     "this without even a pong"},
    {"db-pool-size", "TRAINYARD_DB_POOL_SIZE", I(db_pool_size), "0", 0, 4096,
     "pooled database connections (0: --http-threads + 4; the server's own loops hold 2)"},
    {"db-acquire-timeout-ms", "TRAINYARD_DB_ACQUIRE_TIMEOUT_MS", I(db_acquire_timeout_ms), "5000",
     1, 600000, "longest wait for a free pooled database connection; then 503 with Retry-After"},
    {"db-connect-timeout-s", "TRAINYARD_DB_CONNECT_TIMEOUT_S", I(db_connect_timeout_s), "5", 1,
     3600, "longest wait for a new database connection to open (libpq connect_timeout)"},
    {"max-upload-chunk-bytes", "TRAINYARD_MAX_UPLOAD_CHUNK_BYTES", I(max_upload_chunk_bytes),
     "16777216", 1024, 1073741824,
     "largest chunk of a checkpoint part or code package upload (PUT), beside --max-body-bytes for "
     "every other request; a code package chunk is held in memory while it is written, a part's "
     "chunk is written as it arrives"},
    {"max-body-bytes", "TRAINYARD_MAX_BODY_BYTES", I(max_body_bytes), "1048576", 1024, 1073741824,
     "largest request body accepted (413 beyond)"},
    {"data-dir", "TRAINYARD_DATA_DIR", S(data_dir), "./trainyard-data", 0, 0,
     "state directory: embedded database, admin token, artifacts"},
    {"artifact-dir", "TRAINYARD_ARTIFACT_DIR", S(artifact_dir), NULL, 0, 0,
     "where the artifact store keeps uploaded checkpoints (default: <data-dir>/artifacts)"},
    {"storage-path-allow", "TRAINYARD_STORAGE_PATH_ALLOW", S(storage_path_allow), NULL, 0, 0,
     "directories (absolute, ':'-separated) under which a job's run_config.storage_path may lie "
     "(a filesystem every node and the server mount); unset: storage_path is refused"},
    {"database-url", "TRAINYARD_DATABASE_URL", S(database_url), NULL, 0, 0,
     "PostgreSQL connection string; unset: run an embedded PostgreSQL under --data-dir"},
    {"pg-bin-dir", "TRAINYARD_PG_BIN_DIR", S(pg_bin_dir), NULL, 0, 0,
     "directory of initdb and pg_ctl (default: newest /usr/lib/postgresql/*/bin)"},
    {"pg-fallback-dir", "TRAINYARD_PG_FALLBACK_DIR", S(pg_fallback_dir),
     "/var/lib/trainyard/postgres", 0, 0,
     "as root, where the embedded PostgreSQL lives when the postgres user cannot reach "
     "--data-dir (e.g. under /root); \"none\": refuse to start instead"},
    {"pg-restart-attempts", "TRAINYARD_PG_RESTART_ATTEMPTS", I(pg_restart_attempts), "5", 0, 100,
     "when the embedded PostgreSQL dies, tries to restart it (crash recovery; the n-th try after "
     "n seconds) before the server exits non-zero with the reason (0: exit at once)"},
    {"auth", "TRAINYARD_AUTH", S(auth), "token", 0, 0,
     "token: bearer API tokens with roles; none: no authentication (local experiments)"},
    {"heartbeat-timeout-s", "TRAINYARD_HEARTBEAT_TIMEOUT_S", I(heartbeat_timeout_s), "10", 1, 86400,
     "seconds without a heartbeat before a node is marked LOST"},
    {"disk-pressure-mb", "TRAINYARD_DISK_PRESSURE_MB", I(disk_pressure_mb), "100", 0, 1000000000,
     "MiB: a node whose agent data directory has less free space is under disk pressure and "
     "takes no new workers (0: never)"},
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
    {"tls-cert", "TRAINYARD_TLS_CERT", S(tls_cert), NULL, 0, 0,
     "PEM certificate (chain) file: serve https:// and wss:// on both ports (needs --tls-key)"},
    {"tls-key", "TRAINYARD_TLS_KEY", S(tls_key), NULL, 0, 0, "PEM private key file of --tls-cert"},
    {"max-reports-per-worker", "TRAINYARD_MAX_REPORTS_PER_WORKER", I(max_reports_per_worker),
     "1000000", 1, INT64_C(1) << 50,
     "reports kept per worker and attempt (report_seq); later ones are acked and dropped"},
    {"max-report-bytes-per-job", "TRAINYARD_MAX_REPORT_BYTES_PER_JOB", I(max_job_report_bytes),
     "1073741824", 0, INT64_C(1) << 50,
     "bytes of reports (metrics as JSON, checkpoint directory names) kept per job; once reached, "
     "a job event says so and the job's later reports are acked and dropped (0: no cap)"},
    {"max-metrics-per-report", "TRAINYARD_MAX_METRICS_PER_REPORT", I(max_metrics_per_report),
     "1000", 1, 1000000, "metrics kept per report; the others are dropped as skipped"},
    {"max-metric-rows", "TRAINYARD_MAX_METRIC_ROWS", I(max_metric_rows), "2000000", 0,
     INT64_C(1) << 40,
     "metric rows one GET /jobs/{id}/metrics reads at most; past it 400 asks to narrow the "
     "query (0: no bound)"},
    {"max-workers-per-user", "TRAINYARD_MAX_WORKERS_PER_USER", I(max_workers_per_user), "0", 0,
     1000000,
     "placed or running workers of one user's jobs at most; more wait in the queue (0: no "
     "quota)"},
    {"max-cpus-per-user", "TRAINYARD_MAX_CPUS_PER_USER", I(max_cpus_per_user), "0", 0, 10000000,
     "CPUs the placed or running workers of one user's jobs may hold at once; more wait in the "
     "queue; a user's row of the quotas table overrides it (0: no quota)"},
    {"max-gpus-per-user", "TRAINYARD_MAX_GPUS_PER_USER", I(max_gpus_per_user), "0", 0, 10000000,
     "GPUs the placed or running workers of one user's jobs may hold at once; more wait in the "
     "queue; a user's row of the quotas table overrides it (0: no quota)"},
    {"max-priority-user", "TRAINYARD_MAX_PRIORITY_USER", I(max_priority_user), "100", -1000, 1000,
     "highest job priority a non-admin token may submit (admins: up to 1000)"},
    {"artifact-quota-bytes", "TRAINYARD_ARTIFACT_QUOTA_BYTES", I(artifact_quota_bytes),
     "53687091200", 0, INT64_C(1) << 60,
     "bytes one user may keep in the artifact store (code packages they uploaded, checkpoint parts "
     "of their jobs); past it their uploads are refused with 403 artifact-quota-exceeded; a row "
     "of the quotas table overrides it per user (0: no quota; never with --auth none)"},
    {"upload-stale-s", "TRAINYARD_UPLOAD_STALE_S", I(upload_stale_s), "86400", 1, INT64_C(1) << 40,
     "seconds a staged upload (a code package or checkpoint part never completed) may stay "
     "untouched before the server removes it"},
    {"cluster-token", "TRAINYARD_CLUSTER_TOKEN", S(cluster_token), NULL, 0, 0,
     "token agents join with (default: made on first start, in <data-dir>/cluster.token)"},
    {"slurm", "TRAINYARD_SLURM", S(slurm), NULL, 0, 0,
     "place every job through Slurm: slurmrestd at unix:/path/to/socket or http://host:port; "
     "each attempt is one Slurm allocation whose nodes run ephemeral agents (README, Slurm)"},
    {"slurm-token-file", "TRAINYARD_SLURM_TOKEN_FILE", S(slurm_token_file), NULL, 0, 0,
     "file holding the JWT for an http:// --slurm (`scontrol token` output), re-read when it "
     "changes"},
    {"slurm-partition", "TRAINYARD_SLURM_PARTITION", S(slurm_partition), NULL, 0, 0,
     "Slurm partition of the allocations (default: the cluster's default)"},
    {"slurm-account", "TRAINYARD_SLURM_ACCOUNT", S(slurm_account), NULL, 0, 0,
     "Slurm account the allocations are charged to (default: the user's default)"},
    {"slurm-agent-path", "TRAINYARD_SLURM_AGENT_PATH", S(slurm_agent_path), NULL, 0, 0,
     "trainyard-agent as the Slurm nodes see it (default: the one beside this server)"},
    {"web-dir", "TRAINYARD_WEB_DIR", S(web_dir), NULL, 0, 0,
     "the web dashboard's built files, served at / (default: <build>/web/dist beside the server, "
     "or "
     "<prefix>/share/trainyard/web when installed)"},
    {"log-level", "TRAINYARD_LOG_LEVEL", S(log_level), "info", 0, 0, "error, warn, info or debug"},
    {"debug", "TRAINYARD_DEBUG", S(debug), "", 0, 0,
     "comma separated subsystems to debug-log (http,db,auth,all)"},
};

#undef S
#undef I

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

int srv_config_resolve_host(struct srv_config *cfg)
{
    if (cfg->http_host && cfg->http_host[0] != '\0')
        return 0;
    free(cfg->http_host);
    cfg->http_host = strdup(cfg->auth_mode == SRV_AUTH_NONE ? "127.0.0.1" : "0.0.0.0");
    return cfg->http_host ? 0 : -1;
}

int srv_config_check_tls(struct srv_config *cfg)
{
    if (cfg->tls_cert && cfg->tls_cert[0] == '\0')
        UTIL_FREE(cfg->tls_cert);
    if (cfg->tls_key && cfg->tls_key[0] == '\0')
        UTIL_FREE(cfg->tls_key);
    if (!cfg->tls_cert != !cfg->tls_key) {
        fprintf(stderr, "trainyard-server: --tls-cert and --tls-key go together\n");
        return -1;
    }
    return 0;
}

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
    if (cfg->public_url && cfg->public_url[0] == '\0')
        UTIL_FREE(cfg->public_url);
    if (cfg->public_url) {
        size_t n = strlen(cfg->public_url);
        while (n > 0 && cfg->public_url[n - 1] == '/')
            cfg->public_url[--n] = '\0';
        if (!aproto_api_url_valid(cfg->public_url)) {
            fprintf(stderr,
                    "trainyard-server: --public-url must be an http:// or https:// URL, not "
                    "'%s'\n",
                    cfg->public_url);
            goto fail;
        }
    }
    if (srv_config_resolve_host(cfg) != 0 || srv_config_check_tls(cfg) != 0)
        goto fail;
    return 0;
fail:
    srv_config_free(cfg);
    return -1;
}

void srv_config_free(struct srv_config *cfg)
{
    options_free(options, N_OPTIONS, cfg);
}

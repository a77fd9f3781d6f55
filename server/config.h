/* Server configuration: one declarative table (config.c) gives every option its flag, its
 * TRAINYARD_* environment variable, its type, default and bounds. */
#ifndef SRV_CONFIG_H
#define SRV_CONFIG_H

#include <stdbool.h>
#include <stdint.h>

enum srv_auth_mode { SRV_AUTH_TOKEN, SRV_AUTH_NONE };

struct srv_config {
    char *http_host;
    int64_t http_port;
    int64_t ws_port;
    char *public_url; /* REST base URL agents upload to; NULL: http(s)://<host they dialled>:port */
    int64_t http_threads;
    int64_t http_max_connections;  /* open HTTP connections, at most */
    int64_t http_max_per_ip;       /* open HTTP connections from one address, at most */
    int64_t http_idle_timeout_s;   /* an HTTP connection silent this long is closed */
    int64_t http_head_timeout_s;   /* a request's line and headers must arrive within this */
    int64_t ws_max_connections;    /* open websocket connections, at most */
    int64_t ws_max_preauth_per_ip; /* unauthenticated websocket connections from one address */
    int64_t ws_preauth_max_bytes;  /* largest websocket message before authentication */
    int64_t ws_auth_timeout_s;     /* seconds to register / authenticate before being closed */
    int64_t ws_queue_max;          /* websocket messages queued each way, at most */
    int64_t ws_ping_s;             /* a silent websocket peer is pinged; closed after 3x */
    int64_t db_pool_size;          /* 0: http_threads + 4 */
    int64_t db_acquire_timeout_ms; /* wait for a pooled connection at most this long (503) */
    int64_t db_connect_timeout_s;  /* libpq connect_timeout */
    int64_t max_body_bytes;
    int64_t max_upload_chunk_bytes; /* bodies of PUTs of checkpoint parts and code packages */
    char *data_dir;
    char *artifact_dir;       /* NULL: <data_dir>/artifacts */
    char *storage_path_allow; /* ':'-separated prefixes for run_config.storage_path; NULL: none */
    char *database_url;       /* NULL: run the embedded PostgreSQL under data_dir */
    char *pg_bin_dir;         /* NULL: newest /usr/lib/postgresql/<v>/bin */
    char *pg_fallback_dir;    /* "none": no fallback (see pg_embedded.h) */
    int64_t pg_restart_attempts; /* restarts of a dead embedded postmaster before exiting */
    char *auth;                  /* "token" or "none" */
    enum srv_auth_mode auth_mode;
    int64_t heartbeat_timeout_s;
    int64_t disk_pressure_mb; /* a node whose agent data directory has less free takes no work */
    int64_t stop_grace_s;
    int64_t stream_queue_max;       /* messages waiting for one /stream subscriber, at most */
    int64_t max_stream_clients;     /* open /stream connections, at most */
    int64_t max_log_bytes_per_job;  /* 0: no cap */
    int64_t max_reports_per_worker; /* reports kept per worker attempt (report_seq) */
    int64_t max_job_report_bytes;   /* bytes of reports kept per job (0: no cap) */
    int64_t max_metrics_per_report; /* metrics kept per report */
    int64_t max_metric_rows;        /* rows GET /jobs/{id}/metrics reads at most (0: all) */
    int64_t max_workers_per_user;   /* live workers of one owner's jobs (0: no quota) */
    int64_t max_cpus_per_user;      /* CPUs one owner's live workers hold (0: no quota) */
    int64_t max_gpus_per_user;      /* GPUs one owner's live workers hold (0: no quota) */
    int64_t max_priority_user;      /* highest priority a non-admin may ask for */
    int64_t artifact_quota_bytes;   /* bytes one user keeps in the artifact store (0: no quota) */
    int64_t upload_stale_s;         /* staged uploads untouched this long are removed */
    char *tls_cert;                 /* NULL: plain http:// and ws:// */
    char *tls_key;                  /* set exactly when tls_cert is */
    char *cluster_token;            /* NULL: <data_dir>/cluster.token */
    char *web_dir;                  /* NULL: found beside the executable (http/static.c) */
    char *slurm;                    /* NULL: no Slurm; else slurmrestd's URL (control_slurm.c) */
    char *slurm_token_file;         /* JWT for an http:// slurmrestd */
    char *slurm_partition, *slurm_account; /* NULL: Slurm's defaults */
    char *slurm_agent_path;                /* NULL: trainyard-agent beside the server */
    char *log_level;
    char *debug;
};

/* Fills `cfg` from defaults, then the environment, then argv (flags win). Prints --help and
 * exits 0 when asked; prints the problem and returns -1 for a bad value or unknown flag.
 * Free with srv_config_free(). */
int srv_config_load(struct srv_config *cfg, int argc, char **argv);
/* Gives an unset or empty http_host its default: 127.0.0.1 under --auth none (an
 * unauthenticated server is not offered to the network unless --http-host says so), 0.0.0.0
 * otherwise. Needs auth_mode set. 0, or -1 out of memory. */
int srv_config_resolve_host(struct srv_config *cfg);

/* Empty --tls-cert/--tls-key count as unset; one without the other is an error (printed).
 * 0 or -1. */
int srv_config_check_tls(struct srv_config *cfg);

void srv_config_free(struct srv_config *cfg);

#endif

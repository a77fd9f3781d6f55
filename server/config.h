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
    int64_t http_threads;
    int64_t max_body_bytes;
    char *data_dir;
    char *artifact_dir;    /* NULL: <data_dir>/artifacts */
    char *database_url;    /* NULL: run the embedded PostgreSQL under data_dir */
    char *pg_bin_dir;      /* NULL: newest /usr/lib/postgresql/<v>/bin */
    char *pg_fallback_dir; /* "none": no fallback (see pg_embedded.h) */
    char *auth;            /* "token" or "none" */
    enum srv_auth_mode auth_mode;
    int64_t heartbeat_timeout_s;
    int64_t stop_grace_s;
    int64_t stream_queue_max;      /* messages waiting for one /stream subscriber, at most */
    int64_t max_stream_clients;    /* open /stream connections, at most */
    int64_t max_log_bytes_per_job; /* 0: no cap */
    char *cluster_token;           /* NULL: <data_dir>/cluster.token */
    char *log_level;
    char *debug;
};

/* Fills `cfg` from defaults, then the environment, then argv (flags win). Prints --help and
 * exits 0 when asked; prints the problem and returns -1 for a bad value or unknown flag.
 * Free with srv_config_free(). */
int srv_config_load(struct srv_config *cfg, int argc, char **argv);
void srv_config_free(struct srv_config *cfg);

#endif

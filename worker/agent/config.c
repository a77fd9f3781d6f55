/* The agent's options, declared once (like server/config.c). Every option has a flag and a
 * TRAINYARD_* variable; flags win over variables, variables over defaults. */
#include "agent.h"

#include "log.h"
#include "options.h"
#include "util.h"

#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifndef AGENT_DEFAULT_PYTHON_PATH
#define AGENT_DEFAULT_PYTHON_PATH "worker/python"
#endif

#define S(field) TY_OPT_S(struct agent_config, field)
#define I(field) TY_OPT_I(struct agent_config, field)

static const struct option_def options[] = {
    {"server", "TRAINYARD_AGENT_SERVER", S(server), "ws://127.0.0.1:8081", 0, 0,
     "server websocket URL (ws://host:port, or wss:// for TLS); the agent connects to /agent. "
     "Several servers of one cluster: a comma-separated list (a repeated --server replaces the "
     "earlier one), tried in turn on reconnects"},
    {"ca-file", "TRAINYARD_CA_FILE", S(ca_file), NULL, 0, 0,
     "wss://: PEM file of the CA(s) the server's certificate must chain to (default: the "
     "system's)"},
    {"server-fingerprint", "TRAINYARD_SERVER_FINGERPRINT", S(server_fingerprint), NULL, 0, 0,
     "wss://: sha256:HEX of the server's certificate (DER), pinned instead of a CA check"},
    {"token", "TRAINYARD_CLUSTER_TOKEN", S(token), NULL, 0, 0,
     "cluster join token (ignored by a server running --auth none); prefer --token-file"},
    {"token-file", "TRAINYARD_CLUSTER_TOKEN_FILE", S(token_file), NULL, 0, 0,
     "file holding the cluster join token (keeps it off the command line); wins over --token"},
    {"data-dir", "TRAINYARD_AGENT_DATA_DIR", S(data_dir), "./trainyard-agent-data", 0, 0,
     "state directory: node-id file, worker logs, report spool, report.sock"},
    {"run-as", "TRAINYARD_AGENT_RUN_AS", S(run_as), "auto", 0, 0,
     "what workers run as: auto (a uid per job from --worker-uids when the agent is root, else "
     "the agent's user), uids, none (the agent's user), or a user name (all jobs share it)"},
    {"worker-uids", "TRAINYARD_AGENT_WORKER_UIDS", S(worker_uids), "2000000000-2000009999", 0, 0,
     "LO-HI: the uids --run-as uids gives jobs (no passwd entry needed; keep them unused)"},
    {"uid-lock-dir", "TRAINYARD_AGENT_UID_LOCK_DIR", S(uid_lock_dir), "/run/trainyard", 0, 0,
     "where a root agent reserves each uid it gives a job, for every agent of the host (one "
     "flock'd file per uid; share it between the agents of a host)"},
    {"cgroups", "TRAINYARD_AGENT_CGROUPS", S(cgroups), "auto", 0, 0,
     "each worker in a cgroup of its own (limits, usage, clean-up): auto (when the agent can "
     "create cgroups, else it says so and runs workers without), required (refuse to start "
     "without), off"},
    {"worker-pids-max", "TRAINYARD_AGENT_WORKER_PIDS_MAX", I(worker_pids_max), "4096", 0, 4194304,
     "processes and threads one worker may have at once (its cgroup's pids.max; 0: no "
     "limit)"},
    {"api-url", "TRAINYARD_API_URL", S(api_url), NULL, 0, 0,
     "server REST URL checkpoints are uploaded to and code is fetched from, overriding the one "
     "the server names when the agent registers (its --public-url, else --server's host on its "
     "--http-port); none: keep checkpoints on this node only"},
    {"node-id", "TRAINYARD_NODE_ID", S(node_id), NULL, 0, 0,
     "node id (default: generated once and kept in <data-dir>/node-id)"},
    {"address", "TRAINYARD_AGENT_ADDRESS", S(address), NULL, 0, 0,
     "advertised address (default: the local address used to reach the server)"},
    {"cpus", "TRAINYARD_AGENT_CPUS", I(cpus), "0", 0, 1 << 20, "CPUs offered (0: detect)"},
    {"memory-mb", "TRAINYARD_AGENT_MEMORY_MB", I(memory_mb), "0", 0, INT64_C(1) << 40,
     "memory offered in MiB (0: MemTotal of /proc/meminfo)"},
    {"gpus", "TRAINYARD_AGENT_GPUS", S(gpus), NULL, 0, 0,
     "declared GPU indices \"0,1,2,3\" or \"none\" (default: detect through NVML)"},
    {"gpu-type", "TRAINYARD_AGENT_GPU_TYPE", S(gpu_type), NULL, 0, 0,
     "accelerator type, e.g. H100 (default: the NVML device name, e.g. NVIDIA H100 80GB HBM3)"},
    {"nvml-library", "TRAINYARD_NVML_LIBRARY", S(nvml_library), NULL, 0, 0,
     "NVML library to load (default: libnvidia-ml.so.1)"},
    {"gpu-sample-interval", "TRAINYARD_AGENT_GPU_SAMPLE_INTERVAL", I(gpu_sample_interval_s), "5", 0,
     3600, "seconds between samples of the GPUs' use sent to the server (0: none)"},
    {"resources", "TRAINYARD_AGENT_RESOURCES", S(resources), NULL, 0, 0,
     "custom resources as JSON, e.g. '{\"tpu\": 4}'"},
    {"labels", "TRAINYARD_AGENT_LABELS", S(labels), NULL, 0, 0,
     "node labels: JSON object of strings or k=v,k2=v2"},
    {"port-range", "TRAINYARD_AGENT_PORT_RANGE", S(port_range), "29500-29999", 0, 0,
     "ports the server may hand out as MASTER_PORT on this node"},
    {"stop-grace-s", "TRAINYARD_AGENT_STOP_GRACE_S", I(stop_grace_s), "10", 0, 86400,
     "seconds between SIGTERM and SIGKILL when stopping workers at agent shutdown"},
    {"warm-python", "TRAINYARD_AGENT_WARM_PYTHON", I(warm_python), "0", 0, 64,
     "Python interpreters kept started per --warm-frameworks entry, each with that framework "
     "imported, as the uid and in the cgroup of the next worker; a Python worker that fits "
     "(docs/decisions.md) takes one at launch and restart instead of starting cold (0: off)"},
    {"warm-frameworks", "TRAINYARD_AGENT_WARM_FRAMEWORKS", S(warm_frameworks), "torch", 0, 0,
     "comma-separated modules the warm interpreters import, one pool each (a job takes one whose "
     "module is its backend); none: a bare interpreter, which fits any backend"},
    {"warm-python-exe", "TRAINYARD_AGENT_WARM_PYTHON_EXE", S(warm_python_exe), "/usr/bin/python3",
     0, 0,
     "the Python the warm interpreters run; a job takes one only when its entrypoint runs "
     "this same Python (after links)"},
    {"python-path", "TRAINYARD_AGENT_PYTHON_PATH", S(python_path), AGENT_DEFAULT_PYTHON_PATH, 0, 0,
     "directory holding trainyard.py, put first on every worker's PYTHONPATH"},
    {"heartbeat-interval", "TRAINYARD_AGENT_HEARTBEAT_INTERVAL", I(heartbeat_interval_s), "0", 0,
     3600, "seconds between heartbeats (0: the interval the server asks for)"},
    {"orphan-timeout-s", "TRAINYARD_AGENT_ORPHAN_TIMEOUT_S", I(orphan_timeout_s), "0", 0,
     INT64_C(31536000),
     "seconds workers outlive a crashed agent before their supervisors kill them (0: four "
     "heartbeat intervals of the server, about its node-lost timeout)"},
    {"ephemeral", "TRAINYARD_AGENT_EPHEMERAL", I(ephemeral_s), "0", 0, 86400,
     "ephemeral (issue 28, started in a Slurm allocation): exit once the workers that ran here "
     "have ended, or after this many seconds without a server; SIGUSR1 asks the server to "
     "preempt this node's jobs (0: a daemon)"},
    {"log-line-max", "TRAINYARD_AGENT_LOG_LINE_MAX", I(log_line_max), "16384", 64, 1048576,
     "workers' output lines longer than this many bytes are split"},
    {"log-backlog-max-bytes", "TRAINYARD_AGENT_LOG_BACKLOG_MAX_BYTES", I(log_backlog_max),
     "268435456", 1048576, INT64_C(1) << 40,
     "unacked bytes of one worker's log before the oldest are skipped (a log_dropped note says "
     "how many)"},
    {"max-queued-bytes", "TRAINYARD_AGENT_MAX_QUEUED_BYTES", I(max_queued_bytes), "67108864", 4096,
     INT64_C(1) << 40,
     "events (reports, logs) held for the server above which workers' reports wait (their "
     "report() blocks) until the server acks some: the agent's memory and spool stay bounded "
     "while the server is away"},
    {"report-hello-timeout-s", "TRAINYARD_AGENT_REPORT_HELLO_TIMEOUT_S", I(report_hello_timeout_s),
     "10", 1, 3600,
     "a connection to the report socket that has not said a valid hello this many seconds after "
     "it was accepted is closed"},
    {"report-max-conns-per-uid", "TRAINYARD_AGENT_REPORT_MAX_CONNS_PER_UID",
     I(report_max_conns_per_uid), "64", 2, 100000,
     "open report-socket connections from processes of one uid (one worker's, under --run-as "
     "auto; every worker's when they share the agent's uid) at most; more are closed at once"},
    {"log-flush-ms", "TRAINYARD_AGENT_LOG_FLUSH_MS", I(log_flush_ms), "500", 0, 60000,
     "a worker's partial last line (no newline yet) is sent after waiting this long"},
    {"code-cache-bytes", "TRAINYARD_AGENT_CODE_CACHE_BYTES", I(code_cache_bytes), "2147483648", 0,
     INT64_C(1) << 50,
     "code and checkpoint packages kept (as fetched) in <data-dir>/code: beyond this, the least "
     "recently used are removed (never one a running worker was launched with)"},
    {"unpack-max-bytes", "TRAINYARD_AGENT_UNPACK_MAX_BYTES", I(unpack_max_bytes), "4294967296", 1,
     INT64_C(1) << 50,
     "a code or checkpoint package whose files unpack to more bytes fails its job (the unpacking "
     "stops at the cap: a small archive cannot fill the node's disk)"},
    {"unpack-max-entries", "TRAINYARD_AGENT_UNPACK_MAX_ENTRIES", I(unpack_max_entries), "100000", 1,
     INT64_C(1) << 40,
     "a code or checkpoint package holding more entries (files, directories, links) fails its "
     "job"},
    {"log-level", "TRAINYARD_LOG_LEVEL", S(log_level), "info", 0, 0, "error, warn, info or debug"},
    {"debug", "TRAINYARD_DEBUG", S(debug), "", 0, 0,
     "comma separated subsystems to debug-log (ws,proc,report,all)"},
};

#undef S
#undef I

#define N_OPTIONS (sizeof(options) / sizeof(options[0]))

/* Replaces cfg->token with the contents of cfg->token_file, surrounding white space removed.
 * 0, or -1 with the problem printed (unreadable or empty file). */
static int load_token_file(struct agent_config *cfg)
{
    char *text = util_read_file(cfg->token_file, NULL);
    if (!text) {
        fprintf(stderr, "trainyard-agent: --token-file %s: %s\n", cfg->token_file, strerror(errno));
        return -1;
    }
    char *b = text;
    while (*b == ' ' || *b == '\t' || *b == '\n' || *b == '\r')
        b++;
    size_t n = strlen(b);
    while (n > 0 && (b[n - 1] == ' ' || b[n - 1] == '\t' || b[n - 1] == '\n' || b[n - 1] == '\r'))
        n--;
    if (n == 0) {
        fprintf(stderr, "trainyard-agent: --token-file %s is empty\n", cfg->token_file);
        free(text);
        return -1;
    }
    memmove(text, b, n);
    text[n] = '\0';
    free(cfg->token);
    cfg->token = text;
    return 0;
}

/* Derives the parsed fields from the raw strings. 0, or -1 with the problem printed. */
static int derive(struct agent_config *cfg)
{
    char err[256];
    if (agent_parse_server_list(cfg->server, &cfg->servers, &cfg->n_servers, &cfg->url_tls, err,
                                sizeof(err)) != 0) {
        fprintf(stderr, "trainyard-agent: --server: %s\n", err);
        return -1;
    }
    cfg->url_host = strdup(cfg->servers[0].host);
    cfg->url_path = strdup(cfg->servers[0].path);
    cfg->url_port = cfg->servers[0].port;
    if (!cfg->url_host || !cfg->url_path) {
        fprintf(stderr, "trainyard-agent: out of memory\n");
        return -1;
    }
    if (cfg->token_file && load_token_file(cfg) != 0)
        return -1;
    if (cfg->server_fingerprint && *cfg->server_fingerprint) {
        if (agent_parse_fingerprint(cfg->server_fingerprint, cfg->pin, err, sizeof(err)) != 0) {
            fprintf(stderr, "trainyard-agent: --server-fingerprint: %s\n", err);
            return -1;
        }
        cfg->pinned = true;
    }
    if (cfg->ca_file && !*cfg->ca_file)
        UTIL_FREE(cfg->ca_file);
    if ((cfg->pinned || cfg->ca_file) && !cfg->url_tls) {
        fprintf(stderr, "trainyard-agent: --ca-file and --server-fingerprint need a wss:// "
                        "--server\n");
        return -1;
    }
    if (agent_parse_port_range(cfg->port_range, &cfg->port_lo, &cfg->port_hi, err, sizeof(err)) !=
        0) {
        fprintf(stderr, "trainyard-agent: --port-range: %s\n", err);
        return -1;
    }
    if (cfg->gpus) {
        cfg->gpus_declared = true;
        if (agent_parse_gpu_list(cfg->gpus, &cfg->gpu_list, &cfg->n_gpus, err, sizeof(err)) != 0) {
            fprintf(stderr, "trainyard-agent: --gpus: %s\n", err);
            return -1;
        }
    }
    if (agent_parse_resources(cfg->resources, &cfg->resources_json, err, sizeof(err)) != 0) {
        fprintf(stderr, "trainyard-agent: --resources: %s\n", err);
        return -1;
    }
    if (agent_parse_labels(cfg->labels, &cfg->labels_json, err, sizeof(err)) != 0) {
        fprintf(stderr, "trainyard-agent: --labels: %s\n", err);
        return -1;
    }
    if (cfg->node_id && (strlen(cfg->node_id) > 128 || aproto_job_id_valid(cfg->node_id) != 0)) {
        fprintf(stderr, "trainyard-agent: --node-id: use 1-128 characters of [A-Za-z0-9._-]\n");
        return -1;
    }
    if (!cfg->data_dir || !*cfg->data_dir) {
        fprintf(stderr, "trainyard-agent: --data-dir must not be empty\n");
        return -1;
    }
    for (const char *f = cfg->warm_frameworks; f && *f;) {
        size_t n = strcspn(f, ",");
        if (n == 0 || n >= 64 ||
            strspn(f, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"
                      "0123456789_.") < n) {
            fprintf(stderr, "trainyard-agent: --warm-frameworks: a comma-separated list of Python "
                            "module names (or none)\n");
            return -1;
        }
        f += n + (f[n] == ',');
    }
    enum log_level lvl;
    if (log_level_from_string(cfg->log_level, &lvl) != 0) {
        fprintf(stderr, "trainyard-agent: --log-level must be error, warn, info or debug\n");
        return -1;
    }
    log_set_level(lvl);
    log_set_debug(cfg->debug);
    return 0;
}

int agent_config_load(struct agent_config *cfg, int argc, char **argv)
{
    memset(cfg, 0, sizeof(*cfg));
    int rc = options_load(options, N_OPTIONS, cfg, "trainyard-agent", argc, argv);
    if (rc != 0)
        return rc;
    if (derive(cfg) != 0)
        goto fail;
    return 0;
fail:
    agent_config_free(cfg);
    return -1;
}

void agent_config_free(struct agent_config *cfg)
{
    options_free(options, N_OPTIONS, cfg);
    agent_server_urls_free(cfg->servers, cfg->n_servers);
    cfg->servers = NULL;
    cfg->n_servers = 0;
    UTIL_FREE(cfg->url_host);
    UTIL_FREE(cfg->url_path);
    UTIL_FREE(cfg->gpu_list);
    cfg->n_gpus = 0;
    json_decref(cfg->resources_json);
    cfg->resources_json = NULL;
    json_decref(cfg->labels_json);
    cfg->labels_json = NULL;
}

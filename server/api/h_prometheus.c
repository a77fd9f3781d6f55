/* GET /metrics: the server's figures in Prometheus text format 0.0.4 (docs/metrics.md), on the
 * HTTP port beside the REST API. Who may read it: any token (viewer and up) once auth is on, as
 * every other endpoint but health; with --auth none the server listens on loopback only, so
 * anyone on that host. Prometheus sends the token with `authorization: {credentials: ...}` in
 * its scrape config.
 *
 * The cluster figures (jobs, queue, nodes, CPUs, GPUs, running workers' use, goodput) come from
 * read-only queries; when the database does not answer, they are left out,
 * trainyard_database_up is 0, and the in-process counters are still served. A running worker's
 * use is shown only when its job is one the scraper may see (a private project's: members and
 * admins). */
#include "db.h"
#include "handlers.h"
#include "job_status.h"
#include "prom.h"
#include "server.h"
#include "store.h"
#include "submit_queue.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define LOAD(x) ((double)atomic_load_explicit(&(x), memory_order_relaxed))

struct cluster_read {
    const struct srv_identity *who;
    struct store_cluster_stats stats;
    char *gpus;    /* JSON array of store_node_gpus */
    char *usage;   /* JSON array of store_running_usage */
    char *goodput; /* JSON array of store_goodput_by_owner */
};

static int read_stats(struct db_conn *c, void *arg)
{
    struct cluster_read *r = arg;
    int rc = store_cluster_stats(c, &r->stats);
    if (rc >= 0)
        rc = store_node_gpus(c, &r->gpus);
    if (rc >= 0)
        rc = store_running_usage(c, r->who, &r->usage);
    return rc < 0 ? rc : store_goodput_by_owner(c, r->who, &r->goodput);
}

/* Goodput (README, "Goodput and the startup breakdown") per owner and for the whole cluster, over
 * the jobs the scraper may see that run or ended in the last day. */
static void goodput_figures(struct textbuf *b, const char *text)
{
    json_t *rows = text ? json_loads(text, 0, NULL) : NULL;
    static const struct {
        const char *name, *help;
        size_t col;
    } fam[] = {
        {"trainyard_goodput_useful_seconds",
         "Useful training time of an owner's jobs that ran in the last day.", 1},
        {"trainyard_goodput_lost_seconds",
         "Training time lost to failures (after the last checkpoint), same jobs.", 2},
        {"trainyard_goodput_wall_seconds", "Wall time from submission to end (or now), same jobs.",
         3},
    };
    double total[4] = {0};
    size_t i;
    json_t *r;
    for (size_t f = 0; json_is_array(rows) && f < sizeof(fam) / sizeof(fam[0]); f++) {
        prom_family(b, fam[f].name, "gauge", fam[f].help);
        json_array_foreach(rows, i, r)
        {
            const char *l[] = {"owner", json_string_value(json_array_get(r, 0)), NULL};
            double v = json_number_value(json_array_get(r, fam[f].col));
            prom_sample(b, fam[f].name, l, v);
            total[fam[f].col] += v;
        }
    }
    if (json_is_array(rows)) {
        prom_family(b, "trainyard_goodput_ratio", "gauge",
                    "Useful over wall time of all jobs that ran in the last day (0 when none).");
        prom_sample(b, "trainyard_goodput_ratio", NULL, total[3] > 0 ? total[1] / total[3] : 0);
    }
    json_decref(rows);
}

/* The running workers' CPU time and memory, from their cgroups (labels job, rank, node); only
 * those of jobs the scraper may see. */
static void usage_figures(struct textbuf *b, const char *text)
{
    json_t *rows = text ? json_loads(text, 0, NULL) : NULL;
    static const struct {
        const char *name, *type, *help;
        size_t col;
        double scale;
    } fam[] = {
        {"trainyard_worker_cpu_seconds_total", "counter",
         "CPU time of a running worker's processes (its cgroup), user and system.", 3, 1e-6},
        {"trainyard_worker_memory_bytes", "gauge",
         "Memory a running worker's cgroup charges, page cache included.", 4, 1.0},
    };
    for (size_t f = 0; json_is_array(rows) && f < sizeof(fam) / sizeof(fam[0]); f++) {
        prom_family(b, fam[f].name, fam[f].type, fam[f].help);
        size_t i;
        json_t *r;
        json_array_foreach(rows, i, r)
        {
            char job[24], rank[24];
            snprintf(job, sizeof(job), "%lld", (long long)json_integer_value(json_array_get(r, 0)));
            snprintf(rank, sizeof(rank), "%lld",
                     (long long)json_integer_value(json_array_get(r, 1)));
            const char *node = json_string_value(json_array_get(r, 2));
            const char *l[] = {"job", job, "rank", rank, "node", node ? node : "", NULL};
            prom_sample(b, fam[f].name, l,
                        (double)json_integer_value(json_array_get(r, fam[f].col)) * fam[f].scale);
        }
    }
    json_decref(rows);
}

/* One gauge per GPU of the alive nodes (labels node, gpu, uuid), from the agents' NVML samples;
 * a sample NVML did not give (null) is left out. */
static void gpu_family(struct textbuf *b, json_t *gpus, const char *name, const char *help,
                       const char *field, double scale)
{
    prom_family(b, name, "gauge", help);
    size_t i;
    json_t *g;
    json_array_foreach(gpus, i, g)
    {
        json_t *v = json_object_get(g, field);
        if (!json_is_number(v) && !json_is_boolean(v))
            continue;
        char index[24];
        snprintf(index, sizeof(index), "%lld",
                 (long long)json_integer_value(json_object_get(g, "index")));
        const char *node = json_string_value(json_object_get(g, "node"));
        const char *uuid = json_string_value(json_object_get(g, "uuid"));
        const char *l[] = {"node", node ? node : "", "gpu", index, "uuid", uuid ? uuid : "", NULL};
        double x = json_is_boolean(v) ? (json_is_true(v) ? 1 : 0) : json_number_value(v) * scale;
        prom_sample(b, name, l, x);
    }
}

static void gpu_figures(struct textbuf *b, const char *text)
{
    json_t *gpus = text ? json_loads(text, 0, NULL) : NULL;
    if (!json_is_array(gpus) || json_array_size(gpus) == 0) {
        json_decref(gpus);
        return;
    }
    gpu_family(b, gpus, "trainyard_gpu_utilization_ratio", "GPU busy share, NVML's last sample.",
               "utilization_pct", 0.01);
    gpu_family(b, gpus, "trainyard_gpu_memory_used_bytes", "GPU memory in use.", "memory_used_mb",
               1048576.0);
    gpu_family(b, gpus, "trainyard_gpu_memory_total_bytes", "GPU memory.", "memory_mb", 1048576.0);
    gpu_family(b, gpus, "trainyard_gpu_temperature_celsius", "GPU temperature.", "temperature_c",
               1.0);
    gpu_family(b, gpus, "trainyard_gpu_power_watts", "GPU power draw.", "power_mw", 0.001);
    gpu_family(b, gpus, "trainyard_gpu_lost", "1 when the GPU left NVML (out of capacity).", "lost",
               1.0);
    json_decref(gpus);
}

static void cluster_figures(struct textbuf *b, const struct store_cluster_stats *s)
{
    prom_family(b, "trainyard_jobs", "gauge", "Jobs by status.");
    for (int i = 0; i < JOB_STATUS_COUNT; i++) {
        const char *l[] = {"status", job_status_name((enum job_status)i), NULL};
        prom_sample(b, "trainyard_jobs", l, (double)s->jobs_by_status[i]);
    }
    prom_family(b, "trainyard_queue_length", "gauge", "PENDING jobs.");
    prom_sample(b, "trainyard_queue_length", NULL, (double)s->queue_length);
    prom_family(b, "trainyard_queue_oldest_pending_seconds", "gauge",
                "Age of the oldest PENDING job (0 when none).");
    prom_sample(b, "trainyard_queue_oldest_pending_seconds", NULL, s->oldest_pending_s);
    prom_family(b, "trainyard_nodes", "gauge", "Nodes by state (alive excludes draining).");
    const char *alive[] = {"state", "alive", NULL}, *draining[] = {"state", "draining", NULL},
               *lost[] = {"state", "lost", NULL};
    prom_sample(b, "trainyard_nodes", alive, (double)s->nodes_alive);
    prom_sample(b, "trainyard_nodes", draining, (double)s->nodes_draining);
    prom_sample(b, "trainyard_nodes", lost, (double)s->nodes_lost);
    prom_family(b, "trainyard_cpus_total", "gauge", "CPUs of alive nodes.");
    prom_sample(b, "trainyard_cpus_total", NULL, s->cpus_total);
    prom_family(b, "trainyard_cpus_allocated", "gauge", "CPUs held by placed or running workers.");
    prom_sample(b, "trainyard_cpus_allocated", NULL, s->cpus_allocated);
    prom_family(b, "trainyard_gpus_total", "gauge", "GPUs of alive nodes.");
    prom_sample(b, "trainyard_gpus_total", NULL, (double)s->gpus_total);
    prom_family(b, "trainyard_gpus_allocated", "gauge", "GPUs held by placed or running workers.");
    prom_sample(b, "trainyard_gpus_allocated", NULL, (double)s->gpus_allocated);
}

static void counter(struct textbuf *b, const char *name, const char *help, double v)
{
    prom_family(b, name, "counter", help);
    prom_sample(b, name, NULL, v);
}

static void ingest_figures(struct textbuf *b, struct srv_telemetry *t)
{
    counter(b, "trainyard_reports_ingested_total", "Reports committed (resends not counted).",
            LOAD(t->reports_ingested));
    counter(b, "trainyard_metric_points_ingested_total", "Metric points committed.",
            LOAD(t->metric_points_ingested));
    counter(b, "trainyard_log_lines_ingested_total", "Log lines committed.",
            LOAD(t->log_lines_ingested));
    counter(b, "trainyard_log_bytes_ingested_total", "Log bytes committed.",
            LOAD(t->log_bytes_ingested));
    counter(b, "trainyard_log_bytes_dropped_total", "Log bytes removed by the log cap.",
            LOAD(t->log_bytes_dropped));
    prom_family(b, "trainyard_stream_subscribers", "gauge", "Open /stream connections.");
    prom_sample(b, "trainyard_stream_subscribers", NULL, LOAD(t->stream_subscribers));
    counter(b, "trainyard_stream_dropped_subscribers_total",
            "/stream connections closed for falling behind.", LOAD(t->stream_dropped));
    counter(b, "trainyard_stream_events_sent_total", "Events queued to /stream subscribers.",
            LOAD(t->stream_events_sent));
}

static void http_figures(struct textbuf *b, struct srv_telemetry *t)
{
    static const char *const classes[6] = {"other", "1xx", "2xx", "3xx", "4xx", "5xx"};
    prom_family(b, "trainyard_http_requests_total", "counter",
                "HTTP requests by route (of the routing table) and status class.");
    for (size_t i = 0; i <= SRV_TELEMETRY_MAX_ROUTES; i++) {
        bool unmatched = i == SRV_TELEMETRY_MAX_ROUTES;
        if (!unmatched && srv_routes[i].method == NULL) {
            i = SRV_TELEMETRY_MAX_ROUTES - 1; /* next: the unmatched ones */
            continue;
        }
        const char *method = unmatched ? "" : srv_routes[i].method;
        const char *route = unmatched ? "unmatched" : srv_routes[i].pattern;
        for (int c = 0; c < 6; c++) {
            if (c == 1)
                continue; /* no 1xx replies */
            const char *l[] = {"method", method, "route", route, "code", classes[c], NULL};
            prom_sample(b, "trainyard_http_requests_total", l, LOAD(t->http.routes[i].by_class[c]));
        }
    }
    prom_family(b, "trainyard_http_request_duration_seconds", "histogram",
                "HTTP request latency by route, from arrival to completion.");
    for (size_t i = 0; i <= SRV_TELEMETRY_MAX_ROUTES; i++) {
        bool unmatched = i == SRV_TELEMETRY_MAX_ROUTES;
        if (!unmatched && srv_routes[i].method == NULL) {
            i = SRV_TELEMETRY_MAX_ROUTES - 1;
            continue;
        }
        const char *l[] = {"method", unmatched ? "" : srv_routes[i].method, "route",
                           unmatched ? "unmatched" : srv_routes[i].pattern, NULL};
        prom_histogram(b, "trainyard_http_request_duration_seconds", l, &t->http.routes[i].latency);
    }
}

enum MHD_Result h_prometheus(struct srv_request *req)
{
    struct srv *srv = req->srv;
    struct cluster_read cr = {.who = &req->who};
    bool db_up = db_with_conn(srv->db, read_stats, &cr) >= 0;
    struct textbuf b;
    textbuf_init(&b, 8192);
    prom_family(&b, "trainyard_database_up", "gauge",
                "1 when the database answered this scrape's query, else 0.");
    prom_sample(&b, "trainyard_database_up", NULL, db_up ? 1 : 0);
    if (db_up) {
        cluster_figures(&b, &cr.stats);
        gpu_figures(&b, cr.gpus);
        usage_figures(&b, cr.usage);
        goodput_figures(&b, cr.goodput);
    }
    free(cr.gpus);
    free(cr.usage);
    free(cr.goodput);
    ingest_figures(&b, &srv->telemetry);
    http_figures(&b, &srv->telemetry);
    uint64_t waits, wait_us;
    db_pool_waits(srv->db, &waits, &wait_us);
    counter(&b, "trainyard_db_pool_waits_total",
            "Times a thread found every pooled database connection in use and waited.",
            (double)waits);
    counter(&b, "trainyard_db_pool_wait_seconds_total", "Time spent waiting for a connection.",
            (double)wait_us / 1e6);
    counter(&b, "trainyard_db_pool_timeouts_total",
            "Times a thread gave up waiting for a pooled connection (answered 503).",
            (double)db_pool_timeouts(srv->db));
    prom_family(&b, "trainyard_submissions_queued", "gauge",
                "POST /api/v1/jobs requests waiting for a batch to be committed in.");
    prom_sample(&b, "trainyard_submissions_queued", NULL,
                (double)submit_queue_waiting(srv->submits));
    prom_family(&b, "trainyard_scheduling_pass_duration_seconds", "histogram",
                "Duration of each scheduling pass of the control thread.");
    prom_histogram(&b, "trainyard_scheduling_pass_duration_seconds", NULL,
                   &srv->telemetry.sched_pass);
    if (b.text == NULL)
        return MHD_NO;
    return srv_reply_steal(req, MHD_HTTP_OK, "text/plain; version=0.0.4; charset=utf-8", b.text,
                           b.len, NULL);
}

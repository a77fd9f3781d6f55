/* Scheduling passes: database snapshot → scheduler/ → committed placements → launch orders
 * (control_launch.c); stop orders. */
#include "control_internal.h"

#include "agent_proto.h"
#include "jobspec.h"
#include "log.h"
#include "scheduler/sched.h"
#include "server.h"
#include "store.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#define MAX_CUSTOM 64

/* What the pass needs to know of a node beyond the scheduler's view. */
struct pass_node {
    const char *id;
    int ngpus;
    int gpu_ids[SCHED_MAX_GPUS_PER_NODE]; /* scheduler index i is GPU gpu_ids[i] */
};

/* Resource object {"CPU": 1.5, "memory_mb": 100, "GPU": n|[ids], "<custom>": amount} → amounts.
 * `custom` entries point into `obj` (valid while it lives). */
static void parse_resources(json_t *obj, int64_t *cpu_milli, int64_t *memory_mb,
                            sched_custom *custom, size_t *ncustom)
{
    *cpu_milli = *memory_mb = 0;
    *ncustom = 0;
    const char *key;
    json_t *v;
    json_object_foreach(obj, key, v)
    {
        if (strcmp(key, "CPU") == 0)
            *cpu_milli = (int64_t)llround(json_number_value(v) * 1000.0);
        else if (strcmp(key, "memory_mb") == 0)
            *memory_mb = (int64_t)json_number_value(v);
        else if (strcmp(key, "GPU") != 0 && json_is_number(v) && *ncustom < MAX_CUSTOM)
            custom[(*ncustom)++] =
                (sched_custom){key, (int64_t)llround(json_number_value(v) * 1000.0)};
    }
}

static int add_nodes(sched_snapshot *snap, PGresult *res, struct pass_node *nodes, json_t **keep)
{
    for (int i = 0; i < PQntuples(res); i++) {
        json_t *r = json_loads(PQgetvalue(res, i, 4), 0, NULL);
        keep[i] = r;
        struct pass_node *pn = &nodes[i];
        pn->id = PQgetvalue(res, i, 0);
        json_t *gpus = json_object_get(r, "GPU");
        size_t k;
        json_t *g;
        json_array_foreach(gpus, k, g)
        {
            if (pn->ngpus < SCHED_MAX_GPUS_PER_NODE)
                pn->gpu_ids[pn->ngpus++] = (int)json_integer_value(g);
        }
        sched_custom custom[MAX_CUSTOM];
        sched_node_desc d = {.id = pn->id, .gpus = pn->ngpus, .custom = custom};
        parse_resources(r, &d.cpu_milli, &d.memory_mb, custom, &d.ncustom);
        d.gpu_type = PQgetisnull(res, i, 5) ? NULL : PQgetvalue(res, i, 5);
        d.alive = strcmp(PQgetvalue(res, i, 2), "ALIVE") == 0;
        d.draining = strcmp(PQgetvalue(res, i, 3), "t") == 0;
        int rc = sched_add_node(snap, &d, NULL);
        if (rc != 0)
            TY_WARN("control", "node %s left out of scheduling: %s", pn->id, sched_strerror(rc));
    }
    return 0;
}

static int gpu_index(const struct pass_node *n, int gpu_id)
{
    for (int i = 0; i < n->ngpus; i++)
        if (n->gpu_ids[i] == gpu_id)
            return i;
    return -1;
}

/* Adds the running job whose worker rows are [first, last) to the snapshot: one alloc per node
 * (the rows are ordered by job, then node). Returns 0 or -1 when out of memory. */
static int add_running_job(sched_snapshot *snap, PGresult *res, int first, int last,
                           const struct pass_node *nodes)
{
    size_t n = (size_t)(last - first);
    sched_alloc_desc *allocs = calloc(n, sizeof(*allocs));
    sched_custom *customs = calloc(n * MAX_CUSTOM, sizeof(*customs));
    json_t **held = calloc(n, sizeof(*held)); /* resource objects the custom names point into */
    int rc = -1;
    if (allocs == NULL || customs == NULL || held == NULL)
        goto out;
    size_t nallocs = 0;
    for (int i = first; i < last; i++) {
        const char *node_id = PQgetvalue(res, i, 1);
        if (nallocs == 0 || strcmp(allocs[nallocs - 1].node_id, node_id) != 0) {
            allocs[nallocs] =
                (sched_alloc_desc){.node_id = node_id, .custom = &customs[nallocs * MAX_CUSTOM]};
            nallocs++;
        }
        sched_alloc_desc *a = &allocs[nallocs - 1];
        sched_custom *ac = &customs[(nallocs - 1) * MAX_CUSTOM];
        json_t *r = held[i - first] = json_loads(PQgetvalue(res, i, 2), 0, NULL);
        int64_t cpu, mem;
        sched_custom c[MAX_CUSTOM];
        size_t nc;
        parse_resources(r, &cpu, &mem, c, &nc);
        a->cpu_milli += cpu;
        a->memory_mb += mem;
        for (size_t k = 0; k < nc; k++) {
            size_t m = 0;
            while (m < a->ncustom && strcmp(ac[m].name, c[k].name) != 0)
                m++;
            if (m == a->ncustom && a->ncustom < MAX_CUSTOM)
                ac[a->ncustom++] = (sched_custom){c[k].name, 0};
            if (m < MAX_CUSTOM)
                ac[m].amount_milli += c[k].amount_milli;
        }
        long idx = sched_find_node(snap, node_id);
        json_t *gpus = json_loads(PQgetvalue(res, i, 3), 0, NULL);
        size_t k;
        json_t *g;
        json_array_foreach(gpus, k, g)
        {
            int bit = idx >= 0 ? gpu_index(&nodes[idx], (int)json_integer_value(g)) : -1;
            if (bit >= 0)
                a->gpu_mask |= UINT64_C(1) << bit;
        }
        json_decref(gpus);
    }
    int64_t job = strtoll(PQgetvalue(res, first, 0), NULL, 10);
    int64_t end = strtoll(PQgetvalue(res, first, 4), NULL, 10);
    int err = sched_add_running(snap, job, end < 0 ? SCHED_TIME_NEVER : end, allocs, nallocs);
    if (err != 0)
        TY_BUG("control", "job %lld's allocation does not fit the snapshot: %s", (long long)job,
               sched_strerror(err));
    rc = 0;
out:
    for (size_t i = 0; held && i < n; i++)
        json_decref(held[i]);
    free(held);
    free(customs);
    free(allocs);
    return rc;
}

static void add_running(sched_snapshot *snap, PGresult *res, const struct pass_node *nodes)
{
    int rows = PQntuples(res);
    for (int i = 0; i < rows;) {
        const char *job = PQgetvalue(res, i, 0);
        int j = i + 1;
        while (j < rows && strcmp(PQgetvalue(res, j, 0), job) == 0)
            j++;
        add_running_job(snap, res, i, j, nodes);
        i = j;
    }
}

static sched_strategy strategy_of(enum jobspec_strategy s)
{
    switch (s) {
    case JOBSPEC_STRATEGY_SPREAD:
        return SCHED_SPREAD;
    case JOBSPEC_STRATEGY_STRICT_PACK:
        return SCHED_STRICT_PACK;
    case JOBSPEC_STRATEGY_STRICT_SPREAD:
        return SCHED_STRICT_SPREAD;
    default:
        return SCHED_PACK;
    }
}

/* The bundle a worker holds, as stored in workers.resources. */
static json_t *bundle_json(const struct jobspec *js)
{
    json_t *b = json_object();
    if (js->cpu_milli)
        json_object_set_new(b, "CPU", json_real((double)js->cpu_milli / 1000.0));
    if (js->gpu)
        json_object_set_new(b, "GPU", json_integer(js->gpu));
    if (js->memory_mb)
        json_object_set_new(b, "memory_mb", json_integer(js->memory_mb));
    for (size_t i = 0; i < js->n_custom; i++)
        json_object_set_new(b, js->custom[i].name,
                            json_real((double)js->custom[i].amount_milli / 1000.0));
    return b;
}

static void commit_decision(struct control *ctl, const sched_decision *d,
                            const struct pass_node *nodes)
{
    if (d->outcome != SCHED_PLACED) {
        if (ctl__spec_message_changed(&ctl->specs, d->job_id, d->message))
            store_job_set_waiting_message(ctl->db, d->job_id, d->message);
        return;
    }
    const struct jobspec *js = ctl__spec_get(&ctl->specs, d->job_id);
    if (js == NULL)
        return;
    json_t *workers = json_array();
    for (int w = 0; w < d->num_workers; w++) {
        const sched_worker *sw = &d->workers[w];
        json_t *gpus = json_array();
        for (int g = 0; g < sw->ngpus; g++)
            json_array_append_new(gpus, json_integer(nodes[sw->node_index].gpu_ids[sw->gpus[g]]));
        json_array_append_new(workers, json_pack("{s:i, s:i, s:i, s:s, s:o, s:o}", "rank", sw->rank,
                                                 "local_rank", sw->local_rank, "node_rank",
                                                 sw->node_rank, "node_id", sw->node_id, "gpus",
                                                 gpus, "resources", bundle_json(js)));
    }
    int nports = js->backend == JOBSPEC_BACKEND_TENSORFLOW ? d->num_workers : 1;
    char *text = json_dumps(workers, JSON_COMPACT);
    int attempt = 0;
    int qs = text ? store_place(ctl->db, d->job_id, text, nports, &attempt) : DB_HARD_ERROR;
    free(text);
    json_decref(workers);
    if (qs == 1) {
        TY_INFO("control", "job %lld attempt %d: %d workers placed on %d nodes",
                (long long)d->job_id, attempt, d->num_workers, d->num_nodes);
        ctl__send_launches(ctl, d->job_id, attempt, NULL);
    }
}

/* Fetches and parses the specs of pending jobs not seen by an earlier pass. */
static void load_new_specs(struct control *ctl, PGresult *pending)
{
    int n = PQntuples(pending);
    size_t cap = 16, len = 0;
    char *ids = malloc(cap);
    if (ids == NULL)
        return;
    ids[len++] = '{';
    for (int i = 0; i < n; i++) {
        int64_t id = strtoll(PQgetvalue(pending, i, 0), NULL, 10);
        if (ctl__spec_get(&ctl->specs, id))
            continue;
        if (len + 24 > cap) {
            char *grown = realloc(ids, cap * 2);
            if (grown == NULL) {
                free(ids);
                return;
            }
            ids = grown;
            cap *= 2;
        }
        len += (size_t)snprintf(ids + len, cap - len, "%s%lld", len > 1 ? "," : "", (long long)id);
    }
    ids[len++] = '}';
    ids[len] = '\0';
    PGresult *res = NULL;
    if (len > 2 && store_job_specs(ctl->db, ids, &res) > 0) {
        for (int i = 0; i < PQntuples(res); i++)
            ctl__spec_put(&ctl->specs, strtoll(PQgetvalue(res, i, 0), NULL, 10),
                          PQgetvalue(res, i, 1));
        PQclear(res);
    }
    free(ids);
}

void ctl__schedule(struct control *ctl)
{
    PGresult *nodes_res, *running_res, *pending_res;
    if (store_sched_snapshot(ctl->db, &nodes_res, &running_res, &pending_res) < 0)
        return;
    ctl__specs_next_pass(&ctl->specs);
    int npending = PQntuples(pending_res);
    size_t nnodes = (size_t)PQntuples(nodes_res);
    sched_snapshot *snap = npending ? sched_snapshot_create() : NULL;
    struct pass_node *nodes = calloc(nnodes + 1, sizeof(*nodes));
    json_t **keep = calloc(nnodes + 1, sizeof(*keep));
    sched_result *result = NULL;
    if (snap == NULL || nodes == NULL || keep == NULL)
        goto out;
    add_nodes(snap, nodes_res, nodes, keep);
    add_running(snap, running_res, nodes);
    load_new_specs(ctl, pending_res);
    for (int i = 0; i < npending; i++) {
        int64_t id = strtoll(PQgetvalue(pending_res, i, 0), NULL, 10);
        const struct jobspec *js = ctl__spec_get(&ctl->specs, id);
        if (js == NULL)
            continue;
        sched_custom custom[MAX_CUSTOM];
        size_t nc = js->n_custom < MAX_CUSTOM ? js->n_custom : MAX_CUSTOM;
        for (size_t k = 0; k < nc; k++)
            custom[k] = (sched_custom){js->custom[k].name, js->custom[k].amount_milli};
        sched_job_desc d = {
            .id = id,
            .priority = (int)strtol(PQgetvalue(pending_res, i, 1), NULL, 10),
            .submit_time = strtoll(PQgetvalue(pending_res, i, 2), NULL, 10),
            .min_workers = js->num_workers_min,
            .max_workers = js->num_workers_max,
            .bundle = {js->cpu_milli, js->memory_mb, js->gpu, custom, nc},
            .strategy = strategy_of(js->strategy),
            .accelerator_type = js->accelerator_type,
            .timeout_s = (int64_t)ceil(js->timeout_s),
        };
        int rc = sched_add_pending(snap, &d);
        if (rc != 0)
            TY_WARN("control", "job %lld cannot be queued: %s", (long long)d.id,
                    sched_strerror(rc));
    }
    if (sched_run_pass(snap, (int64_t)time(NULL), &result) != 0)
        goto out;
    for (size_t k = 0; k < sched_result_count(result); k++)
        commit_decision(ctl, sched_result_decision(result, k), nodes);
out:
    sched_result_destroy(result);
    sched_snapshot_destroy(snap);
    for (size_t i = 0; keep && i < nnodes; i++)
        json_decref(keep[i]);
    free(keep);
    free(nodes);
    PQclear(nodes_res);
    PQclear(running_res);
    PQclear(pending_res);
}

void ctl__send_stops(struct control *ctl, int64_t job)
{
    PGresult *res = NULL;
    if (store_stop_targets(ctl->db, job, &res) <= 0)
        return;
    char job_text[32];
    snprintf(job_text, sizeof(job_text), "%lld", (long long)job);
    for (int i = 0; i < PQntuples(res); i++) {
        struct ctl_node *n = ctl__node_by_id(ctl, PQgetvalue(res, i, 0));
        if (n == NULL || n->conn == 0)
            continue;
        ctl__send_text(ctl, n->conn,
                       agent_msg_stop(job_text, strtol(PQgetvalue(res, i, 1), NULL, 10),
                                      ctl->srv->cfg.stop_grace_s));
    }
    PQclear(res);
}

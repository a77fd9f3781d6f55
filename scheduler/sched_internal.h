/* Internal declarations shared by the scheduler's files (prefix sched__). Not installed. */
#ifndef TRAINYARD_SCHED_INTERNAL_H
#define TRAINYARD_SCHED_INTERNAL_H

#include "sched.h" /* this folder's, found first by the quote search */

#include <stdarg.h>

/* ---------------------------------------------------------------- helpers (sched_util.c) */

/* Grows *arr (elements of `elem` bytes, capacity *cap) to hold at least `need` elements,
 * doubling. Returns 0, or SCHED_ENOMEM with *arr untouched. */
int sched__grow(void *arr, size_t *cap, size_t need, size_t elem);

/* A set of interned strings; the index of a string is its id. */
struct sched__names {
    char **v;
    size_t n, cap;
};

/* Id of `s` in `names` (case-insensitive when `nocase`), adding a copy when absent.
 * Returns the id (>= 0) or SCHED_ENOMEM. */
int sched__names_intern(struct sched__names *names, const char *s, bool nocase);
/* Id of `s` or -1, without adding it. */
int sched__names_find(const struct sched__names *names, const char *s, bool nocase);
/* Whether every token of `want` (split at spaces, '-' and '_') is, ignoring case, a token of
 * `have`: "H100" and "h100 80gb" match "NVIDIA H100 80GB HBM3"; "H10" and "A100" do not. A
 * `want` without tokens matches nothing. */
bool sched__type_tokens_match(const char *want, const char *have);
void sched__names_free(struct sched__names *names);

/* Writes a milli-unit amount as a decimal ("2", "0.5", "1.25") into buf (>= 32 bytes). */
const char *sched__fmt_milli(char *buf, size_t len, int64_t milli);

/* ---------------------------------------------------------------- snapshot (sched_snapshot.c) */

/* A custom resource amount: id in snapshot->custom, milli-units. */
struct sched__amount {
    uint32_t id;
    int64_t amount;
};

/* A node's custom resource: total and what running jobs leave free. */
struct sched__ncust {
    uint32_t id;
    int64_t total, free;
};

struct sched__node {
    char *id;
    int type; /* id in snapshot->types, -1 when the node has no GPU type */
    bool schedulable;
    bool disk_pressure; /* alive and not draining, but short of disk space (not schedulable) */
    int gpus;
    int64_t cpu_total, mem_total;
    int64_t cpu_free, mem_free;
    uint64_t gpu_free;
    uint32_t cust_first, ncust; /* snapshot->node_cust[cust_first .. +ncust] */
};

/* A worker's resource request, resolved to ids. */
struct sched__req {
    int64_t cpu, mem;
    int gpus;
    uint32_t cust_first, ncust; /* snapshot->job_cust[cust_first .. +ncust] */
};

struct sched__job {
    int64_t id;
    int priority;
    int64_t submit;
    int min, max;
    struct sched__req req;
    sched_strategy strategy;
    int accel;       /* id in snapshot->types, -1 for any */
    int64_t timeout; /* seconds, 0 = none */
};

/* One node's share of a running job. */
struct sched__ralloc {
    uint32_t node;
    int64_t cpu, mem;
    uint64_t gpus;
    uint32_t cust_first, ncust; /* snapshot->run_cust */
};

struct sched__running {
    int64_t id, end;
    uint32_t first, n; /* snapshot->ralloc */
};

struct sched_snapshot {
    struct sched__node *nodes;
    size_t nnodes, cap_nodes;
    int32_t *node_hash; /* open addressing over node ids; -1 = empty */
    size_t node_hash_cap;

    struct sched__ncust *node_cust;
    size_t nnode_cust, cap_node_cust;

    struct sched__names types;  /* GPU types of nodes and of jobs' accelerator_type */
    struct sched__names custom; /* custom resource names */

    struct sched__running *running;
    size_t nrunning, cap_running;
    struct sched__ralloc *ralloc;
    size_t nralloc, cap_ralloc;
    struct sched__amount *run_cust;
    size_t nrun_cust, cap_run_cust;

    struct sched__job *jobs;
    size_t njobs, cap_jobs;
    struct sched__amount *job_cust;
    size_t njob_cust, cap_job_cust;

    int64_t *id_set; /* open addressing over running + pending job ids */
    uint8_t *id_used;
    size_t id_set_cap, id_set_n;
};

/* ---------------------------------------------------------------- bucket index (sched_index.c) */

/* Schedulable nodes bucketed by (class, key), each bucket a two-level bitmap over node indices,
 * so a scan visits nodes by key, then class, then ascending node index. */
struct sched__index {
    int nclass, nkey;
    size_t n, nwords, nsum;
    uint64_t *bits; /* [(class * nkey + key) * nwords + word] */
    uint64_t *sum;  /* [(class * nkey + key) * nsum + word / 64]: non-zero words */
    int32_t *count; /* [class * nkey + key] */
    int16_t *key;   /* per node; -1 when not indexed */
    int16_t *cls;   /* per node */
};

enum { SCHED__IX_GPU = 0, SCHED__IX_CPU = 1, SCHED__IX_KINDS = 2 };
#define SCHED__GPU_KEYS (SCHED_MAX_GPUS_PER_NODE + 1)
#define SCHED__CPU_KEYS 257 /* whole free CPUs, the last key meaning "256 or more" */

int sched__index_init(struct sched__index *ix, size_t n, int nclass, int nkey);
void sched__index_free(struct sched__index *ix);
/* Puts `node` in bucket (cls, key), moving it if indexed elsewhere. */
void sched__index_set(struct sched__index *ix, size_t node, int cls, int key);
/* Number of nodes in bucket (cls, key). */
static inline int32_t sched__index_count(const struct sched__index *ix, int cls, int key)
{
    return ix->count[cls * ix->nkey + key];
}

/* Iterates buckets key_from..key_to (inclusive, ascending or descending), classes cls_lo..cls_hi
 * within a key, nodes ascending within a bucket. */
struct sched__scan {
    const struct sched__index *ix;
    int cls_lo, cls_hi, cls;
    int key, key_end, step;
    long node; /* last returned, -1 before the first */
};
void sched__scan_init(struct sched__scan *s, const struct sched__index *ix, int cls_lo, int cls_hi,
                      int key_from, int key_to);
/* Next node, or -1 when done. */
long sched__scan_next(struct sched__scan *s);

/* ---------------------------------------------------------------- views (sched_view.c) */

/* Free resources of every node at one moment (now, or the head's reservation time), with the
 * bucket indexes built over it on demand. */
struct sched__view {
    size_t n, ncust;
    int64_t *cpu, *mem, *cust; /* cust[node * ncust + id] */
    uint64_t *gpu;
    struct sched__index ix[SCHED__IX_KINDS];
    bool built[SCHED__IX_KINDS];
};

/* What the head's reservation leaves over at its start time, on the nodes it reserves. Long
 * backfill jobs may use min(now, shadow) there. */
struct sched__shadow {
    int32_t *slot; /* per node: index into the arrays below, -1 when not reserved */
    size_t nslot, cap;
    int64_t *cpu, *mem, *gpu, *cust; /* cust[slot * ncust + id] */
};

struct sched__pass;

int sched__view_init_now(struct sched__view *v, const struct sched__pass *p);
int sched__view_copy(struct sched__view *dst, const struct sched__view *src);
void sched__view_free(struct sched__view *v);
/* The index of kind `kind` over v, built on first use. NULL when out of memory. */
struct sched__index *sched__view_index(struct sched__view *v, const struct sched__pass *p,
                                       int kind);
/* Re-buckets `node` in every index built over v after its free resources changed. */
void sched__view_touch(struct sched__view *v, const struct sched__pass *p, size_t node);

/* How many workers of `q` (at most `limit`) fit on `node`, under the shadow when `sh` is set. */
static inline int sched__cap(const struct sched__view *v, const struct sched__shadow *sh,
                             const struct sched__req *q, const struct sched__amount *qc,
                             size_t node, int limit)
{
    int64_t c = limit;
    int32_t s = sh ? sh->slot[node] : -1;
    if (q->gpus) {
        int64_t f = __builtin_popcountll(v->gpu[node]);
        if (s >= 0 && sh->gpu[s] < f)
            f = sh->gpu[s];
        if (f < q->gpus * c)
            c = f / q->gpus;
    }
    if (q->cpu && c) {
        int64_t f = v->cpu[node];
        if (s >= 0 && sh->cpu[s] < f)
            f = sh->cpu[s];
        if (f < q->cpu * c)
            c = f / q->cpu;
    }
    if (q->mem && c) {
        int64_t f = v->mem[node];
        if (s >= 0 && sh->mem[s] < f)
            f = sh->mem[s];
        if (f < q->mem * c)
            c = f / q->mem;
    }
    for (uint32_t i = 0; i < q->ncust && c; i++) {
        int64_t f = v->cust[node * v->ncust + qc[i].id];
        if (s >= 0 && sh->cust[(size_t)s * v->ncust + qc[i].id] < f)
            f = sh->cust[(size_t)s * v->ncust + qc[i].id];
        if (f < qc[i].amount * c)
            c = f / qc[i].amount;
    }
    return (int)c;
}

/* ---------------------------------------------------------------- placement (sched_place.c) */

/* Nodes chosen for one job: node[i] gets count[i] workers. */
struct sched__placement {
    uint32_t *node;
    int *count;
    int *limit; /* scratch: most workers node[i] could take */
    size_t n, cap;
    int placed; /* workers placed (>= need on success) */
    int fit;    /* on failure: how many workers would fit (for the message) */
};

/* Chooses nodes of view `v` (under shadow `sh` when not NULL) for between `need` and `want`
 * workers of job `j` according to its strategy, preferring the most. Nothing is applied.
 * Returns 1 when at least `need` fit (pl describes them), 0 when not (pl->fit says how many
 * did), SCHED_ENOMEM. */
int sched__place(struct sched__pass *p, struct sched__view *v, const struct sched__shadow *sh,
                 const struct sched__job *j, int need, int want, struct sched__placement *pl);
void sched__placement_free(struct sched__placement *pl);

/* ---------------------------------------------------------------- ranks (sched_ranks.c) */

/* Applies placement pl of job j to the now view (and to the shadow when `long_job`), assigns
 * ranks and GPUs per DESIGN §3 and appends them to the current decision of the result.
 * Returns 0 or SCHED_ENOMEM. */
int sched__commit(struct sched__pass *p, const struct sched__job *j, struct sched__placement *pl,
                  bool long_job);

/* ---------------------------------------------------------------- reasons (sched_reason.c) */

/* Groups schedulable nodes with equal totals, for the "even when idle" questions. */
struct sched__iclass {
    int type;
    int gpus;
    int64_t cpu, mem;
    size_t rep; /* a node of the class: its custom totals are p->tot_cust[rep * ncust ...] */
    int64_t count;
};

int sched__idle_build(struct sched__pass *p);
/* True when job j could be placed (its minimum) on the cluster with every schedulable node idle.
 * When not, writes the reason into buf. */
bool sched__idle_fits(const struct sched__pass *p, const struct sched__job *j, char *buf,
                      size_t len);

/* ---------------------------------------------------------------- backfill (sched_backfill.c) */

/* Makes job j the head: finds the earliest time its minimum fits (releasing running jobs and
 * jobs placed earlier in this pass in end-time order), reserves nodes for it then, and fills
 * p->shadow. Sets p->have_head and p->head_start. Returns 0 or SCHED_ENOMEM. */
int sched__reserve_head(struct sched__pass *p, const struct sched__job *j);

/* ---------------------------------------------------------------- result (sched_result.c) */

/* Starts the decision for job_id; later calls fill it. Returns 0 or SCHED_ENOMEM. */
int sched__result_begin(sched_result *r, int64_t job_id, sched_outcome outcome);
/* Sets the current decision's message (printf format). Returns 0 or SCHED_ENOMEM. */
int sched__result_message(sched_result *r, const char *fmt, ...)
    __attribute__((format(printf, 2, 3)));
/* Appends a worker to the current decision; `gpus` holds w->ngpus indices.
 * Returns 0 or SCHED_ENOMEM. */
int sched__result_worker(sched_result *r, const sched_worker *w, const int *gpus,
                         const char *node_id);
void sched__result_set_head(sched_result *r, int64_t reserved_start);
/* A result sized for njobs decisions and about `workers` workers with `gpus` GPU indices (the
 * arrays still grow past those). NULL when out of memory. */
sched_result *sched__result_new(size_t njobs, size_t nnodes, size_t workers, size_t gpus);
/* Turns offsets into pointers; the result is read-only afterwards. */
void sched__result_finish(sched_result *r);

/* ---------------------------------------------------------------- the pass (sched_queue.c) */

/* A job placed before the head in this pass: what it releases at `end`. */
struct sched__placed {
    const struct sched__job *job;
    int64_t end;
    uint32_t first, n; /* pass->pnodes */
};

struct sched__pnode {
    uint32_t node;
    int count;
    uint64_t gpus;
};

struct sched__pass {
    const sched_snapshot *snap;
    int64_t t_now; /* the pass time */
    size_t n, ncust, ntypes;
    int64_t *tot_cust; /* [node * ncust + id]: custom totals */

    struct sched__view now;
    struct sched__shadow shadow;
    bool have_head;
    int64_t head_start; /* SCHED_TIME_NEVER when it waits on jobs without a timeout */
    int64_t head_id;

    uint32_t *mark; /* per node: == epoch when chosen in the current placement attempt */
    uint32_t epoch;
    struct sched__placement pl;

    struct sched__iclass *iclass;
    size_t niclass;
    int64_t nsched; /* schedulable nodes */

    struct sched__placed *placed;
    size_t nplaced, cap_placed;
    struct sched__pnode *pnodes;
    size_t npnodes, cap_pnodes;

    int *gpu_scratch;       /* SCHED_MAX_GPUS_PER_NODE entries */
    unsigned char *type_ok; /* [want * ntypes + have]: sched__type_tokens_match of two types */
    sched_result *res;
};

/* Whether a node of GPU type `type` (-1: none) serves accelerator type `accel` (-1: any). */
static inline bool sched__type_match(const struct sched__pass *p, int accel, int type)
{
    if (accel < 0)
        return true;
    if (type < 0 || (size_t)type >= p->ntypes)
        return false;
    return p->type_ok[(size_t)accel * p->ntypes + (size_t)type] != 0;
}

/* Custom amounts of a job's request. */
static inline const struct sched__amount *sched__job_cust(const struct sched__pass *p,
                                                          const struct sched__job *j)
{
    return p->snap->job_cust + j->req.cust_first;
}

/* The GPU-index class of a node: its type, or ntypes when it has none. */
static inline int sched__node_class(const struct sched__pass *p, size_t node)
{
    int t = p->snap->nodes[node].type;
    return t < 0 ? (int)p->ntypes : t;
}

#endif

/* GPUs through NVML, dlopen'ed at run time so the agent runs on hosts without a driver. The
 * library is libnvidia-ml.so.1 unless --nvml-library (TRAINYARD_NVML_LIBRARY) names another: the
 * tests name a declared fake GPU library (tests/fake_nvml). The functions are declared by hand, so
 * no nvml.h is needed at build time.
 *
 * One NVML session serves the agent's life (`session`, file-local: the agent is one thread):
 * opened at discovery, shut down by agent__nvml_close at exit; a sample that finds NVML failing
 * opens it once more. The session also holds an event set registered for critical Xid errors,
 * polled with a 0 ms timeout at every sample so the lws loop never waits on it (docs/gpu.md). */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_ret;
typedef void *nvml_device;
typedef void *nvml_event_set;
struct nvml_event_data { /* nvmlEventData_t */
    nvml_device device;
    unsigned long long type, data;
    unsigned gpu_instance, compute_instance;
};
#define NVML_EVENT_XID_CRITICAL 0x8ULL /* nvmlEventTypeXidCriticalError */
#define NVML_EVENTS_PER_SAMPLE 64      /* events read at one sample at most */
struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml_utilization {
    unsigned gpu, memory;
};

struct nvml_api {
    void *lib;
    nvml_ret (*init)(void);
    nvml_ret (*shutdown)(void);
    nvml_ret (*count)(unsigned *);
    nvml_ret (*handle)(unsigned, nvml_device *);
    nvml_ret (*name)(nvml_device, char *, unsigned);
    nvml_ret (*uuid)(nvml_device, char *, unsigned);
    nvml_ret (*memory)(nvml_device, struct nvml_memory *);
    nvml_ret (*utilization)(nvml_device, struct nvml_utilization *);
    nvml_ret (*temperature)(nvml_device, int, unsigned *);
    nvml_ret (*power)(nvml_device, unsigned *);
    nvml_ret (*set_create)(nvml_event_set *);
    nvml_ret (*set_free)(nvml_event_set);
    nvml_ret (*register_events)(nvml_device, unsigned long long, nvml_event_set);
    nvml_ret (*set_wait)(nvml_event_set, struct nvml_event_data *, unsigned);
    nvml_event_set events; /* NULL: no Xid events (unsupported or failed) */
};

static struct nvml_api session; /* session.lib != NULL while NVML is initialised */

/* The first of two symbol names the library has, or NULL. */
static void *sym2(void *lib, const char *a, const char *b)
{
    void *p = dlsym(lib, a);
    return p || !b ? p : dlsym(lib, b);
}

/* Loads and initialises NVML into *api. 0, or -1 (logged; nothing to close). */
static int api_open(struct nvml_api *api, const char *path)
{
    memset(api, 0, sizeof(*api));
    const char *file = path && *path ? path : "libnvidia-ml.so.1";
    api->lib = dlopen(file, RTLD_NOW | RTLD_LOCAL);
    if (!api->lib) {
        TY_INFO("agent", "no NVML (%s): 0 GPUs", dlerror());
        return -1;
    }
    *(void **)&api->init = sym2(api->lib, "nvmlInit_v2", "nvmlInit");
    *(void **)&api->shutdown = sym2(api->lib, "nvmlShutdown", NULL);
    *(void **)&api->count = sym2(api->lib, "nvmlDeviceGetCount_v2", "nvmlDeviceGetCount");
    *(void **)&api->handle =
        sym2(api->lib, "nvmlDeviceGetHandleByIndex_v2", "nvmlDeviceGetHandleByIndex");
    *(void **)&api->name = sym2(api->lib, "nvmlDeviceGetName", NULL);
    *(void **)&api->uuid = sym2(api->lib, "nvmlDeviceGetUUID", NULL);
    *(void **)&api->memory = sym2(api->lib, "nvmlDeviceGetMemoryInfo", NULL);
    *(void **)&api->utilization = sym2(api->lib, "nvmlDeviceGetUtilizationRates", NULL);
    *(void **)&api->temperature = sym2(api->lib, "nvmlDeviceGetTemperature", NULL);
    *(void **)&api->power = sym2(api->lib, "nvmlDeviceGetPowerUsage", NULL);
    *(void **)&api->set_create = sym2(api->lib, "nvmlEventSetCreate", NULL);
    *(void **)&api->set_free = sym2(api->lib, "nvmlEventSetFree", NULL);
    *(void **)&api->register_events = sym2(api->lib, "nvmlDeviceRegisterEvents", NULL);
    *(void **)&api->set_wait = sym2(api->lib, "nvmlEventSetWait_v2", NULL);
    if (!api->init || !api->count || !api->handle) {
        TY_WARN("agent", "%s lacks nvmlInit/nvmlDeviceGetCount/GetHandleByIndex: 0 GPUs", file);
    } else {
        nvml_ret rc = api->init();
        if (rc == 0)
            return 0;
        TY_WARN("agent", "nvmlInit failed (%d): 0 GPUs", rc);
    }
    dlclose(api->lib);
    api->lib = NULL;
    return -1;
}

static void api_close(struct nvml_api *api)
{
    if (!api->lib)
        return;
    if (api->events && api->set_free)
        api->set_free(api->events);
    api->events = NULL;
    if (api->shutdown)
        api->shutdown();
    dlclose(api->lib);
    api->lib = NULL;
}

/* Copies a NUL-terminated NVML string into out, printable characters only. */
static void copy_text(char *out, size_t len, const char *in)
{
    size_t i = 0;
    for (; in[i] && i + 1 < len; i++)
        out[i] = in[i] >= 0x20 && in[i] < 0x7f && in[i] != '"' && in[i] != '\\' ? in[i] : '_';
    out[i] = '\0';
}

/* Reads index i's identity (and, when `sample`, its current use) into g. 0, or -1 when the
 * device has no handle any more. */
static int read_device(const struct nvml_api *api, unsigned i, struct agent_gpu *g, bool sample)
{
    nvml_device dev = NULL;
    if (api->handle(i, &dev) != 0)
        return -1;
    char buf[128];
    g->index = (int)i;
    if (!g->name[0] && api->name && api->name(dev, buf, sizeof(buf)) == 0)
        copy_text(g->name, sizeof(g->name), buf);
    if (!g->uuid[0] && api->uuid && api->uuid(dev, buf, sizeof(buf)) == 0)
        copy_text(g->uuid, sizeof(g->uuid), buf);
    struct nvml_memory mem;
    if (api->memory && api->memory(dev, &mem) == 0) {
        g->memory_mb = (int64_t)(mem.total >> 20);
        g->memory_used_mb = (int64_t)(mem.used >> 20);
    }
    if (!sample)
        return 0;
    struct nvml_utilization u;
    unsigned v;
    g->utilization_pct = api->utilization && api->utilization(dev, &u) == 0 ? (int)u.gpu : -1;
    g->temperature_c = api->temperature && api->temperature(dev, 0, &v) == 0 ? (int)v : -1;
    g->power_mw = api->power && api->power(dev, &v) == 0 ? (int64_t)v : -1;
    return 0;
}

/* Registers the n GPUs of info for critical Xid events in api->events (created here). Without
 * the event functions, or when NVML refuses, the GPUs are still sampled: only Xids go unseen. */
static void events_open(struct nvml_api *api, const struct agent_gpu *info, size_t n)
{
    if (!api->set_create || !api->register_events || !api->set_wait) {
        TY_INFO("agent", "NVML has no event functions: Xid errors are not watched");
        return;
    }
    nvml_ret rc = api->set_create(&api->events);
    if (rc != 0) {
        api->events = NULL;
        TY_WARN("agent", "nvmlEventSetCreate failed (%d): Xid errors are not watched", rc);
        return;
    }
    for (size_t i = 0; i < n; i++) {
        nvml_device dev = NULL;
        if (api->handle((unsigned)info[i].index, &dev) != 0)
            continue;
        rc = api->register_events(dev, NVML_EVENT_XID_CRITICAL, api->events);
        if (rc != 0)
            TY_WARN("agent", "GPU %d: Xid events not available (%d)", info[i].index, rc);
    }
}

bool agent__xid_takes_gpu_down(unsigned long long xid)
{
    /* Application faults (13 graphics engine exception, 31 MMU fault, 43 reset channel, 45
     * preemptive cleanup), 63 (a page retired or row remapped: recorded, the GPU goes on) and 94
     * (a contained ECC error: the application that met it ends, the GPU goes on) leave the GPU
     * usable; every other critical Xid, known (48, 64, 74, 79, 92, 95 ...) or not, needs a reset
     * or more, so the GPU leaves the node. */
    static const unsigned long long keep[] = {13, 31, 43, 45, 63, 94};
    for (size_t i = 0; i < sizeof(keep) / sizeof(keep[0]); i++)
        if (xid == keep[i])
            return false;
    return true;
}

/* Reads the pending Xid events (0 ms: never waits) and marks the GPUs of info they take down
 * with their Xid (the first one stays). */
static void events_poll(struct nvml_api *api, struct agent_gpu *info, size_t n)
{
    struct nvml_event_data ev;
    for (int k = 0; api->events && k < NVML_EVENTS_PER_SAMPLE; k++) {
        memset(&ev, 0, sizeof(ev));
        if (api->set_wait(api->events, &ev, 0) != 0)
            return; /* NVML_ERROR_TIMEOUT: none pending */
        if (!(ev.type & NVML_EVENT_XID_CRITICAL))
            continue;
        for (size_t i = 0; i < n; i++) {
            nvml_device dev = NULL;
            if (api->handle((unsigned)info[i].index, &dev) != 0 || dev != ev.device)
                continue;
            if (!agent__xid_takes_gpu_down(ev.data)) {
                TY_INFO("agent", "GPU %d (%s): Xid %llu (the GPU stays usable)", info[i].index,
                        info[i].uuid, ev.data);
            } else if (info[i].xid == 0) {
                TY_WARN("agent", "GPU %d (%s): critical Xid %llu: unhealthy, out of capacity",
                        info[i].index, info[i].uuid, ev.data);
                info[i].xid = (int64_t)(ev.data > 65535 ? 65535 : ev.data);
            }
        }
    }
}

/* Opens the session (once per call) unless it is open. 0, or -1 (logged). */
static int session_open(const char *library, const struct agent_gpu *info, size_t n)
{
    if (session.lib)
        return 0;
    if (api_open(&session, library) != 0)
        return -1;
    events_open(&session, info, n);
    return 0;
}

void agent__nvml_close(void)
{
    api_close(&session);
}

size_t agent__detect_gpus(const char *library, int **gpus, struct agent_gpu **info)
{
    *gpus = NULL;
    *info = NULL;
    if (api_open(&session, library) != 0)
        return 0;
    unsigned c = 0;
    size_t n = 0;
    if (session.count(&c) != 0 || c == 0 || c > APROTO_MAX_GPUS) {
        TY_INFO("agent", "NVML: %u GPU(s) usable: 0 GPUs", c > APROTO_MAX_GPUS ? 0 : c);
        goto out;
    }
    *gpus = calloc(c, sizeof(int));
    *info = calloc(c, sizeof(struct agent_gpu));
    if (!*gpus || !*info) {
        free(*gpus);
        free(*info);
        *gpus = NULL;
        *info = NULL;
        goto out;
    }
    for (unsigned i = 0; i < c; i++) {
        (*gpus)[n] = (int)i;
        if (read_device(&session, i, &(*info)[n], true) != 0)
            continue;
        TY_INFO("agent", "NVML GPU %u: %s, %s, %lld MiB", i, (*info)[n].name, (*info)[n].uuid,
                (long long)(*info)[n].memory_mb);
        n++;
    }
out:
    if (n == 0) {
        api_close(&session);
        return 0;
    }
    events_open(&session, *info, n);
    return n;
}

int agent__sample_gpus(const char *library, struct agent_gpu *info, size_t n)
{
    unsigned c = 0;
    if (session.lib && session.count(&c) != 0) {
        TY_WARN("agent", "NVML sample failed: initialising NVML again");
        api_close(&session);
    }
    if (!session.lib && (session_open(library, info, n) != 0 || session.count(&c) != 0)) {
        api_close(&session);
        for (size_t i = 0; i < n; i++)
            info[i].lost = true;
        return -1;
    }
    events_poll(&session, info, n);
    for (size_t i = 0; i < n; i++) {
        struct agent_gpu g = info[i];
        g.lost = (unsigned)info[i].index >= c ||
                 read_device(&session, (unsigned)info[i].index, &g, true) != 0;
        /* a different UUID at the same index is a different device: the old one is gone */
        char uuid[sizeof(g.uuid)] = {0};
        nvml_device dev = NULL;
        if (!g.lost && session.uuid && session.handle((unsigned)g.index, &dev) == 0 &&
            session.uuid(dev, uuid, sizeof(uuid)) == 0 && info[i].uuid[0] &&
            strcmp(uuid, info[i].uuid) != 0)
            g.lost = true;
        if (g.lost && !info[i].lost && g.xid == 0)
            TY_WARN("agent", "GPU %d (%s) disappeared", info[i].index, info[i].uuid);
        g.lost = g.lost || g.xid != 0; /* an unhealthy GPU stays out */
        info[i] = g;
    }
    return 0;
}

/* Takes GPU `index` out of a->gpus (the indices the node offers). */
static void drop_gpu(struct agent *a, int index)
{
    size_t k = 0;
    for (size_t i = 0; i < a->n_gpus; i++)
        if (a->gpus[i] != index)
            a->gpus[k++] = a->gpus[i];
    a->n_gpus = k;
}

void agent__gpus_tick(struct agent *a)
{
    int64_t now = util_mono_ms();
    int64_t every = a->cfg->gpu_sample_interval_s * 1000;
    if (!a->gpu_info || !a->registered || every <= 0 ||
        (a->gpus_sent_ms && now - a->gpus_sent_ms < every))
        return;
    a->gpus_sent_ms = now;
    agent__sample_gpus(a->cfg->nvml_library, a->gpu_info, a->n_gpu_info);
    struct aproto_gpu_row *rows = calloc(a->n_gpu_info, sizeof(*rows));
    if (!rows) {
        TY_ERROR("agent", "out of memory");
        return;
    }
    for (size_t i = 0; i < a->n_gpu_info; i++) {
        const struct agent_gpu *g = &a->gpu_info[i];
        if (g->lost)
            drop_gpu(a, g->index);
        rows[i] = (struct aproto_gpu_row){
            .index = g->index,
            .uuid = g->uuid[0] ? g->uuid : "unknown",
            .name = g->name,
            .memory_mb = g->memory_mb,
            .memory_used_mb = g->memory_used_mb,
            .utilization_pct = g->utilization_pct,
            .temperature_c = g->temperature_c,
            .power_mw = g->power_mw,
            .lost = g->lost,
            .xid = g->xid,
        };
    }
    agent__ws_send_ctl(a, aproto_msg_gpus(rows, a->n_gpu_info));
    free(rows);
}

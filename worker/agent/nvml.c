/* GPUs through NVML, dlopen'ed at run time so the agent runs on hosts without a driver. The
 * library is libnvidia-ml.so.1 unless --nvml-library (TRAINYARD_NVML_LIBRARY) names another: the
 * tests name a declared fake GPU library (tests/fake_nvml). The functions are declared by hand, so
 * no nvml.h is needed at build time. */
#include "agent.h"

#include "log.h"

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef int nvml_ret;
typedef void *nvml_device;
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
};

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

size_t agent__detect_gpus(const char *library, int **gpus, struct agent_gpu **info)
{
    *gpus = NULL;
    *info = NULL;
    struct nvml_api api;
    if (api_open(&api, library) != 0)
        return 0;
    unsigned c = 0;
    size_t n = 0;
    if (api.count(&c) != 0 || c == 0 || c > AGENT_PROTO_MAX_GPUS) {
        TY_INFO("agent", "NVML: %u GPU(s) usable: 0 GPUs", c > AGENT_PROTO_MAX_GPUS ? 0 : c);
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
        if (read_device(&api, i, &(*info)[n], true) != 0)
            continue;
        TY_INFO("agent", "NVML GPU %u: %s, %s, %lld MiB", i, (*info)[n].name, (*info)[n].uuid,
                (long long)(*info)[n].memory_mb);
        n++;
    }
out:
    api_close(&api);
    return n;
}

int agent__sample_gpus(const char *library, struct agent_gpu *info, size_t n)
{
    struct nvml_api api;
    if (api_open(&api, library) != 0) {
        for (size_t i = 0; i < n; i++)
            info[i].lost = true;
        return -1;
    }
    unsigned c = 0;
    if (api.count(&c) != 0)
        c = 0;
    for (size_t i = 0; i < n; i++) {
        struct agent_gpu g = info[i];
        g.lost = (unsigned)info[i].index >= c ||
                 read_device(&api, (unsigned)info[i].index, &g, true) != 0;
        /* a different UUID at the same index is a different device: the old one is gone */
        char uuid[sizeof(g.uuid)] = {0};
        nvml_device dev = NULL;
        if (!g.lost && api.uuid && api.handle((unsigned)g.index, &dev) == 0 &&
            api.uuid(dev, uuid, sizeof(uuid)) == 0 && info[i].uuid[0] &&
            strcmp(uuid, info[i].uuid) != 0)
            g.lost = true;
        if (g.lost && !info[i].lost)
            TY_WARN("agent", "GPU %d (%s) disappeared", info[i].index, info[i].uuid);
        info[i] = g;
    }
    api_close(&api);
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
    int64_t now = agent_now_ms();
    int64_t every = a->cfg->gpu_sample_interval_s * 1000;
    if (!a->gpu_info || !a->registered || every <= 0 ||
        (a->gpus_sent_ms && now - a->gpus_sent_ms < every))
        return;
    a->gpus_sent_ms = now;
    agent__sample_gpus(a->cfg->nvml_library, a->gpu_info, a->n_gpu_info);
    struct agent_gpu_row *rows = calloc(a->n_gpu_info, sizeof(*rows));
    if (!rows) {
        TY_ERROR("agent", "out of memory");
        return;
    }
    for (size_t i = 0; i < a->n_gpu_info; i++) {
        const struct agent_gpu *g = &a->gpu_info[i];
        if (g->lost)
            drop_gpu(a, g->index);
        rows[i] = (struct agent_gpu_row){
            .index = g->index,
            .uuid = g->uuid[0] ? g->uuid : "unknown",
            .name = g->name,
            .memory_mb = g->memory_mb,
            .memory_used_mb = g->memory_used_mb,
            .utilization_pct = g->utilization_pct,
            .temperature_c = g->temperature_c,
            .power_mw = g->power_mw,
            .lost = g->lost,
        };
    }
    agent__ws_send_ctl(a, agent_msg_gpus(rows, a->n_gpu_info));
    free(rows);
}

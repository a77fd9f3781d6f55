/* A declared fake GPU for the tests: a shared library exporting the NVML functions the agent
 * calls (worker/agent/nvml.c), its GPUs read from the file named by TY_FAKE_NVML_FILE at every
 * call, so a test can change a GPU's use or make one disappear while the agent runs. One GPU a
 * line, fields separated by '|':
 *
 *   UUID|NAME|MEMORY_MIB|MEMORY_USED_MIB|UTILIZATION_PCT|TEMPERATURE_C|POWER_MW[|XID]
 *
 * An XID other than 0 raises one critical Xid event (nvmlEventTypeXidCriticalError) on that GPU
 * for an event set it is registered in: nvmlEventSetWait_v2 returns it once (per GPU and Xid
 * value; this process remembers which it returned), then NVML_ERROR_TIMEOUT as when none is
 * pending.
 *
 * When TY_FAKE_NVML_CALLS names a file, nvmlInit and nvmlShutdown append "init" or "shutdown"
 * to it, so a test can count the agent's NVML sessions.
 *
 * Lines starting with '#' are skipped. Without the variable, or without the file, nvmlInit
 * fails (NVML_ERROR_DRIVER_NOT_LOADED) as on a host without a driver. This stands in only for
 * what cannot exist on a machine without a GPU; it is loaded through --nvml-library. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define FAKE_MAX 16
#define NVML_SUCCESS 0
#define NVML_ERROR_INVALID_ARGUMENT 2
#define NVML_ERROR_NOT_FOUND 6
#define NVML_ERROR_INSUFFICIENT_SIZE 7
#define NVML_ERROR_DRIVER_NOT_LOADED 9
#define NVML_ERROR_TIMEOUT 10
#define NVML_ERROR_GPU_IS_LOST 15
#define NVML_EVENT_XID_CRITICAL 0x8ULL

struct fake_gpu {
    char uuid[96], name[96];
    unsigned long long mem, used;
    unsigned util, temp, power;
    unsigned xid; /* 0: none */
};

struct nvml_event_data { /* nvmlEventData_t */
    void *device;
    unsigned long long type, data;
    unsigned gpu_instance, compute_instance;
};

/* The one event set (its handle is its address): which GPUs are registered, and which Xid each
 * last returned. */
static struct {
    unsigned long long registered[FAKE_MAX];
    unsigned returned[FAKE_MAX];
} fake_set;

struct nvml_memory {
    unsigned long long total, free, used;
};
struct nvml_utilization {
    unsigned gpu, memory;
};

/* Reads the file into gpus; returns the count, or -1 without a file. */
static int load(struct fake_gpu *gpus)
{
    const char *path = getenv("TY_FAKE_NVML_FILE");
    FILE *f = path ? fopen(path, "r") : NULL;
    if (!f)
        return -1;
    char line[512];
    int n = 0;
    while (n < FAKE_MAX && fgets(line, sizeof(line), f)) {
        if (line[0] == '#' || line[0] == '\n')
            continue;
        struct fake_gpu *g = &gpus[n];
        memset(g, 0, sizeof(*g));
        char *save = NULL, *field[8] = {0};
        int k = 0;
        for (char *t = strtok_r(line, "|\n", &save); t && k < 8; t = strtok_r(NULL, "|\n", &save))
            field[k++] = t;
        if (k < 7)
            continue;
        snprintf(g->uuid, sizeof(g->uuid), "%s", field[0]);
        snprintf(g->name, sizeof(g->name), "%s", field[1]);
        g->mem = strtoull(field[2], NULL, 10) << 20;
        g->used = strtoull(field[3], NULL, 10) << 20;
        g->util = (unsigned)strtoul(field[4], NULL, 10);
        g->temp = (unsigned)strtoul(field[5], NULL, 10);
        g->power = (unsigned)strtoul(field[6], NULL, 10);
        g->xid = k > 7 ? (unsigned)strtoul(field[7], NULL, 10) : 0;
        n++;
    }
    fclose(f);
    return n;
}

/* The GPU behind a handle (index + 1), or NULL when the file no longer has it. */
static int lookup(void *dev, struct fake_gpu *out)
{
    struct fake_gpu gpus[FAKE_MAX];
    int n = load(gpus);
    uintptr_t i = (uintptr_t)dev;
    if (n < 0 || i == 0 || i > (uintptr_t)n)
        return NVML_ERROR_GPU_IS_LOST;
    *out = gpus[i - 1];
    return NVML_SUCCESS;
}

static int copy_out(const char *s, char *buf, unsigned len)
{
    if (!buf || strlen(s) + 1 > len)
        return NVML_ERROR_INSUFFICIENT_SIZE;
    memcpy(buf, s, strlen(s) + 1);
    return NVML_SUCCESS;
}

int nvmlInit_v2(void);
int nvmlShutdown(void);
int nvmlDeviceGetCount_v2(unsigned *count);
int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **dev);
int nvmlDeviceGetName(void *dev, char *buf, unsigned len);
int nvmlDeviceGetUUID(void *dev, char *buf, unsigned len);
int nvmlDeviceGetMemoryInfo(void *dev, struct nvml_memory *mem);
int nvmlDeviceGetUtilizationRates(void *dev, struct nvml_utilization *u);
int nvmlDeviceGetTemperature(void *dev, int sensor, unsigned *temp);
int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw);
int nvmlEventSetCreate(void **set);
int nvmlEventSetFree(void *set);
int nvmlDeviceRegisterEvents(void *dev, unsigned long long types, void *set);
int nvmlEventSetWait_v2(void *set, struct nvml_event_data *data, unsigned timeout_ms);

/* Appends `what` to the TY_FAKE_NVML_CALLS file, if named. */
static void note_call(const char *what)
{
    const char *path = getenv("TY_FAKE_NVML_CALLS");
    FILE *f = path ? fopen(path, "a") : NULL;
    if (!f)
        return;
    fprintf(f, "%s\n", what);
    fclose(f);
}

int nvmlInit_v2(void)
{
    struct fake_gpu gpus[FAKE_MAX];
    note_call("init");
    return load(gpus) < 0 ? NVML_ERROR_DRIVER_NOT_LOADED : NVML_SUCCESS;
}

int nvmlShutdown(void)
{
    note_call("shutdown");
    return NVML_SUCCESS;
}

int nvmlDeviceGetCount_v2(unsigned *count)
{
    struct fake_gpu gpus[FAKE_MAX];
    int n = load(gpus);
    if (n < 0)
        return NVML_ERROR_DRIVER_NOT_LOADED;
    *count = (unsigned)n;
    return NVML_SUCCESS;
}

int nvmlDeviceGetHandleByIndex_v2(unsigned index, void **dev)
{
    struct fake_gpu gpus[FAKE_MAX];
    int n = load(gpus);
    if (n < 0 || index >= (unsigned)n)
        return NVML_ERROR_INVALID_ARGUMENT;
    *dev = (void *)(uintptr_t)(index + 1);
    return NVML_SUCCESS;
}

int nvmlDeviceGetName(void *dev, char *buf, unsigned len)
{
    struct fake_gpu g;
    int rc = lookup(dev, &g);
    return rc ? rc : copy_out(g.name, buf, len);
}

int nvmlDeviceGetUUID(void *dev, char *buf, unsigned len)
{
    struct fake_gpu g;
    int rc = lookup(dev, &g);
    return rc ? rc : copy_out(g.uuid, buf, len);
}

int nvmlDeviceGetMemoryInfo(void *dev, struct nvml_memory *mem)
{
    struct fake_gpu g;
    int rc = lookup(dev, &g);
    if (rc)
        return rc;
    *mem = (struct nvml_memory){.total = g.mem, .free = g.mem - g.used, .used = g.used};
    return NVML_SUCCESS;
}

int nvmlDeviceGetUtilizationRates(void *dev, struct nvml_utilization *u)
{
    struct fake_gpu g;
    int rc = lookup(dev, &g);
    if (rc)
        return rc;
    *u = (struct nvml_utilization){.gpu = g.util, .memory = g.util};
    return NVML_SUCCESS;
}

int nvmlDeviceGetTemperature(void *dev, int sensor, unsigned *temp)
{
    struct fake_gpu g;
    int rc = lookup(dev, &g);
    if (rc)
        return rc;
    if (sensor != 0)
        return NVML_ERROR_NOT_FOUND;
    *temp = g.temp;
    return NVML_SUCCESS;
}

int nvmlDeviceGetPowerUsage(void *dev, unsigned *mw)
{
    struct fake_gpu g;
    int rc = lookup(dev, &g);
    if (rc)
        return rc;
    *mw = g.power;
    return NVML_SUCCESS;
}

int nvmlEventSetCreate(void **set)
{
    if (!set)
        return NVML_ERROR_INVALID_ARGUMENT;
    memset(&fake_set, 0, sizeof(fake_set));
    *set = &fake_set;
    return NVML_SUCCESS;
}

int nvmlEventSetFree(void *set)
{
    return set == &fake_set ? NVML_SUCCESS : NVML_ERROR_INVALID_ARGUMENT;
}

int nvmlDeviceRegisterEvents(void *dev, unsigned long long types, void *set)
{
    struct fake_gpu g;
    int rc = lookup(dev, &g);
    if (rc)
        return rc;
    if (set != &fake_set)
        return NVML_ERROR_INVALID_ARGUMENT;
    fake_set.registered[(uintptr_t)dev - 1] |= types;
    return NVML_SUCCESS;
}

/* Never waits: the file says at once whether an Xid is pending. */
int nvmlEventSetWait_v2(void *set, struct nvml_event_data *data, unsigned timeout_ms)
{
    (void)timeout_ms;
    struct fake_gpu gpus[FAKE_MAX];
    int n = load(gpus);
    if (set != &fake_set || !data)
        return NVML_ERROR_INVALID_ARGUMENT;
    for (int i = 0; i < n; i++) {
        if (!gpus[i].xid || gpus[i].xid == fake_set.returned[i] ||
            !(fake_set.registered[i] & NVML_EVENT_XID_CRITICAL))
            continue;
        fake_set.returned[i] = gpus[i].xid;
        *data = (struct nvml_event_data){.device = (void *)(uintptr_t)(i + 1),
                                         .type = NVML_EVENT_XID_CRITICAL,
                                         .data = gpus[i].xid};
        return NVML_SUCCESS;
    }
    return NVML_ERROR_TIMEOUT;
}

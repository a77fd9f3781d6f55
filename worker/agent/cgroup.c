/* Every worker in a cgroup of its own (issue 22): the agent creates it before the worker runs
 * (the worker's supervisor joins it before its exec, supervise.c), limits it (memory and CPU from
 * the job's resources_per_worker, --worker-pids-max), reads its use, and kills by it: whatever a
 * worker forks stays in its cgroup, which only root may leave.
 *
 * cgroup v2 when the unified hierarchy offers memory, cpu and pids; else the v1 hierarchies of
 * memory, cpu, cpuacct and pids (a hybrid host). Each agent's cgroups are under a parent of its
 * own, trainyard-<node>-<pid>, inside the agent's own cgroup of each hierarchy (v2: where that one
 * cannot delegate the controllers, at the root), so that two agents on one host never share one;
 * a parent is removed once empty. An agent that cannot create cgroups runs its workers without
 * (--cgroups auto, logged as an error at start) or refuses to start (--cgroups required). */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

enum { CG_MEMORY = 1, CG_CPU = 2, CG_CPUACCT = 4, CG_PIDS = 8 };
#define CG_ALL (CG_MEMORY | CG_CPU | CG_CPUACCT | CG_PIDS)

/* ------------------------------------------------------------------------------------------ */
/* Small file helpers                                                                           */
/* ------------------------------------------------------------------------------------------ */

/* Writes text into dir/file. 0, or -1 with errno. */
static int cg_write(const char *dir, const char *file, const char *text)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path)) {
        errno = ENAMETOOLONG;
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CLOEXEC);
    if (fd < 0)
        return -1;
    int rc = util_write_all(fd, text, strlen(text));
    int e = errno;
    close(fd);
    errno = e;
    return rc;
}

/* dir/file's contents (malloc'd), or NULL. */
static char *cg_read(const char *dir, const char *file)
{
    char path[PATH_MAX];
    if ((size_t)snprintf(path, sizeof(path), "%s/%s", dir, file) >= sizeof(path))
        return NULL;
    return util_read_file(path, NULL);
}

/* The value after "key " on a line of dir/file (memory.events, cpu.stat, memory.oom_control),
 * or -1. */
static int64_t cg_read_key(const char *dir, const char *file, const char *key)
{
    char *text = cg_read(dir, file);
    if (!text)
        return -1;
    int64_t v = -1;
    size_t n = strlen(key);
    for (char *line = text; line && *line;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        if (strncmp(line, key, n) == 0 && line[n] == ' ')
            v = strtoll(line + n + 1, NULL, 10);
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return v;
}

static int64_t cg_read_int(const char *dir, const char *file)
{
    char *text = cg_read(dir, file);
    int64_t v = text ? strtoll(text, NULL, 10) : -1;
    free(text);
    return v;
}

/* ------------------------------------------------------------------------------------------ */
/* Finding the hierarchies                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* The agent's own path in the hierarchy whose /proc/self/cgroup line has `ctl` among its
 * controllers ("" for v2's "0::" line), malloc'd, or NULL. */
static char *own_path(const char *ctl)
{
    char *text = util_read_file("/proc/self/cgroup", NULL);
    char *out = NULL;
    for (char *line = text; line && *line && !out;) {
        char *nl = strchr(line, '\n');
        if (nl)
            *nl = '\0';
        char *c1 = strchr(line, ':');
        char *c2 = c1 ? strchr(c1 + 1, ':') : NULL;
        if (c2) {
            *c2 = '\0';
            const char *ctls = c1 + 1;
            bool match = !*ctl ? !*ctls : false;
            for (const char *p = ctls; *ctl && *p && !match;) {
                size_t n = strcspn(p, ",");
                match = n == strlen(ctl) && strncmp(p, ctl, n) == 0;
                p += n + (p[n] == ',');
            }
            if (match && (strcmp(line, "0") == 0) == !*ctl)
                out = strdup(c2 + 1);
        }
        line = nl ? nl + 1 : NULL;
    }
    free(text);
    return out;
}

/* The mount point of the cgroup (v1) hierarchy holding `ctl`, or of cgroup2 when ctl is NULL
 * (malloc'd), and in *also the other controllers mounted with it. NULL when none is mounted. */
static char *mount_of(const char *ctl, int *also)
{
    FILE *f = fopen("/proc/self/mountinfo", "re");
    if (!f)
        return NULL;
    char *line = NULL, *out = NULL;
    size_t cap = 0;
    while (!out && getline(&line, &cap, f) > 0) {
        /* ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE SOURCE SUPEROPTS */
        char *sep = strstr(line, " - ");
        char root[PATH_MAX], mnt[PATH_MAX], fstype[64], source[256], super[1024];
        if (!sep || sscanf(line, "%*s %*s %*s %4095s %4095s", root, mnt) != 2 ||
            sscanf(sep + 3, "%63s %255s %1023s", fstype, source, super) != 3 ||
            strcmp(root, "/") != 0)
            continue;
        if (!ctl) {
            if (strcmp(fstype, "cgroup2") == 0)
                out = strdup(mnt);
            continue;
        }
        if (strcmp(fstype, "cgroup") != 0)
            continue;
        int have = 0;
        bool match = false;
        for (char *tok = strtok(super, ","); tok; tok = strtok(NULL, ",")) {
            match = match || strcmp(tok, ctl) == 0;
            have |= strcmp(tok, "memory") == 0    ? CG_MEMORY
                    : strcmp(tok, "cpu") == 0     ? CG_CPU
                    : strcmp(tok, "cpuacct") == 0 ? CG_CPUACCT
                    : strcmp(tok, "pids") == 0    ? CG_PIDS
                                                  : 0;
        }
        if (match) {
            out = strdup(mnt);
            *also = have;
        }
    }
    free(line);
    fclose(f);
    return out;
}

/* "trainyard-<node>-<pid>", the node id's characters outside [A-Za-z0-9._-] as '_'. */
static void parent_name(const struct agent *a, char *buf, size_t len)
{
    char node[130];
    snprintf(node, sizeof(node), "%s", a->node_id ? a->node_id : "node");
    for (char *p = node; *p; p++)
        if (!strchr("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-", *p))
            *p = '_';
    snprintf(buf, len, "trainyard-%s-%ld", node, (long)getpid());
}

/* Removes the empty cgroups an agent that is gone (killed, its workers ended since) left in
 * base: trainyard-*-<pid> with no live <pid>. rmdir never removes a cgroup a process is still
 * in, so the ones whose workers wait to be adopted stay. */
static void sweep_stale(const char *base)
{
    DIR *d = opendir(base);
    if (!d)
        return;
    struct dirent *e;
    while ((e = readdir(d)) != NULL) {
        const char *dash = strrchr(e->d_name, '-');
        char *end = NULL;
        long pid = dash ? strtol(dash + 1, &end, 10) : 0;
        char dir[PATH_MAX], proc[64];
        snprintf(proc, sizeof(proc), "/proc/%ld", pid);
        if (strncmp(e->d_name, "trainyard-", 10) != 0 || pid <= 0 || !end || *end ||
            access(proc, F_OK) == 0 ||
            (size_t)snprintf(dir, sizeof(dir), "%s/%s", base, e->d_name) >= sizeof(dir))
            continue;
        DIR *sub = opendir(dir);
        struct dirent *c;
        while (sub && (c = readdir(sub)) != NULL) {
            char leaf[PATH_MAX + 256];
            struct stat st;
            snprintf(leaf, sizeof(leaf), "%s/%s", dir, c->d_name);
            if (c->d_name[0] != '.' && lstat(leaf, &st) == 0 && S_ISDIR(st.st_mode))
                rmdir(leaf);
        }
        if (sub)
            closedir(sub);
        if (rmdir(dir) == 0)
            TY_INFO("agent", "removed %s, left by an agent that is gone", dir);
    }
    closedir(d);
}

/* Creates dir (0755); an existing one is fine. */
static int make_dir(const char *dir)
{
    return mkdir(dir, 0755) == 0 || errno == EEXIST ? 0 : -1;
}

/* Whether the v2 cgroup dir offers every controller in `want` ("memory cpu pids") to its
 * children, enabling them when it can. */
static bool v2_delegates(const char *dir)
{
    char *have = cg_read(dir, "cgroup.subtree_control");
    bool ok = have && strstr(have, "memory") && strstr(have, "cpu") && strstr(have, "pids");
    free(have);
    return ok || cg_write(dir, "cgroup.subtree_control", "+memory +cpu +pids") == 0;
}

static int init_v2(struct agent *a, const char *name, char *why, size_t whylen)
{
    char *mnt = mount_of(NULL, NULL);
    char *own = own_path("");
    char *ctls = mnt ? cg_read(mnt, "cgroup.controllers") : NULL;
    int rc = -1;
    if (!mnt || !own || !ctls || !strstr(ctls, "memory") || !strstr(ctls, "cpu") ||
        !strstr(ctls, "pids")) {
        snprintf(why, whylen, "the unified hierarchy lacks memory, cpu or pids");
        goto out;
    }
    /* Inside the agent's own cgroup where it delegates the controllers, else at the root. */
    char base[PATH_MAX], dir[PATH_MAX];
    snprintf(base, sizeof(base), "%s%s", mnt, strcmp(own, "/") == 0 ? "" : own);
    if (!v2_delegates(base))
        snprintf(base, sizeof(base), "%s", mnt);
    sweep_stale(base);
    if ((size_t)snprintf(dir, sizeof(dir), "%s/%s", base, name) >= sizeof(dir) ||
        !v2_delegates(base) || make_dir(dir) != 0 || !v2_delegates(dir)) {
        snprintf(why, whylen, "cannot create %.300s with memory, cpu and pids: %s", dir,
                 strerror(errno));
        rmdir(dir);
        goto out;
    }
    a->cg.parent[0] = strdup(dir);
    a->cg.ctl[0] = CG_ALL;
    a->cg.n = a->cg.parent[0] ? 1 : 0;
    a->cg.version = 2;
    rc = a->cg.n ? 0 : -1;
out:
    free(mnt);
    free(own);
    free(ctls);
    return rc;
}

static int init_v1(struct agent *a, const char *name, char *why, size_t whylen)
{
    static const char *const ctl_names[] = {"memory", "cpu", "cpuacct", "pids"};
    int covered = 0;
    for (size_t i = 0; i < 4; i++) {
        if (covered & (1 << i))
            continue;
        int also = 0;
        char *mnt = mount_of(ctl_names[i], &also);
        char *own = mnt ? own_path(ctl_names[i]) : NULL;
        char dir[PATH_MAX];
        int n =
            own ? snprintf(dir, sizeof(dir), "%s%s/%s", mnt, strcmp(own, "/") == 0 ? "" : own, name)
                : -1;
        if (n >= 0 && (size_t)n < sizeof(dir)) {
            char *slash = strrchr(dir, '/');
            *slash = '\0';
            sweep_stale(dir);
            *slash = '/';
        }
        if (n < 0 || (size_t)n >= sizeof(dir) || make_dir(dir) != 0) {
            snprintf(why, whylen, "no v1 %s hierarchy to create cgroups in%s%s", ctl_names[i],
                     n < 0 ? "" : ": ", n < 0 ? "" : strerror(errno));
            free(mnt);
            free(own);
            return -1;
        }
        free(mnt);
        free(own);
        a->cg.parent[a->cg.n] = strdup(dir);
        a->cg.ctl[a->cg.n] = also & CG_ALL;
        if (!a->cg.parent[a->cg.n])
            return -1;
        a->cg.n++;
        covered |= also;
    }
    a->cg.version = 1;
    return 0;
}

void agent__cgroup_fini(struct agent *a)
{
    for (size_t i = 0; i < a->cg.n; i++) {
        if (rmdir(a->cg.parent[i]) != 0 && errno != ENOENT)
            TY_INFO("agent", "cgroup %s kept: workers still run in it (%s)", a->cg.parent[i],
                    strerror(errno));
        UTIL_FREE(a->cg.parent[i]);
    }
    a->cg.n = 0;
    a->cg.version = 0;
}

int agent__cgroup_init(struct agent *a)
{
    const char *mode = a->cfg->cgroups ? a->cfg->cgroups : "auto";
    memset(&a->cg, 0, sizeof(a->cg));
    if (strcmp(mode, "off") == 0) {
        TY_WARN("agent", "--cgroups off: workers are not limited, and what they leave behind is "
                         "found by process group (and uid) only");
        return 0;
    }
    if (strcmp(mode, "auto") != 0 && strcmp(mode, "required") != 0) {
        TY_ERROR("agent", "--cgroups must be auto, required or off");
        return -1;
    }
    char name[200], why2[600] = "", why1[600] = "";
    parent_name(a, name, sizeof(name));
    if (init_v2(a, name, why2, sizeof(why2)) == 0) {
        TY_INFO("agent", "each worker runs in a cgroup of its own (cgroup v2) under %s",
                a->cg.parent[0]);
        return 0;
    }
    agent__cgroup_fini(a);
    if (init_v1(a, name, why1, sizeof(why1)) == 0) {
        TY_INFO("agent",
                "each worker runs in cgroups of its own: cgroup v1 controllers (a hybrid host: %s) "
                "under %s, %s%s%s%s%s",
                why2, a->cg.parent[0], a->cg.n > 1 ? a->cg.parent[1] : "", a->cg.n > 2 ? ", " : "",
                a->cg.n > 2 ? a->cg.parent[2] : "", a->cg.n > 3 ? ", " : "",
                a->cg.n > 3 ? a->cg.parent[3] : "");
        return 0;
    }
    agent__cgroup_fini(a);
    if (strcmp(mode, "required") == 0) {
        TY_ERROR("agent", "--cgroups required, but no cgroup can be created (v2: %s; v1: %s)", why2,
                 why1);
        return -1;
    }
    TY_ERROR("agent",
             "NO CGROUPS: workers run without memory, CPU or process limits, and what they leave "
             "behind is found by process group and uid only (v2: %s; v1: %s). Run the agent as "
             "root on a host with cgroups, or pass --cgroups required to refuse to start",
             why2, why1);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* One worker's cgroups                                                                         */
/* ------------------------------------------------------------------------------------------ */

int agent__cgroup_create(struct agent *a, struct agent_worker *w, int64_t cpu_milli,
                         int64_t memory_mb)
{
    w->cg_n = 0;
    for (size_t i = 0; i < a->cg.n; i++) {
        char dir[PATH_MAX];
        if ((size_t)snprintf(dir, sizeof(dir), "%s/%s.%lld.%lld", a->cg.parent[i], w->job_id,
                             (long long)w->attempt, (long long)w->rank) >= sizeof(dir)) {
            errno = ENAMETOOLONG;
            return -1;
        }
        if (make_dir(dir) != 0 || !(w->cg_dirs[i] = strdup(dir)))
            return -1;
        w->cg_n = i + 1;
    }
    return agent__cgroup_limit(a, w, cpu_milli, memory_mb);
}

int agent__cgroup_limit(struct agent *a, struct agent_worker *w, int64_t cpu_milli,
                        int64_t memory_mb)
{
    w->memory_mb = memory_mb;
    for (size_t i = 0; i < w->cg_n; i++) {
        const char *dir = w->cg_dirs[i];
        char v[64];
        int ctl = a->cg.ctl[i], rc = 0;
        if ((ctl & CG_MEMORY) && memory_mb > 0) {
            snprintf(v, sizeof(v), "%lld", (long long)memory_mb * 1024 * 1024);
            rc = cg_write(dir, a->cg.version == 2 ? "memory.max" : "memory.limit_in_bytes", v);
            if (rc == 0 && a->cg.version == 2)
                rc = cg_write(dir, "memory.swap.max", "0") == 0 || errno == ENOENT ? 0 : -1;
        }
        if (rc == 0 && (ctl & CG_CPU) && cpu_milli > 0) {
            long long quota = (long long)cpu_milli * 100; /* of a 100 ms period */
            if (quota < 1000)
                quota = 1000;
            snprintf(v, sizeof(v), "%lld 100000", quota);
            if (a->cg.version == 2) {
                rc = cg_write(dir, "cpu.max", v);
            } else {
                snprintf(v, sizeof(v), "%lld", quota);
                rc = cg_write(dir, "cpu.cfs_period_us", "100000");
                if (rc == 0)
                    rc = cg_write(dir, "cpu.cfs_quota_us", v);
            }
        }
        if (rc == 0 && (ctl & CG_PIDS) && a->cfg->worker_pids_max > 0) {
            snprintf(v, sizeof(v), "%lld", (long long)a->cfg->worker_pids_max);
            rc = cg_write(dir, "pids.max", v);
        }
        if (rc != 0)
            return -1;
    }
    return 0;
}

int agent__cgroup_join_fds(const struct agent_worker *w, int *fds)
{
    for (size_t i = 0; i < w->cg_n; i++) {
        char path[PATH_MAX];
        snprintf(path, sizeof(path), "%s/cgroup.procs", w->cg_dirs[i]);
        int fd = open(path, O_WRONLY | O_CLOEXEC);
        /* Above the descriptors the child moves to 0-5. */
        fds[i] = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);
        if (fd >= 0)
            close(fd);
        if (fds[i] < 0) {
            int e = errno;
            for (size_t j = 0; j < i; j++)
                close(fds[j]);
            errno = e;
            return -1;
        }
    }
    return (int)w->cg_n;
}

/* SIGKILLs every process listed in dir/cgroup.procs. Returns how many there were (-1: the
 * cgroup is gone). */
static int kill_listed(const char *dir)
{
    char *text = cg_read(dir, "cgroup.procs");
    if (!text)
        return -1;
    int n = 0;
    for (char *p = text; *p;) {
        char *end;
        long pid = strtol(p, &end, 10);
        if (end == p)
            break;
        if (pid > 0 && kill((pid_t)pid, SIGKILL) == 0)
            n++;
        p = end;
        while (*p == '\n')
            p++;
    }
    free(text);
    return n;
}

bool agent__cgroup_kill(struct agent_worker *w)
{
    if (w->cg_n == 0)
        return true;
    /* Every process of the worker is in each of its cgroups: the first one lists them all. A
     * process forking while it is killed adds a child after the list was read: read again. */
    for (int round = 0; round < 8; round++)
        if (kill_listed(w->cg_dirs[0]) <= 0)
            return true;
    return false;
}

bool agent__cgroup_remove(struct agent_worker *w)
{
    bool empty = true;
    for (size_t i = 0; i < w->cg_n; i++) {
        if (!w->cg_dirs[i])
            continue;
        if (rmdir(w->cg_dirs[i]) != 0 && errno != ENOENT) {
            empty = false;
            continue;
        }
        if (w->adopted) { /* an earlier agent's parent goes with its last worker */
            char *slash = strrchr(w->cg_dirs[i], '/');
            if (slash) {
                *slash = '\0';
                rmdir(w->cg_dirs[i]);
            }
        }
        UTIL_FREE(w->cg_dirs[i]);
    }
    if (empty)
        w->cg_n = 0;
    return empty;
}

int agent__cgroup_usage(const struct agent *a, const struct agent_worker *w, int64_t *cpu_usec,
                        int64_t *memory_bytes, int64_t *memory_peak)
{
    *cpu_usec = *memory_bytes = *memory_peak = -1;
    for (size_t i = 0; i < w->cg_n && i < a->cg.n; i++) {
        int ctl = a->cg.ctl[i];
        if (!w->cg_dirs[i])
            continue;
        if (a->cg.version == 2) {
            *cpu_usec = cg_read_key(w->cg_dirs[i], "cpu.stat", "usage_usec");
            *memory_bytes = cg_read_int(w->cg_dirs[i], "memory.current");
            *memory_peak = cg_read_int(w->cg_dirs[i], "memory.peak");
            continue;
        }
        if (ctl & CG_CPUACCT) {
            int64_t ns = cg_read_int(w->cg_dirs[i], "cpuacct.usage");
            *cpu_usec = ns < 0 ? -1 : ns / 1000;
        }
        if (ctl & CG_MEMORY) {
            *memory_bytes = cg_read_int(w->cg_dirs[i], "memory.usage_in_bytes");
            *memory_peak = cg_read_int(w->cg_dirs[i], "memory.max_usage_in_bytes");
        }
    }
    return *cpu_usec >= 0 && *memory_bytes >= 0 ? 0 : -1;
}

int64_t agent__cgroup_oom_kills(const struct agent *a, const struct agent_worker *w)
{
    for (size_t i = 0; i < w->cg_n && i < a->cg.n; i++) {
        if (!(a->cg.ctl[i] & CG_MEMORY) || !w->cg_dirs[i])
            continue;
        return a->cg.version == 2 ? cg_read_key(w->cg_dirs[i], "memory.events", "oom_kill")
                                  : cg_read_key(w->cg_dirs[i], "memory.oom_control", "oom_kill");
    }
    return -1;
}

/* Workers that outlive the agent (docs/agent-restart.md).
 *
 * Every worker runs under a trainyard-supervisor (supervisor.c) that is not in its process group
 * and does not die with the agent. The agent keeps, per running worker, a durable record in
 * <data>/workers/<job>.<attempt>.<rank>.json (0600, the directory 0700: it holds the report
 * secret), and its supervisor writes <key>.status when the worker ends. <data>/agent.lease names
 * the live agent ("PID START ORPHAN_TIMEOUT_S"); each supervisor reads it through a descriptor
 * it inherited, so a restarted agent that rewrites it in place takes every supervisor over, and a
 * supervisor whose agent stays away past the timeout kills its worker. */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* ------------------------------------------------------------------------------------------ */
/* The lease                                                                                    */
/* ------------------------------------------------------------------------------------------ */

void agent__lease_write(struct agent *a)
{
    if (a->lease_fd < 0)
        return;
    unsigned long long start = 0;
    util_proc_start_time((int)getpid(), &start);
    /* One fixed-size write at offset 0: a supervisor never reads a shorter, older tail. */
    char line[64];
    memset(line, ' ', sizeof(line));
    int n = snprintf(line, sizeof(line), "%ld %llu %lld", (long)getpid(), start,
                     (long long)a->orphan_timeout_s);
    if (n > 0 && (size_t)n < sizeof(line))
        line[n] = ' ';
    line[sizeof(line) - 1] = '\n';
    if (pwrite(a->lease_fd, line, sizeof(line), 0) != (ssize_t)sizeof(line))
        TY_WARN("proc", "cannot write the agent lease: %s", strerror(errno));
}

int agent__lease_open(struct agent *a)
{
    char path[PATH_MAX];
    snprintf(path, sizeof(path), "%s/workers", a->data_dir);
    if (util_mkdir_p(path, 0700) != 0 || !(a->workers_dir = strdup(path))) {
        TY_ERROR("agent", "cannot create %s: %s", path, strerror(errno));
        return -1;
    }
    snprintf(path, sizeof(path), "%s/agent.lease", a->data_dir);
    int fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC, 0600);
    if (fd < 0) {
        TY_ERROR("agent", "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    /* Numbered 10 or above: spawning moves the supervisor's descriptors to 3, 4 and 5. */
    a->lease_fd = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    close(fd);
    /* The supervisors get a descriptor of their own, read only: one runs as its worker's uid,
     * and a worker that took a writable one (pidfd_getfd) could make every supervisor on the
     * node believe the agent gone. */
    fd = a->lease_fd < 0 ? -1 : open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    a->lease_read_fd = fd < 0 ? -1 : fcntl(fd, F_DUPFD_CLOEXEC, 10);
    if (fd >= 0)
        close(fd);
    if (a->lease_fd < 0 || a->lease_read_fd < 0) {
        TY_ERROR("agent", "cannot open %s: %s", path, strerror(errno));
        return -1;
    }
    agent__lease_write(a);
    return 0;
}

/* ------------------------------------------------------------------------------------------ */
/* Per-worker records                                                                           */
/* ------------------------------------------------------------------------------------------ */

char *agent__record_path(const struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                         const char *suffix)
{
    size_t n = strlen(a->workers_dir) + strlen(job_id) + strlen(suffix) + 64;
    char *p = malloc(n);
    if (p)
        snprintf(p, n, "%s/%s.%lld.%lld%s", a->workers_dir, job_id, (long long)attempt,
                 (long long)rank, suffix);
    return p;
}

int agent__worker_status_open(struct agent *a, const struct agent_worker *w)
{
    char *path = agent__record_path(a, w->job_id, w->attempt, w->rank, ".status");
    if (!path) {
        errno = ENOMEM;
        return -1;
    }
    int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    free(path);
    if (fd < 0)
        return -1;
    int hi = fcntl(fd, F_DUPFD_CLOEXEC, 10);
    int e = errno;
    close(fd);
    errno = e;
    return hi;
}

int agent__worker_status_read(struct agent *a, const struct agent_worker *w, int *exit_code,
                              int *sig, char *error, size_t errlen)
{
    char *path = agent__record_path(a, w->job_id, w->attempt, w->rank, ".status");
    char *text = path ? util_read_file(path, NULL) : NULL;
    free(path);
    if (!text)
        return -1;
    char *sp = strchr(text, ' ');
    char *nl = sp ? strchr(sp, '\n') : NULL;
    int64_t v = 0;
    int rc = -1;
    if (sp && nl) {
        *sp = *nl = '\0';
        rc = util_parse_int64(sp + 1, 0, 255, &v);
    }
    *exit_code = *sig = -1;
    error[0] = '\0';
    if (rc == 0 && strcmp(text, "exit") == 0) {
        *exit_code = (int)v;
    } else if (rc == 0 && strcmp(text, "signal") == 0) {
        *sig = (int)v;
    } else if (strcmp(text, "orphaned") == 0 && sp && nl &&
               util_parse_int64(sp + 1, 0, INT32_MAX, &v) == 0) {
        *sig = 9;
        snprintf(error, errlen, "killed by its supervisor: no agent for %lld s", (long long)v);
        rc = 0;
    } else {
        rc = -1;
    }
    free(text);
    return rc;
}

/* Replaces `path` with `text` (0600) through a temporary file and a rename: an agent killed
 * midway leaves the old record or the new one. Not synced: a record matters across an agent
 * crash, which keeps the page cache, not across a reboot, which the workers do not survive
 * either (and an fsync per worker would double the launch time of 16 workers). 0 or -1. */
static int write_atomic(const char *path, const char *text)
{
    size_t n = strlen(path) + 8;
    char *tmp = malloc(n);
    if (!tmp)
        return -1;
    snprintf(tmp, n, "%s.tmp", path);
    int fd = open(tmp, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    int rc = fd >= 0 && util_write_all(fd, text, strlen(text)) == 0 ? 0 : -1;
    if (fd >= 0 && close(fd) != 0)
        rc = -1;
    if (rc == 0)
        rc = rename(tmp, path);
    if (rc != 0)
        unlink(tmp);
    free(tmp);
    return rc;
}

int agent__worker_record_write(struct agent *a, const struct agent_worker *w)
{
    char *path = agent__record_path(a, w->job_id, w->attempt, w->rank, ".json");
    char start[32]; /* as text: a JSON integer is signed */
    snprintf(start, sizeof(start), "%llu", w->sup_start);
    long long uid = w->uid == AGENT_NO_UID ? -1 : (long long)w->uid;
    long long gid = w->gid == AGENT_NO_UID ? -1 : (long long)w->gid;
    /* The packages too: a restarted agent must not trim the cache of one in use (code.c). */
    json_t *o = json_pack("{s:s, s:I, s:I, s:I, s:I, s:s, s:s, s:I, s:I, s:s?, s:s?, s:s*, s:s*, "
                          "s:s*}",
                          "job_id", w->job_id, "attempt", (json_int_t)w->attempt, "rank",
                          (json_int_t)w->rank, "pid", (json_int_t)w->pid, "supervisor_pid",
                          (json_int_t)w->sup_pid, "supervisor_start", start, "secret", w->secret,
                          "uid", (json_int_t)uid, "gid", (json_int_t)gid, "tmp_dir", w->tmp_dir,
                          "grant_dir", w->grant_dir, "storage_path", w->storage_path,
                          "code_package", w->packages[0], "checkpoint_package", w->packages[1]);
    json_t *cgs = o ? json_array() : NULL;
    for (size_t i = 0; cgs && i < w->cg_n; i++)
        json_array_append_new(cgs, json_string(w->cg_dirs[i] ? w->cg_dirs[i] : ""));
    if (o && (!cgs || json_object_set_new(o, "cgroups", cgs) != 0 ||
              json_object_set_new(o, "memory_mb", json_integer(w->memory_mb)) != 0)) {
        json_decref(o);
        o = NULL;
    }
    char *text = o ? json_dumps(o, JSON_COMPACT) : NULL;
    json_decref(o);
    int rc = path && text ? write_atomic(path, text) : -1;
    if (rc != 0)
        TY_ERROR("proc",
                 "cannot record job %s attempt %lld rank %lld: %s; it will not survive an "
                 "agent restart",
                 w->job_id, (long long)w->attempt, (long long)w->rank, strerror(errno));
    free(path);
    free(text);
    return rc;
}

void agent__worker_record_remove(struct agent *a, const struct agent_worker *w)
{
    static const char *const suffixes[] = {".json", ".status"};
    for (size_t i = 0; i < 2; i++) {
        char *path = agent__record_path(a, w->job_id, w->attempt, w->rank, suffixes[i]);
        if (path && unlink(path) != 0 && errno != ENOENT)
            TY_WARN("proc", "cannot remove %s: %s", path, strerror(errno));
        free(path);
    }
}

bool agent__supervisor_alive(const struct agent_worker *w)
{
    unsigned long long start = 0;
    return w->sup_pid > 0 && util_proc_start_time((int)w->sup_pid, &start) == 0 &&
           start == w->sup_start;
}

/* ------------------------------------------------------------------------------------------ */
/* Re-adopting at start-up                                                                      */
/* ------------------------------------------------------------------------------------------ */

/* An integer member of o within [lo, hi], or -1 (-2 when absent or out of range). */
static long long member_int(const json_t *o, const char *key, long long lo, long long hi)
{
    json_t *v = json_object_get(o, key);
    if (!json_is_integer(v) || json_integer_value(v) < lo || json_integer_value(v) > hi)
        return -2;
    return json_integer_value(v);
}

/* The package (sha256) a record names under `key`, or NULL when absent or not a sha256. */
static const char *member_package(const json_t *o, const char *key)
{
    const char *s = json_string_value(json_object_get(o, key));
    return s && strlen(s) == 64 && strspn(s, "0123456789abcdef") == 64 ? s : NULL;
}

/* A worker from its record (NULL when the record is unreadable: logged). */
static struct agent_worker *worker_from_record(const char *path)
{
    json_t *o = json_load_file(path, 0, NULL);
    const char *job = json_string_value(json_object_get(o, "job_id"));
    const char *secret = json_string_value(json_object_get(o, "secret"));
    const char *start = json_string_value(json_object_get(o, "supervisor_start"));
    long long attempt = member_int(o, "attempt", 0, INT32_MAX);
    long long rank = member_int(o, "rank", 0, INT32_MAX);
    long long pid = member_int(o, "pid", 1, INT32_MAX);
    long long sup = member_int(o, "supervisor_pid", 1, INT32_MAX);
    long long uid = member_int(o, "uid", -1, INT32_MAX), gid = member_int(o, "gid", -1, INT32_MAX);
    const char *tmp = json_string_value(json_object_get(o, "tmp_dir"));
    const char *grant = json_string_value(json_object_get(o, "grant_dir"));
    const char *sp = json_string_value(json_object_get(o, "storage_path"));
    const char *code = member_package(o, "code_package");
    const char *ckpt = member_package(o, "checkpoint_package");
    struct agent_worker *w = NULL;
    char *end = NULL;
    unsigned long long st = start ? strtoull(start, &end, 10) : 0;
    if (!job || aproto_job_id_valid(job) != 0 || !secret || strlen(secret) >= sizeof(w->secret) ||
        !end || *end || attempt < 0 || rank < 0 || pid < 0 || sup < 0 || uid < -1 || gid < -1) {
        TY_WARN("proc", "ignoring unreadable worker record %s", path);
        json_decref(o);
        return NULL;
    }
    w = calloc(1, sizeof(*w));
    if (w &&
        (!(w->job_id = strdup(job)) || (tmp && !(w->tmp_dir = strdup(tmp))) ||
         (grant && !(w->grant_dir = strdup(grant))) || (sp && !(w->storage_path = strdup(sp))) ||
         (code && !(w->packages[0] = strdup(code))) ||
         (ckpt && !(w->packages[1] = strdup(ckpt))))) {
        agent__worker_free(w);
        w = NULL;
    }
    if (w) {
        w->attempt = attempt;
        w->rank = rank;
        w->pid = (pid_t)pid;
        w->sup_pid = (pid_t)sup;
        w->sup_start = st;
        w->adopted = true;
        w->status = AGENT_WORKER_RUNNING;
        w->exit_code = w->signal = -1;
        w->uid = uid < 0 ? AGENT_NO_UID : (uid_t)uid;
        w->gid = gid < 0 ? AGENT_NO_UID : (gid_t)gid;
        snprintf(w->secret, sizeof(w->secret), "%s", secret);
        long long mem = member_int(o, "memory_mb", 0, INT64_MAX);
        w->memory_mb = mem > 0 ? mem : 0;
        /* Its cgroups, under the earlier agent's parent (ours are per agent process). */
        json_t *cgs = json_object_get(o, "cgroups");
        for (size_t i = 0; i < json_array_size(cgs) && i < AGENT_CG_MAX; i++) {
            const char *d = json_string_value(json_array_get(cgs, i));
            if (d && d[0] == '/' && !strstr(d, "/..") && (w->cg_dirs[i] = strdup(d)) != NULL)
                w->cg_n = i + 1;
        }
    }
    json_decref(o);
    return w;
}

/* Puts the worker recorded at `path` into the table (RUNNING, adopted). */
static void load_one(struct agent *a, const char *path)
{
    struct agent_worker *w = worker_from_record(path);
    if (!w)
        return;
    if (agent__worker_find(a, w->job_id, w->attempt, w->rank)) {
        /* Its exit was spooled before the previous agent could remove the record. */
        agent__worker_record_remove(a, w);
        agent__worker_free(w);
        return;
    }
    w->next = a->workers;
    a->workers = w;
}

/* Takes back w when its supervisor still runs, else queues its recorded exit. */
static void adopt_one(struct agent *a, struct agent_worker *w)
{
    agent__uid_rehold(a, w); /* its uid stays this job's until nothing of it is left */
    if (!agent__supervisor_alive(w)) {
        TY_INFO("proc", "job %s attempt %lld rank %lld ended while the agent was away", w->job_id,
                (long long)w->attempt, (long long)w->rank);
        agent__worker_gone(a, w, NULL);
        return;
    }
    TY_INFO("proc", "re-adopted job %s attempt %lld rank %lld (pid %ld, supervisor %ld)", w->job_id,
            (long long)w->attempt, (long long)w->rank, (long)w->pid, (long)w->sup_pid);
    int64_t seq = agent__next_seq(a);
    agent__event_push(
        a, AGENT_EV_STARTED,
        aproto_msg_worker_started(seq, w->job_id, w->attempt, w->rank, (long)w->pid, NULL), seq,
        NULL);
}

void agent__workers_adopt(struct agent *a)
{
    DIR *d = opendir(a->workers_dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len <= 5 || strcmp(de->d_name + len - 5, ".json") != 0)
            continue;
        char path[PATH_MAX];
        if ((size_t)snprintf(path, sizeof(path), "%s/%s", a->workers_dir, de->d_name) <
            sizeof(path))
            load_one(a, path);
    }
    closedir(d);
    /* Every record is loaded before any exit is handled: a worker that ended frees its uid (its
     * leftover processes are killed) only when no other running worker still has it. */
    for (struct agent_worker *w = a->workers; w; w = w->next)
        if (w->adopted && w->status == AGENT_WORKER_RUNNING)
            adopt_one(a, w);
}

/* The durable report spool, <data>/spool/<job>.<attempt>.<rank>.<report_seq>.json: a report is
 * written here (write + fdatasync + rename + directory fsync) before the worker gets its ack,
 * deleted when the server acks the event that carried it, and resent after an agent restart. */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

bool agent__spool_has(struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                      int64_t report_seq)
{
    if (aproto_job_id_valid(job_id) != 0)
        return false;
    size_t plen = strlen(a->spool_dir) + strlen(job_id) + 96;
    char *path = malloc(plen);
    if (!path)
        return false;
    snprintf(path, plen, "%s/%s.%lld.%lld.%lld.json", a->spool_dir, job_id, (long long)attempt,
             (long long)rank, (long long)report_seq);
    bool has = access(path, F_OK) == 0;
    free(path);
    return has;
}

char *agent__spool_write(struct agent *a, const json_t *body, bool *dup)
{
    *dup = false;
    struct aproto_report_body_keys k;
    if (aproto_report_body_parse(body, &k) != 0 || aproto_job_id_valid(k.job_id) != 0)
        return NULL;
    size_t plen = strlen(a->spool_dir) + strlen(k.job_id) + 96;
    char *path = malloc(plen);
    char *text = json_dumps(body, JSON_COMPACT);
    if (!path || !text)
        goto fail;
    snprintf(path, plen, "%s/%s.%lld.%lld.%lld.json", a->spool_dir, k.job_id, (long long)k.attempt,
             (long long)k.rank, (long long)k.report_seq);
    if (access(path, F_OK) == 0) {
        *dup = true;
        free(text);
        return path;
    }
    size_t len = strlen(text);
    text[len] = '\n'; /* one line per file */
    int rc = util_write_file_durable(path, text, len + 1, 0600);
    text[len] = '\0';
    if (rc != 0) {
        int e = errno;
        TY_ERROR("report", "cannot write %s: %s", path, strerror(e));
        if (e == ENOSPC)
            agent__disk_full(a, k.job_id, k.attempt, path, "report spool");
        goto fail;
    }
    free(text);
    return path;
fail:
    free(path);
    free(text);
    return NULL;
}

struct spooled {
    json_t *body;
    struct aproto_report_body_keys k; /* borrowed from body */
    char *path;
};

/* Resent in the order they were made: by job, attempt, rank and report_seq. */
static int cmp_spooled(const void *x, const void *y)
{
    const struct aproto_report_body_keys *a = &((const struct spooled *)x)->k;
    const struct aproto_report_body_keys *b = &((const struct spooled *)y)->k;
    int c = strcmp(a->job_id, b->job_id);
    if (c)
        return c;
    const int64_t u[] = {a->attempt, a->rank, a->report_seq};
    const int64_t v[] = {b->attempt, b->rank, b->report_seq};
    for (size_t i = 0; i < 3; i++)
        if (u[i] != v[i])
            return u[i] < v[i] ? -1 : 1;
    return 0;
}

void agent__spool_reload(struct agent *a)
{
    DIR *d = opendir(a->spool_dir);
    if (!d) {
        TY_ERROR("report", "cannot open %s: %s", a->spool_dir, strerror(errno));
        return;
    }
    struct spooled *v = NULL;
    size_t n = 0, cap = 0;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        const char *name = de->d_name;
        size_t len = strlen(name);
        if (name[0] == '.')
            continue;
        size_t plen = strlen(a->spool_dir) + len + 2;
        char *path = malloc(plen);
        if (!path)
            break;
        snprintf(path, plen, "%s/%s", a->spool_dir, name);
        if (len > 7 && strcmp(name + len - 7, ".ty-tmp") == 0) { /* never acked: drop */
            unlink(path);
            free(path);
            continue;
        }
        if (len <= 5 || strcmp(name + len - 5, ".json") != 0) {
            free(path);
            continue;
        }
        json_t *body = json_load_file(path, 0, NULL);
        struct aproto_report_body_keys k;
        if (aproto_report_body_parse(body, &k) != 0) {
            TY_WARN("report", "ignoring unreadable spooled report %s", path);
            json_decref(body);
            free(path);
            continue;
        }
        if (n == cap) {
            size_t nc = cap ? cap * 2 : 16;
            struct spooled *nv = realloc(v, nc * sizeof(*nv));
            if (!nv) {
                json_decref(body);
                free(path);
                break;
            }
            v = nv;
            cap = nc;
        }
        v[n].body = body;
        v[n].k = k;
        v[n].path = path;
        n++;
    }
    closedir(d);
    if (n > 0) {
        qsort(v, n, sizeof(*v), cmp_spooled);
        TY_INFO("report", "resending %zu spooled report(s)", n);
    }
    for (size_t i = 0; i < n; i++) {
        int64_t seq = agent__next_seq(a);
        agent__event_push(a, AGENT_EV_REPORT, aproto_msg_report(seq, v[i].body), seq, v[i].path);
        json_decref(v[i].body);
    }
    free(v);
}

/* ------------------------------------------------------------------------------------------ */
/* Worker exits                                                                                 */
/* ------------------------------------------------------------------------------------------ */

/* <spool>/<job>.<attempt>.<rank>.exit (malloc'd), or NULL. */
static char *exit_path(const struct agent *a, const char *job_id, int64_t attempt, int64_t rank)
{
    size_t plen = strlen(a->spool_dir) + strlen(job_id) + 80;
    char *path = malloc(plen);
    if (path)
        snprintf(path, plen, "%s/%s.%lld.%lld.exit", a->spool_dir, job_id, (long long)attempt,
                 (long long)rank);
    return path;
}

char *agent__spool_exit(struct agent *a, const struct agent_worker *w)
{
    if (aproto_job_id_valid(w->job_id) != 0)
        return NULL;
    char *path = exit_path(a, w->job_id, w->attempt, w->rank);
    char *text = aproto_exit_body(&(struct aproto_exit_body){.job_id = w->job_id,
                                                             .attempt = w->attempt,
                                                             .rank = w->rank,
                                                             .exit_code = w->exit_code,
                                                             .signal = w->signal,
                                                             .error = w->error,
                                                             .reason = w->reason});
    if (!path || !text || util_write_file_durable(path, text, strlen(text), 0600) != 0) {
        TY_ERROR("proc", "cannot spool the exit of job %s attempt %lld rank %lld: %s", w->job_id,
                 (long long)w->attempt, (long long)w->rank, strerror(errno));
        free(path);
        path = NULL;
    }
    free(text);
    return path;
}

/* Re-queues one spooled exit (path taken over). */
static void reload_exit(struct agent *a, char *path)
{
    size_t len = 0;
    char *text = util_read_file(path, &len);
    struct aproto_exit_body e;
    if (!text || aproto_exit_body_parse(text, len, &e) != 0) {
        TY_WARN("proc", "ignoring unreadable spooled exit %s", path);
        free(text);
        free(path);
        return;
    }
    free(text);
    struct agent_worker *w = calloc(1, sizeof(*w));
    if (!w || !(w->job_id = strdup(e.job_id)) || (e.error && !(w->error = strdup(e.error))) ||
        (e.reason && !(w->reason = strdup(e.reason)))) {
        if (w) {
            free(w->job_id);
            free(w->error);
        }
        free(w);
        aproto_exit_body_free(&e);
        free(path);
        return;
    }
    w->attempt = e.attempt;
    w->rank = e.rank;
    w->status = AGENT_WORKER_EXITED;
    w->exit_code = e.exit_code;
    w->signal = e.signal;
    w->exit_seq = agent__next_seq(a);
    w->next = a->workers;
    a->workers = w;
    aproto_exit_body_free(&e);
    TY_INFO("proc", "resending the exit of job %s attempt %lld rank %lld", w->job_id,
            (long long)w->attempt, (long long)w->rank);
    agent__event_push(a, AGENT_EV_EXITED,
                      aproto_msg_worker_exited(w->exit_seq, w->job_id, w->attempt, w->rank,
                                               w->exit_code, w->signal, w->error, w->reason),
                      w->exit_seq, path);
}

void agent__spool_reload_exits(struct agent *a)
{
    DIR *d = opendir(a->spool_dir);
    if (!d)
        return;
    struct dirent *de;
    while ((de = readdir(d)) != NULL) {
        size_t len = strlen(de->d_name);
        if (de->d_name[0] == '.' || len <= 5 || strcmp(de->d_name + len - 5, ".exit") != 0)
            continue;
        size_t plen = strlen(a->spool_dir) + len + 2;
        char *path = malloc(plen);
        if (!path)
            break;
        snprintf(path, plen, "%s/%s", a->spool_dir, de->d_name);
        reload_exit(a, path);
    }
    closedir(d);
}

/* Streaming workers' log files to the server (docs/agent-protocol.md, `log`).
 *
 * Workers write their stdout straight into <data>/logs/<job>/<attempt>/rank-<r>.log and their
 * stderr into rank-<r>.err.log beside it (supervise.c) and are never slowed by the agent. A tail
 * per file reads what is new, cuts it into lines (agent_log_cut) and queues `log` events marked
 * with the file's stream, at most AGENT_TAIL_WINDOW of them unacked per file; the two files of a
 * rank have offsets of their own, and their lines are ordered across them by the time they are
 * read (a line written to stdout and one written to stderr within one read may swap; an
 * interleaving finer than that cannot be kept without slowing the worker down through pipes).
 * The file is the spool: what is not acked is read again. Beside it, rank-<r>[.err].cursor is a
 * journal of the chunks sent ("c START END DROPPED") and of the acked end ("a END"), so that an
 * agent restarted after SIGKILL resends the very same chunks (same offsets: the server ignores
 * those it has) and continues after them. Its writes are not fsync'ed: they survive the agent,
 * not the machine.
 *
 * Reading happens when inotify says a file was written (the inotify descriptor is adopted into
 * the lws loop), when an ack frees the window, when a worker exits (its last partial line goes
 * out before its worker_exited), and on the poll timer (main.c, every 50 ms: partial lines
 * waiting for --log-flush-ms, and everything should inotify be unavailable). */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <libwebsockets.h>
#include <sys/inotify.h>
#include <sys/stat.h>
#include <unistd.h>

#define AGENT_TAIL_CHUNK (256 * 1024) /* most bytes read for one `log` message */
#define AGENT_TAIL_WINDOW 8           /* most unacked `log` messages per file */
#define AGENT_TAIL_JOURNAL_MAX 65536  /* the journal is rewritten once past this size */

struct tail_chunk {
    struct tail_chunk *next;
    int64_t seq, offset, end;
    bool acked;
};

struct agent_tail {
    struct agent_tail *next;
    char *job_id;
    int64_t attempt, rank;
    enum aproto_log_stream stream;
    char *path, *cursor_path;
    int fd, cursor_fd;
    int wd;                  /* inotify watch of the log file, or -1 */
    int inotify_fd;          /* the agent's inotify descriptor (-1: none), for removing wd */
    int64_t acked;           /* every byte before it is stored on the server (or was dropped) */
    int64_t pos;             /* the next byte to read */
    int64_t dropped;         /* bytes skipped before `pos`, to announce with the next chunk */
    int64_t partial_since;   /* monotonic ms since a partial last line waits; 0: none */
    struct tail_chunk *sent; /* unacked chunks in offset order */
    size_t n_sent;
    bool done; /* the worker exited: a partial last line is sent as it is */
    struct agent *a;
    bool told_full; /* a journal write failed with ENOSPC and the server was told */
};

/* ------------------------------------------------------------------------------------------ */
/* The journal                                                                                  */
/* ------------------------------------------------------------------------------------------ */

static void journal_write(struct agent_tail *t, const char *line, size_t n)
{
    if (t->cursor_fd < 0)
        return;
    if (write(t->cursor_fd, line, n) == (ssize_t)n)
        return;
    int e = errno;
    TY_WARN("logs", "cannot write %s: %s", t->cursor_path, strerror(e));
    if (e == ENOSPC && !t->told_full) {
        t->told_full = true;
        agent__disk_full(t->a, t->job_id, t->attempt, t->cursor_path, "log journal");
    }
}

static void journal_chunk(struct agent_tail *t, int64_t offset, int64_t end, int64_t dropped)
{
    char line[96];
    int n = snprintf(line, sizeof(line), "c %lld %lld %lld\n", (long long)offset, (long long)end,
                     (long long)dropped);
    journal_write(t, line, (size_t)n);
}

/* Records the acked end; rewrites the journal when nothing is in flight and it has grown. */
static void journal_acked(struct agent_tail *t)
{
    char line[48];
    int n = snprintf(line, sizeof(line), "a %lld\n", (long long)t->acked);
    if (t->cursor_fd >= 0 && t->sent == NULL &&
        lseek(t->cursor_fd, 0, SEEK_END) > AGENT_TAIL_JOURNAL_MAX &&
        ftruncate(t->cursor_fd, 0) != 0)
        TY_WARN("logs", "cannot truncate %s: %s", t->cursor_path, strerror(errno));
    journal_write(t, line, (size_t)n);
}

/* ------------------------------------------------------------------------------------------ */
/* Tails                                                                                        */
/* ------------------------------------------------------------------------------------------ */

static void tail_free(struct agent_tail *t)
{
    while (t->sent) {
        struct tail_chunk *c = t->sent;
        t->sent = c->next;
        free(c);
    }
    if (t->fd >= 0)
        close(t->fd);
    if (t->wd >= 0 && t->inotify_fd >= 0)
        inotify_rm_watch(t->inotify_fd, t->wd);
    if (t->cursor_fd >= 0)
        close(t->cursor_fd);
    free(t->job_id);
    free(t->path);
    free(t->cursor_path);
    free(t);
}

static struct agent_tail *tail_find(struct agent *a, const char *job_id, int64_t attempt,
                                    int64_t rank, enum aproto_log_stream stream)
{
    for (struct agent_tail *t = a->tails; t; t = t->next)
        if (t->attempt == attempt && t->rank == rank && t->stream == stream &&
            strcmp(t->job_id, job_id) == 0)
            return t;
    return NULL;
}

/* A new tail of the rank's log file of `stream` (opened for reading now), or NULL (logged). */
static struct agent_tail *tail_new(struct agent *a, const char *job_id, int64_t attempt,
                                   int64_t rank, enum aproto_log_stream stream)
{
    struct agent_tail *t = calloc(1, sizeof(*t));
    if (!t)
        return NULL;
    t->fd = t->cursor_fd = t->wd = -1;
    t->inotify_fd = a->inotify_fd;
    t->attempt = attempt;
    t->rank = rank;
    t->stream = stream;
    t->a = a;
    t->job_id = strdup(job_id);
    t->path = agent__log_path(a, job_id, attempt, rank, stream, false);
    size_t n = t->path ? strlen(t->path) : 0;
    t->cursor_path = t->path ? malloc(n + 8) : NULL;
    if (!t->job_id || !t->cursor_path) {
        tail_free(t);
        return NULL;
    }
    memcpy(t->cursor_path, t->path, n - 4); /* ".log" -> ".cursor" */
    memcpy(t->cursor_path + n - 4, ".cursor", 8);
    t->fd = open(t->path, O_RDONLY | O_CLOEXEC);
    t->cursor_fd = open(t->cursor_path, O_RDWR | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
    if (t->fd < 0 || t->cursor_fd < 0) {
        TY_WARN("logs", "cannot tail %s: %s", t->path, strerror(errno));
        tail_free(t);
        return NULL;
    }
    t->next = a->tails;
    a->tails = t;
    return t;
}

/* Queues chunk [offset, end) of t, cut into `lines` (taken over), as a `log` event. 0 or -1. */
static int send_chunk(struct agent *a, struct agent_tail *t, json_t *lines, int64_t offset,
                      int64_t end, int64_t dropped)
{
    struct tail_chunk *c = calloc(1, sizeof(*c));
    if (!c) {
        json_decref(lines);
        return -1;
    }
    struct aproto_log_chunk lc = {t->job_id, t->attempt,   t->rank, t->stream,
                                  offset,    end - offset, dropped, lines};
    c->seq = agent__next_seq(a);
    c->offset = offset;
    c->end = end;
    char *text = aproto_msg_log(c->seq, &lc);
    json_decref(lines);
    struct tail_chunk **pp = &t->sent;
    while (*pp)
        pp = &(*pp)->next;
    *pp = c;
    t->n_sent++;
    agent__event_push(a, AGENT_EV_LOG, text, c->seq, NULL);
    return 0;
}

/* Skips the backlog of t down to half of --log-backlog-max-bytes when it is over it: `pos`
 * moves to the first line start after size - max/2. */
static void skip_backlog(struct agent *a, struct agent_tail *t, int64_t size)
{
    int64_t max = a->cfg->log_backlog_max;
    if (size - t->acked <= max || size - t->pos <= max / 2)
        return;
    int64_t target = size - max / 2;
    char buf[4096];
    ssize_t n = pread(t->fd, buf, sizeof(buf), target);
    char *nl = n > 0 ? memchr(buf, '\n', (size_t)n) : NULL;
    int64_t to = nl ? target + (nl - buf) + 1 : target;
    TY_WARN("logs", "job %s attempt %lld rank %lld: %lld unacked log bytes; skipping %lld",
            t->job_id, (long long)t->attempt, (long long)t->rank, (long long)(size - t->acked),
            (long long)(to - t->pos));
    t->dropped += to - t->pos;
    t->pos = to;
    t->partial_since = 0;
}

/* Watches t's file with inotify while nothing of it is in flight, so that the first write after
 * a quiet spell is read at once; while chunks are in flight, acks drive the reading and a watch
 * would only wake the loop on every write of the worker (measured: a quarter of the throughput).
 * Returns true when a watch was just added (the caller reads again: a write may have come in
 * between). */
static bool tail_watch(struct agent *a, struct agent_tail *t)
{
    if (a->inotify_fd < 0 || t->done)
        return false;
    if (t->n_sent > 0 && t->wd >= 0) {
        inotify_rm_watch(a->inotify_fd, t->wd);
        t->wd = -1;
    } else if (t->n_sent == 0 && t->wd < 0) {
        t->wd = inotify_add_watch(a->inotify_fd, t->path, IN_MODIFY);
        return t->wd >= 0;
    }
    return false;
}

static void tail_read(struct agent *a, struct agent_tail *t);

/* Reads what is new in t's file and queues it, within the window. */
static void tail_pump(struct agent *a, struct agent_tail *t)
{
    do
        tail_read(a, t);
    while (tail_watch(a, t));
}

static void tail_read(struct agent *a, struct agent_tail *t)
{
    struct stat st;
    if (fstat(t->fd, &st) != 0)
        return;
    int64_t size = st.st_size;
    skip_backlog(a, t, size);
    char *buf = NULL;
    while (t->n_sent < AGENT_TAIL_WINDOW && t->pos < size) {
        if (!buf && !(buf = malloc(AGENT_TAIL_CHUNK)))
            break;
        size_t want =
            (size_t)(size - t->pos) < AGENT_TAIL_CHUNK ? (size_t)(size - t->pos) : AGENT_TAIL_CHUNK;
        ssize_t n = pread(t->fd, buf, want, t->pos);
        if (n <= 0)
            break;
        json_t *lines = json_array();
        if (!lines)
            break;
        size_t line_max = (size_t)a->cfg->log_line_max;
        size_t cut = agent_log_cut(buf, (size_t)n, line_max, false, lines);
        if (cut == 0) { /* only a partial line: wait for its end, the flush delay, or the exit */
            int64_t now = util_mono_ms();
            if (!t->partial_since)
                t->partial_since = now;
            if (!t->done && now - t->partial_since < a->cfg->log_flush_ms) {
                json_decref(lines);
                break;
            }
            cut = agent_log_cut(buf, (size_t)n, line_max, true, lines);
        }
        t->partial_since = 0;
        int64_t offset = t->pos, end = t->pos + (int64_t)cut;
        if (cut == 0) {
            json_decref(lines);
            break;
        }
        journal_chunk(t, offset, end, t->dropped);
        if (send_chunk(a, t, lines, offset, end, t->dropped) != 0) {
            TY_ERROR("logs", "out of memory sending %s", t->path);
            break;
        }
        t->dropped = 0;
        t->pos = end;
    }
    free(buf);
}

/* Frees tails whose worker is gone and whose every byte is acked. */
static void tails_reap(struct agent *a)
{
    for (struct agent_tail **pp = &a->tails; *pp;) {
        struct agent_tail *t = *pp;
        struct stat st;
        if (t->done && t->sent == NULL && fstat(t->fd, &st) == 0 && t->pos >= st.st_size) {
            *pp = t->next;
            tail_free(t);
        } else {
            pp = &t->next;
        }
    }
}

void agent__tail_start(struct agent *a, const char *job_id, int64_t attempt, int64_t rank)
{
    for (int s = 0; s < APROTO_LOG_NSTREAMS; s++)
        if (!tail_find(a, job_id, attempt, rank, (enum aproto_log_stream)s))
            tail_new(a, job_id, attempt, rank, (enum aproto_log_stream)s);
}

void agent__tail_finish(struct agent *a, const char *job_id, int64_t attempt, int64_t rank)
{
    for (int s = 0; s < APROTO_LOG_NSTREAMS; s++) {
        struct agent_tail *t = tail_find(a, job_id, attempt, rank, (enum aproto_log_stream)s);
        if (!t)
            continue;
        t->done = true;
        tail_pump(a, t);
    }
}

void agent__tails_poll(struct agent *a)
{
    for (struct agent_tail *t = a->tails; t; t = t->next)
        tail_pump(a, t);
    tails_reap(a);
}

void agent__tail_acked(struct agent *a, int64_t seq)
{
    for (struct agent_tail *t = a->tails; t; t = t->next) {
        struct tail_chunk *c = t->sent;
        while (c && c->seq != seq)
            c = c->next;
        if (!c)
            continue;
        c->acked = true;
        bool moved = false;
        while (t->sent && t->sent->acked) {
            struct tail_chunk *h = t->sent;
            t->sent = h->next;
            t->n_sent--;
            t->acked = h->end;
            free(h);
            moved = true;
        }
        if (moved)
            journal_acked(t);
        tail_pump(a, t);
        return;
    }
}

/* ------------------------------------------------------------------------------------------ */
/* Start-up: tails of files not fully acked by the previous agent                               */
/* ------------------------------------------------------------------------------------------ */

/* Replays a journal: acked end, then the chunks after it are queued again exactly as they were,
 * and reading goes on after the last. */
static void tail_resume(struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                        enum aproto_log_stream stream)
{
    struct agent_tail *t = tail_new(a, job_id, attempt, rank, stream);
    if (!t)
        return;
    /* A re-adopted worker still writes to it (its exit finishes the tail); else it has ended. */
    struct agent_worker *w = agent__worker_find(a, job_id, attempt, rank);
    t->done = !(w && w->status == AGENT_WORKER_RUNNING);
    char *text = util_read_file(t->cursor_path, NULL);
    struct agent_log_journal *j = malloc(sizeof(*j));
    if (!j) {
        free(text);
        return;
    }
    agent_log_journal_parse(text, j);
    free(text);
    t->acked = t->pos = j->acked;
    char *buf = malloc(AGENT_TAIL_CHUNK);
    for (size_t i = 0; buf && i < j->n; i++) {
        int64_t start = j->start[i], end = j->end[i];
        if (end - start > AGENT_TAIL_CHUNK ||
            pread(t->fd, buf, (size_t)(end - start), start) != end - start)
            break;
        size_t len = (size_t)(end - start);
        json_t *lines = json_array();
        if (!lines || agent_log_cut(buf, len, (size_t)a->cfg->log_line_max, true, lines) != len) {
            json_decref(lines);
            break;
        }
        if (send_chunk(a, t, lines, start, end, j->dropped[i]) != 0)
            break;
        t->pos = end;
    }
    free(buf);
    free(j);
    TY_INFO("logs", "resuming %s from byte %lld (%zu chunk(s) resent)", t->path,
            (long long)t->acked, t->n_sent);
}

/* Parses "<digits>" into *out. 0 or -1. */
static int dir_number(const char *s, int64_t *out)
{
    return util_parse_int64(s, 0, INT32_MAX, out);
}

void agent__tails_reload(struct agent *a)
{
    char root[4096];
    snprintf(root, sizeof(root), "%s/logs", a->data_dir);
    DIR *jobs = opendir(root);
    if (!jobs)
        return;
    struct dirent *je;
    while ((je = readdir(jobs)) != NULL) {
        if (aproto_job_id_valid(je->d_name) != 0 || je->d_name[0] == '.')
            continue;
        char jdir[4096 + 256];
        snprintf(jdir, sizeof(jdir), "%s/%s", root, je->d_name);
        DIR *atts = opendir(jdir);
        struct dirent *ae;
        while (atts && (ae = readdir(atts)) != NULL) {
            int64_t attempt;
            if (dir_number(ae->d_name, &attempt) != 0)
                continue;
            char adir[4096 + 512];
            snprintf(adir, sizeof(adir), "%s/%s", jdir, ae->d_name);
            DIR *files = opendir(adir);
            struct dirent *fe;
            while (files && (fe = readdir(files)) != NULL) {
                char num[32];
                int64_t rank;
                size_t len = strlen(fe->d_name);
                if (len < 13 || len > 30 || strncmp(fe->d_name, "rank-", 5) != 0 ||
                    strcmp(fe->d_name + len - 7, ".cursor") != 0)
                    continue;
                size_t digits = len - 12; /* "rank-" N ".cursor", or N ".err" before it */
                enum aproto_log_stream stream = APROTO_LOG_STDOUT;
                if (digits > 4 && memcmp(fe->d_name + 5 + digits - 4, ".err", 4) == 0) {
                    digits -= 4;
                    stream = APROTO_LOG_STDERR;
                }
                memcpy(num, fe->d_name + 5, digits);
                num[digits] = '\0';
                if (dir_number(num, &rank) == 0 && !tail_find(a, je->d_name, attempt, rank, stream))
                    tail_resume(a, je->d_name, attempt, rank, stream);
            }
            if (files)
                closedir(files);
        }
        if (atts)
            closedir(atts);
    }
    closedir(jobs);
    tails_reap(a);
}

void agent__tails_free_all(struct agent *a)
{
    while (a->tails) {
        struct agent_tail *t = a->tails;
        a->tails = t->next;
        t->inotify_fd = -1; /* closed with the lws context, and its watches with it */
        tail_free(t);
    }
}

/* ------------------------------------------------------------------------------------------ */
/* inotify                                                                                      */
/* ------------------------------------------------------------------------------------------ */

int agent__tails_callback(struct lws *wsi, enum lws_callback_reasons reason, void *user, void *in,
                          size_t len)
{
    (void)user;
    (void)in;
    (void)len;
    if (reason != LWS_CALLBACK_RAW_RX_FILE)
        return 0;
    struct agent *a = lws_context_user(lws_get_context(wsi));
    char buf[4096] __attribute__((aligned(__alignof__(struct inotify_event))));
    ssize_t n;
    while ((n = read(a->inotify_fd, buf, sizeof(buf))) > 0) {
        for (char *p = buf; p < buf + n;) {
            const struct inotify_event *ev = (const struct inotify_event *)p;
            for (struct agent_tail *t = a->tails; t; t = t->next)
                if (t->wd == ev->wd) {
                    tail_pump(a, t);
                    break;
                }
            p += sizeof(*ev) + ev->len;
        }
    }
    return 0;
}

int agent__tails_watch(struct agent *a)
{
    a->inotify_fd = inotify_init1(IN_NONBLOCK | IN_CLOEXEC);
    if (a->inotify_fd < 0) {
        TY_WARN("logs", "inotify: %s; log files are read on the poll timer", strerror(errno));
        return -1;
    }
    lws_adopt_desc_t ad;
    memset(&ad, 0, sizeof(ad));
    ad.vh = lws_get_vhost_by_name(a->ctx, "default");
    ad.type = LWS_ADOPT_RAW_FILE_DESC;
    ad.fd.filefd = a->inotify_fd;
    ad.vh_prot_name = "trainyard-logs";
    if (!ad.vh || !lws_adopt_descriptor_vhost_via_info(&ad)) {
        TY_WARN("logs", "cannot watch log files in the event loop; they are read on the poll "
                        "timer");
        close(a->inotify_fd);
        a->inotify_fd = -1;
        return -1;
    }
    return 0;
}

/*
 * report.c — ty_report(): the client side of the report protocol (docs/report-protocol.md).
 * The connection to the agent is opened at the first report and kept; any failure closes it
 * and the next report reconnects (with a new hello).
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "internal.h"
#include "report_proto.h"
#include "util.h"

#define TY__REPORT_RETRY_MS 200 /* between two tries to reach a restarting agent */

void ty__report_close(ty_ctx *c)
{
    if (c->report_fd >= 0)
        close(c->report_fd);
    c->report_fd = -1;
}

int ty__report_dial(const ty_ctx *c, int timeout_ms, int *out)
{
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(c->report_socket) >= sizeof sa.sun_path)
        return TY_EINVAL;
    memcpy(sa.sun_path, c->report_socket, strlen(c->report_socket) + 1);
    int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0)
        return TY_EIO;
    if (connect(fd, (struct sockaddr *)&sa, sizeof sa) < 0) {
        int e = errno;
        close(fd);
        return (e == ENOENT || e == ECONNREFUSED) ? TY_EPEER : TY_EIO;
    }
    json_t *hello =
        rproto_hello_new(c->job_id, c->attempt, c->rank, (long)getpid(), c->report_secret);
    if (!hello) {
        close(fd);
        return TY_ENOMEM;
    }
    int rc = rproto_write(fd, hello, timeout_ms);
    json_decref(hello);
    if (rc < 0) {
        close(fd);
        return rc;
    }
    *out = fd;
    return 0;
}

/* Connect the report connection (c->report_fd). 0 or a ty__report_dial error. */
static int report_connect(ty_ctx *c)
{
    return ty__report_dial(c, (int)c->report_timeout_ms, &c->report_fd);
}

/* Wait for the agent's answer to report seq: 0 on ack, TY_EREJECTED on error, TY_EPEER,
 * TY_ETIMEDOUT, TY_EPROTO. Unrelated frames are skipped. */
static int report_wait_ack(ty_ctx *c, int64_t seq)
{
    int64_t deadline = util_mono_ms() + c->report_timeout_ms;
    for (;;) {
        int left = ty__ms_left(deadline);
        if (left == 0)
            return TY_ETIMEDOUT;
        json_t *msg = NULL;
        char err[256] = "";
        int rc = rproto_read(c->report_fd, &msg, left, err, sizeof err);
        if (rc < 0) {
            if (err[0])
                fprintf(stderr, "trainyard: report: %s\n", err);
            return rc;
        }
        int64_t got = 0;
        const char *text = NULL;
        switch (rproto_type_of(msg)) {
        case RPROTO_ACK:
            rc = rproto_parse_ack(msg, &got, NULL, 0);
            if (rc == 0 && got == seq) {
                json_decref(msg);
                return 0;
            }
            break;
        case RPROTO_ERROR:
            if (rproto_parse_error(msg, &got, &text, NULL, 0) == 0 && (got == seq || got == 0)) {
                fprintf(stderr, "trainyard: report %lld rejected by the agent: %s\n",
                        (long long)seq, text);
                json_decref(msg);
                return TY_EREJECTED;
            }
            break;
        default:
            break;
        }
        json_decref(msg);
    }
}

/* Validate the checkpoint directory and return its absolute path (malloc'd) in *abs. */
static int report_checkpoint_path(const char *dir, char **abs)
{
    *abs = NULL;
    if (!dir)
        return 0;
    struct stat st;
    if (stat(dir, &st) < 0 || !S_ISDIR(st.st_mode)) {
        fprintf(stderr, "trainyard: report: checkpoint '%s' is not a directory\n", dir);
        return TY_EINVAL;
    }
    *abs = realpath(dir, NULL);
    return *abs ? 0 : TY_ENOMEM;
}

int ty_report(ty_ctx *c, const json_t *metrics, const char *checkpoint_dir)
{
    if (!c)
        return TY_EINVAL;
    char err[256];
    if (rproto_check_metrics(metrics, err, sizeof err) < 0) {
        fprintf(stderr, "trainyard: report: %s\n", err);
        return TY_EINVAL;
    }
    char *abs;
    int rc = report_checkpoint_path(checkpoint_dir, &abs);
    if (rc < 0)
        return rc;
    json_t *step = json_object_get(metrics, "step");
    int64_t seq = ++c->report_seq;
    ty__progress_note_report(c, seq);
    json_t *msg = rproto_report_new(seq, metrics, step != NULL,
                                    step ? (int64_t)json_integer_value(step) : 0, abs);
    free(abs);
    if (!msg)
        return TY_ENOMEM;

    if (c->standalone || !c->report_socket) {
        /* No agent: one JSON line on stderr is the report. */
        char *line = json_dumps(msg, JSON_COMPACT);
        json_decref(msg);
        if (!line)
            return TY_ENOMEM;
        fprintf(stderr, "%s\n", line);
        free(line);
        return 0;
    }
    /* The agent may be restarting (docs/agent-restart.md): a connection that cannot be made or
     * breaks is retried with the same seq (the agent keeps each report once) until the report
     * timeout. */
    int64_t deadline = util_mono_ms() + c->report_timeout_ms;
    for (;;) {
        rc = c->report_fd >= 0 ? 0 : report_connect(c);
        if (rc == 0)
            rc = rproto_write(c->report_fd, msg, (int)c->report_timeout_ms);
        if (rc == 0)
            rc = report_wait_ack(c, seq);
        if (rc < 0 && rc != TY_EREJECTED)
            ty__report_close(c);
        if ((rc != TY_EPEER && rc != TY_EIO) || util_mono_ms() + TY__REPORT_RETRY_MS >= deadline)
            break;
        struct timespec pause = {0, TY__REPORT_RETRY_MS * 1000000L};
        nanosleep(&pause, NULL);
    }
    json_decref(msg);
    return rc;
}

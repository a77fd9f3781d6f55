/* Agent stub for report-protocol tests; see test_sdk_agent_stub.h. */
#include "test_sdk_agent_stub.h"

#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "report_proto.h"

/* Serve one connection until EOF or stop. Returns 1 if asked to stop. */
static int stub_serve(struct agent_stub *s, int fd)
{
    for (;;) {
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN},
                              {.fd = s->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0)
            return 1;
        if (p[1].revents)
            return 1;
        json_t *m = NULL;
        if (rproto_read(fd, &m, 5000, NULL, 0) < 0)
            return 0;
        switch (rproto_type_of(m)) {
        case RPROTO_HELLO: {
            struct rproto_hello h;
            if (rproto_parse_hello(m, &h, NULL, 0) < 0)
                s->bad_frames++;
            json_array_append(s->hellos, m);
            if (s->mode == STUB_CLOSE_AFTER_HELLO) {
                json_decref(m);
                return 0;
            }
            break;
        }
        case RPROTO_REPORT: {
            struct rproto_report r;
            char err[128];
            if (rproto_parse_report(m, &r, err, sizeof err) < 0) {
                fprintf(stderr, "stub: bad report: %s\n", err);
                s->bad_frames++;
                break;
            }
            json_array_append(s->reports, m);
            json_t *reply = s->mode == STUB_ACK      ? rproto_ack_new(r.seq)
                            : s->mode == STUB_REJECT ? rproto_error_new(r.seq, "no space")
                                                     : NULL;
            if (reply) {
                /* an unrelated ack first: the client must skip it */
                json_t *noise = rproto_ack_new(r.seq + 1000);
                rproto_write(fd, noise, 1000);
                json_decref(noise);
                rproto_write(fd, reply, 1000);
                json_decref(reply);
            }
            break;
        }
        default:
            s->bad_frames++;
        }
        json_decref(m);
    }
}

static void *stub_main(void *arg)
{
    struct agent_stub *s = arg;
    for (;;) {
        struct pollfd p[2] = {{.fd = s->lfd, .events = POLLIN},
                              {.fd = s->stop_pipe[0], .events = POLLIN}};
        if (poll(p, 2, -1) < 0 || p[1].revents)
            return NULL;
        int fd = accept(s->lfd, NULL, NULL);
        if (fd < 0)
            continue;
        int stop = stub_serve(s, fd);
        close(fd);
        if (stop)
            return NULL;
    }
}

int agent_stub_start(struct agent_stub *s, enum stub_mode mode)
{
    memset(s, 0, sizeof *s);
    snprintf(s->dir, sizeof s->dir, "/tmp/ty_stub_XXXXXX");
    if (!mkdtemp(s->dir))
        return -1;
    snprintf(s->path, sizeof s->path, "%s/report.sock", s->dir);
    s->mode = mode;
    s->hellos = json_array();
    s->reports = json_array();
    struct sockaddr_un sa = {.sun_family = AF_UNIX};
    if (strlen(s->path) >= sizeof sa.sun_path)
        return -1;
    memcpy(sa.sun_path, s->path, strlen(s->path) + 1);
    s->lfd = socket(AF_UNIX, SOCK_STREAM, 0);
    if (s->lfd < 0 || bind(s->lfd, (struct sockaddr *)&sa, sizeof sa) < 0 ||
        listen(s->lfd, 8) < 0 || pipe(s->stop_pipe) < 0)
        return -1;
    return pthread_create(&s->thread, NULL, stub_main, s) == 0 ? 0 : -1;
}

void agent_stub_stop(struct agent_stub *s)
{
    if (write(s->stop_pipe[1], "x", 1) != 1)
        return;
    pthread_join(s->thread, NULL);
    close(s->lfd);
    close(s->stop_pipe[0]);
    close(s->stop_pipe[1]);
    unlink(s->path);
    rmdir(s->dir);
}

void agent_stub_free(struct agent_stub *s)
{
    json_decref(s->hellos);
    json_decref(s->reports);
    s->hellos = s->reports = NULL;
}

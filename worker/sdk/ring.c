/*
 * ring.c — the pipelined ring engine shared by allreduce, broadcast and allgather.
 *
 * A collective is a list of steps; in each step a rank sends a byte range to its successor and
 * receives a byte range from its predecessor. Steps stream back to back on the two links, and a
 * step may forward data as soon as the step it depends on has received (and reduced) it, so a
 * segment flows around the ring in ring_chunk pieces instead of store-and-forward.
 * One thread, nonblocking sockets: send and receive are attempted alternately and poll() waits
 * only when both would block. The inactivity timeout restarts whenever a byte moves.
 */
#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <sys/socket.h>

#include "internal.h"
#include "util.h"

/* Map errno of a failed send/recv on a ring link to a TY code. */
static int ring_errno(int e)
{
    if (e == EPIPE || e == ECONNRESET || e == ENOTCONN || e == ECONNABORTED)
        return TY_EPEER;
    if (e == ETIMEDOUT)
        return TY_ETIMEDOUT;
    return TY_EIO;
}

/* State of the receive side within the current step. */
struct ring_rx {
    int step;      /* current receive step */
    size_t got;    /* bytes received in this step */
    size_t staged; /* bytes waiting in c->staging (reducing steps) */
};

/* Receive once into the current step; reduce full chunks. Returns 1 if bytes moved, 0 if the
 * socket would block, or a negative code. */
static int ring_recv_some(ty_ctx *c, const struct ty__ring_step *st, struct ring_rx *rx,
                          size_t *done, size_t esz, ty_dtype dt, ty_op op)
{
    char *dst;
    size_t room;
    if (st->reduce) {
        dst = c->staging + rx->staged;
        room = c->ring_chunk - rx->staged;
        if (room > st->recv_len - rx->got)
            room = st->recv_len - rx->got;
    } else {
        dst = st->recv + rx->got;
        room = st->recv_len - rx->got;
    }
    ssize_t r = recv(c->recv_fd, dst, room, MSG_DONTWAIT);
    if (r == 0)
        return TY_EPEER;
    if (r < 0)
        return (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) ? 0 : ring_errno(errno);
    rx->got += (size_t)r;
    if (!st->reduce) {
        done[rx->step] = rx->got;
        return 1;
    }
    rx->staged += (size_t)r;
    if (rx->staged == c->ring_chunk || rx->got == st->recv_len) {
        /* staged is a whole number of elements here: chunks and segments are. */
        size_t n = rx->staged / esz;
        char *out = st->recv + done[rx->step];
        ty__reduce(out, c->staging, n, dt, op);
        if (st->avg_div)
            ty__scale_div(out, n, dt, st->avg_div);
        done[rx->step] += rx->staged;
        rx->staged = 0;
    }
    return 1;
}

int ty__ring_run(ty_ctx *c, const struct ty__ring_step *steps, int nsteps, ty_dtype dt, ty_op op)
{
    size_t *done = calloc((size_t)nsteps + 1, sizeof *done);
    if (!done)
        return TY_ENOMEM;
    size_t esz = ty_dtype_size(dt);
    if (esz == 0)
        esz = 1;
    int ss = 0; /* send step */
    size_t soff = 0;
    struct ring_rx rx = {0};
    int64_t deadline = util_mono_ms() + c->coll_timeout_ms;
    int rc = 0;
    for (;;) {
        while (ss < nsteps && soff == steps[ss].send_len) {
            ss++;
            soff = 0;
        }
        while (rx.step < nsteps && done[rx.step] == steps[rx.step].recv_len) {
            rx.step++;
            rx.got = rx.staged = 0;
        }
        if (ss >= nsteps && rx.step >= nsteps)
            break;

        bool moved = false, want_send = false, want_recv = rx.step < nsteps;
        if (ss < nsteps) {
            const struct ty__ring_step *st = &steps[ss];
            size_t allow = st->send_dep < 0 ? st->send_len : done[st->send_dep];
            if (allow > soff) {
                want_send = true;
                /* At most one chunk per call, so sending never starves receiving: a rank that
                 * stops reading closes its predecessor's TCP window and the ring stalls. */
                size_t len = allow - soff;
                if (len > c->ring_chunk)
                    len = c->ring_chunk;
                ssize_t w = send(c->send_fd, st->send + soff, len, MSG_NOSIGNAL | MSG_DONTWAIT);
                if (w > 0) {
                    soff += (size_t)w;
                    moved = true;
                } else if (w < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) {
                    rc = ring_errno(errno);
                    break;
                }
            }
        }
        if (want_recv) {
            int r = ring_recv_some(c, &steps[rx.step], &rx, done, esz, dt, op);
            if (r < 0) {
                rc = r;
                break;
            }
            moved = moved || r > 0;
        }
        if (moved) {
            deadline = util_mono_ms() + c->coll_timeout_ms;
            continue;
        }
        struct pollfd p[2];
        nfds_t n = 0;
        if (want_send)
            p[n++] = (struct pollfd){.fd = c->send_fd, .events = POLLOUT};
        if (want_recv)
            p[n++] = (struct pollfd){.fd = c->recv_fd, .events = POLLIN};
        if (n == 0) { /* cannot happen with a well-formed schedule */
            rc = TY_EPROTO;
            break;
        }
        int left = ty__ms_left(deadline);
        if (left == 0) {
            rc = TY_ETIMEDOUT;
            break;
        }
        int pr = poll(p, n, left);
        if (pr < 0 && errno != EINTR) {
            rc = TY_EIO;
            break;
        }
        /* Errors and hang-ups surface from the next send()/recv(). */
    }
    free(done);
    return rc;
}

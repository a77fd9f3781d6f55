/*
 * collectives.c — public collectives: argument checks, world-size-1 shortcuts, backend choice
 * (NCCL for device buffers, shared memory for allreduce when every rank is on this host, else
 * the native TCP ring), lazy rendezvous, sticky failure, and the ring schedules of allreduce /
 * broadcast / allgather.
 */
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "internal.h"

int ty__coll_fail(ty_ctx *c, int err)
{
    if (c->coll_err == 0)
        c->coll_err = err;
    ty__shm_abort(c);
    /* Closing both links makes the neighbours fail at once, and they close theirs in turn, so
     * the error travels around the ring in both directions instead of waiting for a timeout. */
    if (c->send_fd >= 0)
        close(c->send_fd);
    if (c->recv_fd >= 0)
        close(c->recv_fd);
    c->send_fd = c->recv_fd = -1;
    c->coll_ready = false;
    return c->coll_err;
}

int ty__coll_ready(ty_ctx *c)
{
    if (c->coll_err)
        return c->coll_err;
    if (c->coll_ready)
        return 0;
    if (c->backend == TY__BACKEND_NONE)
        return TY_ENOTSUP;
    if (!c->staging) {
        c->staging = malloc(c->ring_chunk);
        if (!c->staging)
            return TY_ENOMEM;
    }
    int rc = ty__rendezvous(c);
    if (rc == 0 && !c->tcp_only && c->local_world == c->world)
        rc = ty__shm_setup(c);
    if (rc < 0)
        return ty__coll_fail(c, rc);
    c->coll_ready = true;
    return 0;
}

int ty_connect(ty_ctx *c)
{
    if (!c)
        return TY_EINVAL;
    if (c->world == 1)
        return 0;
    return ty__coll_ready(c);
}

/* Byte range of segment k of an allreduce over count elements of esz bytes. */
static void coll_segment(char *buf, size_t count, size_t esz, int k, int p, char **ptr, size_t *len)
{
    size_t b, e;
    ty_shard_range(count, k, p, &b, &e);
    *ptr = buf + b * esz;
    *len = (e - b) * esz;
}

int ty__ring_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op)
{
    int p = c->world, r = c->rank, n = 2 * (p - 1);
    size_t esz = ty_dtype_size(dt);
    struct ty__ring_step *st = calloc((size_t)n, sizeof *st);
    if (!st)
        return TY_ENOMEM;
    for (int t = 0; t < p - 1; t++) { /* reduce-scatter */
        char *sp, *rp;
        size_t sl, rl;
        coll_segment(buf, count, esz, ((r - t) % p + p) % p, p, &sp, &sl);
        coll_segment(buf, count, esz, ((r - t - 1) % p + p) % p, p, &rp, &rl);
        st[t] = (struct ty__ring_step){.send = sp,
                                       .send_len = sl,
                                       .send_dep = t - 1,
                                       .recv = rp,
                                       .recv_len = rl,
                                       .reduce = true,
                                       .avg_div = (op == TY_AVG && t == p - 2) ? p : 0};
    }
    for (int t = 0; t < p - 1; t++) { /* all-gather */
        char *sp, *rp;
        size_t sl, rl;
        coll_segment(buf, count, esz, ((r + 1 - t) % p + p) % p, p, &sp, &sl);
        coll_segment(buf, count, esz, ((r - t) % p + p) % p, p, &rp, &rl);
        st[p - 1 + t] = (struct ty__ring_step){.send = sp,
                                               .send_len = sl,
                                               .send_dep = p - 2 + t,
                                               .recv = rp,
                                               .recv_len = rl,
                                               .reduce = false};
    }
    int rc = ty__ring_run(c, st, n, dt, op);
    free(st);
    return rc;
}

int ty__ring_broadcast(ty_ctx *c, void *buf, size_t bytes, int root)
{
    int d = (c->rank - root + c->world) % c->world; /* distance from the root along the ring */
    struct ty__ring_step st = {.send_dep = -1};
    if (d != c->world - 1) {
        st.send = buf;
        st.send_len = bytes;
    }
    if (d != 0) {
        st.recv = buf;
        st.recv_len = bytes;
        st.send_dep = 0; /* forward what has arrived */
    }
    return ty__ring_run(c, &st, 1, TY_INT32, TY_SUM);
}

int ty__ring_allgather(ty_ctx *c, const void *send, void *recv, size_t bytes_per_rank)
{
    int p = c->world, r = c->rank;
    char *base = recv;
    struct ty__ring_step *st = calloc((size_t)p, sizeof *st);
    if (!st)
        return TY_ENOMEM;
    for (int t = 0; t < p - 1; t++) {
        st[t] = (struct ty__ring_step){
            .send = base + (size_t)(((r - t) % p + p) % p) * bytes_per_rank,
            .send_len = bytes_per_rank,
            .send_dep = t - 1,
            .recv = base + (size_t)(((r - t - 1) % p + p) % p) * bytes_per_rank,
            .recv_len = bytes_per_rank};
    }
    (void)send;
    int rc = ty__ring_run(c, st, p - 1, TY_INT32, TY_SUM);
    free(st);
    return rc;
}

/* Common entry checks: 0 to go on with the ring, 1 when the call is complete (no-op), or an
 * error. */
static int coll_enter(ty_ctx *c)
{
    if (c->coll_err)
        return c->coll_err;
    if (c->world == 1)
        return 1;
    return ty__coll_ready(c);
}

/* Run a ring collective's result through the sticky-failure rule. */
static int coll_leave(ty_ctx *c, int rc)
{
    return rc < 0 ? ty__coll_fail(c, rc) : 0;
}

/* ty_allreduce once its arguments are checked. */
static int coll_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op)
{
    if (!c->coll_err && count && ty__nccl_is_device_ptr(c, buf))
        return coll_leave(c, ty__nccl_allreduce(c, buf, count, dt, op));
    int rc = coll_enter(c);
    if (rc != 0 || count == 0)
        return rc < 0 ? rc : 0;
    if (c->shm)
        return coll_leave(c, ty__shm_allreduce(c, buf, count, dt, op));
    return coll_leave(c, ty__ring_allreduce(c, buf, count, dt, op));
}

int ty_allreduce(ty_ctx *c, void *buf, size_t count, ty_dtype dt, ty_op op)
{
    if (!c || ty_dtype_size(dt) == 0 || (unsigned)op > TY_AVG || (count && !buf))
        return TY_EINVAL;
    if (count > SIZE_MAX / 8)
        return TY_ERANGE;
    ty__progress_enter(c, TY__OP_ALLREDUCE);
    int rc = coll_allreduce(c, buf, count, dt, op);
    ty__progress_leave(c);
    return rc;
}

/* ty_broadcast once its arguments are checked. */
static int coll_broadcast(ty_ctx *c, void *buf, size_t bytes, int root)
{
    if (!c->coll_err && bytes && ty__nccl_is_device_ptr(c, buf))
        return coll_leave(c, ty__nccl_broadcast(c, buf, bytes, root));
    int rc = coll_enter(c);
    if (rc != 0 || bytes == 0)
        return rc < 0 ? rc : 0;
    return coll_leave(c, ty__ring_broadcast(c, buf, bytes, root));
}

int ty_broadcast(ty_ctx *c, void *buf, size_t bytes, int root)
{
    if (!c || root < 0 || root >= c->world || (bytes && !buf))
        return TY_EINVAL;
    ty__progress_enter(c, TY__OP_BROADCAST);
    int rc = coll_broadcast(c, buf, bytes, root);
    ty__progress_leave(c);
    return rc;
}

int ty_barrier(ty_ctx *c)
{
    if (!c)
        return TY_EINVAL;
    int32_t one = 1;
    int rc = ty_allreduce(c, &one, 1, TY_INT32, TY_SUM);
    if (rc == 0 && one != c->world)
        return coll_leave(c, TY_EPROTO);
    return rc;
}

/* ty_allgather once its arguments are checked. */
static int coll_allgather(ty_ctx *c, const void *send, void *recv, size_t bytes_per_rank)
{
    if (!c->coll_err && bytes_per_rank && ty__nccl_is_device_ptr(c, recv))
        return coll_leave(c, ty__nccl_allgather(c, send, recv, bytes_per_rank));
    if (c->coll_err)
        return c->coll_err;
    char *slot = (char *)recv + (size_t)c->rank * bytes_per_rank;
    if (bytes_per_rank && slot != send)
        memmove(slot, send, bytes_per_rank);
    int rc = coll_enter(c);
    if (rc != 0 || bytes_per_rank == 0)
        return rc < 0 ? rc : 0;
    return coll_leave(c, ty__ring_allgather(c, send, recv, bytes_per_rank));
}

int ty_allgather(ty_ctx *c, const void *send, void *recv, size_t bytes_per_rank)
{
    if (!c || (bytes_per_rank && (!send || !recv)))
        return TY_EINVAL;
    if (bytes_per_rank > SIZE_MAX / (size_t)c->world)
        return TY_ERANGE;
    ty__progress_enter(c, TY__OP_ALLGATHER);
    int rc = coll_allgather(c, send, recv, bytes_per_rank);
    ty__progress_leave(c);
    return rc;
}

const char *ty_transport(const ty_ctx *c)
{
    if (!c)
        return "none";
    if (c->world == 1)
        return "self";
    if (!c->coll_ready)
        return "none";
    return c->shm ? "shm" : "tcp";
}

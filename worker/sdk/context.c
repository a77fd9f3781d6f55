/*
 * context.c — the ty_ctx lifecycle and its accessors; sharding.
 */
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "internal.h"

int ty_init(ty_ctx **out, int *argc, char ***argv)
{
    if (!out)
        return TY_EINVAL;
    *out = NULL;
    ty_ctx *c = calloc(1, sizeof *c);
    if (!c)
        return TY_ENOMEM;
    c->send_fd = -1;
    c->recv_fd = -1;
    c->report_fd = -1;
    char err[512] = "";
    int rc = ty__ctx_from_env(c, argc, argv, err, sizeof err);
    if (rc == 0)
        rc = ty__progress_start(c, err, sizeof err);
    if (rc < 0) {
        if (err[0])
            fprintf(stderr, "trainyard: %s\n", err);
        ty_finish(&c);
        return rc;
    }
    *out = c;
    return 0;
}

int ty_finish(ty_ctx **pc)
{
    if (!pc || !*pc)
        return 0;
    ty_ctx *c = *pc;
    ty__progress_stop(c);
    ty__nccl_free(c);
    ty__shm_free(c);
    if (c->send_fd >= 0)
        close(c->send_fd);
    if (c->recv_fd >= 0)
        close(c->recv_fd);
    ty__report_close(c);
    free(c->staging);
    free(c->job_id);
    free(c->master_addr);
    free(c->checkpoint_dir);
    free(c->checkpoint_request_file);
    free(c->report_socket);
    free(c->report_secret);
    free(c->rendezvous_secret);
    json_decref(c->config);
    free(c);
    *pc = NULL;
    return 0;
}

int ty_world_rank(const ty_ctx *c)
{
    return c ? c->rank : TY_EINVAL;
}

int ty_world_size(const ty_ctx *c)
{
    return c ? c->world : TY_EINVAL;
}

int ty_local_rank(const ty_ctx *c)
{
    return c ? c->local_rank : TY_EINVAL;
}

int ty_local_world_size(const ty_ctx *c)
{
    return c ? c->local_world : TY_EINVAL;
}

int ty_node_rank(const ty_ctx *c)
{
    return c ? c->node_rank : TY_EINVAL;
}

const char *ty_job_id(const ty_ctx *c)
{
    return c ? c->job_id : NULL;
}

int ty_attempt(const ty_ctx *c)
{
    return c ? c->attempt : TY_EINVAL;
}

int ty_is_standalone(const ty_ctx *c)
{
    return c ? c->standalone : TY_EINVAL;
}

const json_t *ty_config(const ty_ctx *c)
{
    return c ? c->config : NULL;
}

const char *ty_checkpoint_dir(const ty_ctx *c)
{
    return c ? c->checkpoint_dir : NULL;
}

int ty_should_checkpoint(const ty_ctx *c)
{
    if (c == NULL)
        return TY_EINVAL;
    return c->checkpoint_request_file && access(c->checkpoint_request_file, F_OK) == 0;
}

/* Convert seconds to a positive millisecond count, or TY_EINVAL. */
static int ctx_seconds_to_ms(double seconds, int64_t *ms)
{
    if (!(seconds > 0) || seconds > 1e6)
        return TY_EINVAL;
    *ms = (int64_t)(seconds * 1000.0);
    if (*ms < 1)
        *ms = 1;
    return 0;
}

int ty_set_collective_timeout(ty_ctx *c, double seconds)
{
    return c ? ctx_seconds_to_ms(seconds, &c->coll_timeout_ms) : TY_EINVAL;
}

int ty_set_report_timeout(ty_ctx *c, double seconds)
{
    return c ? ctx_seconds_to_ms(seconds, &c->report_timeout_ms) : TY_EINVAL;
}

void ty_shard_range(size_t n, int rank, int size, size_t *begin, size_t *end)
{
    if (size < 1 || rank < 0 || rank >= size) {
        *begin = *end = 0;
        return;
    }
    size_t q = n / (size_t)size, r = n % (size_t)size, k = (size_t)rank;
    *begin = k * q + (k < r ? k : r);
    *end = *begin + q + (k < r ? 1 : 0);
}

void ty_shard(const ty_ctx *c, size_t n, size_t *begin, size_t *end)
{
    if (!c) {
        *begin = *end = 0;
        return;
    }
    ty_shard_range(n, c->rank, c->world, begin, end);
}

size_t ty_dtype_size(ty_dtype dt)
{
    switch (dt) {
    case TY_FLOAT32:
    case TY_INT32:
        return 4;
    case TY_FLOAT64:
    case TY_INT64:
        return 8;
    }
    return 0;
}

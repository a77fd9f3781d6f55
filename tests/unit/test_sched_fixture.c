/* Shared fixture for the scheduler's unit tests (declared in test_sched_fixture.h). */
#include "ty_test.h"

#include "test_sched_fixture.h"

sched_snapshot *ts_new(void)
{
    sched_snapshot *s = sched_snapshot_create();
    assert_non_null(s);
    return s;
}

/* An alive, schedulable H100 node with 64 CPUs and 512 GiB. */
sched_node_desc ts_gpu_node(const char *id, int gpus)
{
    return (sched_node_desc){.id = id,
                             .cpu_milli = 64000,
                             .memory_mb = 524288,
                             .gpus = gpus,
                             .gpu_type = gpus ? "H100" : NULL,
                             .alive = true};
}

size_t ts_add_node(sched_snapshot *s, sched_node_desc d)
{
    size_t idx = 0;
    assert_int_equal(sched_add_node(s, &d, &idx), SCHED_OK);
    return idx;
}

/* A fixed-size PACK job, each worker {GPU: gpus_per_worker, CPU: 1}, submitted at t = id. */
sched_job_desc ts_gpu_job(int64_t id, int workers, int gpus_per_worker)
{
    return (sched_job_desc){.id = id,
                            .submit_time = id,
                            .min_workers = workers,
                            .max_workers = workers,
                            .bundle = {.cpu_milli = 1000, .gpus = gpus_per_worker},
                            .strategy = SCHED_PACK};
}

void ts_add_job(sched_snapshot *s, sched_job_desc d)
{
    assert_int_equal(sched_add_pending(s, &d), SCHED_OK);
}

/* A running job holding `gpus` (a mask) and one CPU on `node` until `end`. */
void ts_add_running(sched_snapshot *s, int64_t id, int64_t end, const char *node, uint64_t gpus)
{
    sched_alloc_desc a = {.node_id = node, .cpu_milli = 1000, .gpu_mask = gpus};
    assert_int_equal(sched_add_running(s, id, end, &a, 1), SCHED_OK);
}

sched_result *ts_pass(sched_snapshot *s, int64_t now)
{
    sched_result *r = NULL;
    assert_int_equal(sched_run_pass(s, now, &r), SCHED_OK);
    assert_non_null(r);
    return r;
}

const sched_decision *ts_find(const sched_result *r, int64_t id)
{
    const sched_decision *d = sched_result_find(r, id);
    assert_non_null(d);
    assert_non_null(d->message);
    return d;
}

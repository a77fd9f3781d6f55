/* The scheduler tests' shared fixture (test_sched_fixture.c): builders for nodes, jobs and running
 * jobs that fail the test on any error, so each test reads as the scenario it checks. */
#ifndef TEST_SCHED_FIXTURE_H
#define TEST_SCHED_FIXTURE_H

#include "scheduler/sched.h"

sched_snapshot *ts_new(void);
sched_node_desc ts_gpu_node(const char *id, int gpus);
size_t ts_add_node(sched_snapshot *s, sched_node_desc d);
sched_job_desc ts_gpu_job(int64_t id, int workers, int gpus_per_worker);
void ts_add_job(sched_snapshot *s, sched_job_desc d);
void ts_add_running(sched_snapshot *s, int64_t id, int64_t end, const char *node, uint64_t gpus);
sched_result *ts_pass(sched_snapshot *s, int64_t now);
const sched_decision *ts_find(const sched_result *r, int64_t id);

#endif

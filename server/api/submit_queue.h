/* Submissions committed together: POST /api/v1/jobs hands its job to the queue, and the request
 * threads waiting on it take turns committing everything queued in one statement (a few at a
 * time, each on a pooled connection). Each request still answers after its job's commit. */
#ifndef SRV_SUBMIT_QUEUE_H
#define SRV_SUBMIT_QUEUE_H

#include "store.h"

struct db;
struct submit_queue;

struct submit_queue *submit_queue_create(void);
void submit_queue_destroy(struct submit_queue *q);
/* Submits `job` (store_jobs_insert) with whatever else is queued; blocks until it is committed or
 * has failed. Returns a db_qs: 1 with job->id and job->json set. */
int submit_queue_insert(struct submit_queue *q, struct db *db, struct store_job_new *job);
/* Submissions queued, not yet taken into a batch. */
size_t submit_queue_waiting(struct submit_queue *q);

#endif

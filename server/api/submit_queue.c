/* Submissions committed together (submit_queue.h). A thread that queues a job while fewer than
 * SUBMIT_COMMITTERS batches are being committed commits one itself: it takes up to SUBMIT_BATCH
 * queued jobs, oldest first, its own among them, and commits them in one statement; when it is
 * done it wakes their threads and hands its turn to the thread of the oldest job still queued
 * that has none (a job taken into a batch before its thread used the turn handed to it gives
 * the turn up). The others wait on a condition variable of their own (no thundering herd). A batch
 * that fails as a whole for a reason a retry would not change (DB_HARD_ERROR: one job's insert
 * failed) is retried job by job, so each request gets its own outcome; after a lost connection
 * every job of the batch gets that error, as a single submission would. docs/decisions.md says why.
 */
#include "submit_queue.h"

#include "db.h"

#include <pthread.h>
#include <stdbool.h>
#include <stdlib.h>

/* Batches committed at once: two, so that one batch fills while the other's WAL flush runs.
 * More split the queue into batches of one or two jobs, each paying a statement's and a commit's
 * fixed cost (docs/decisions.md, "Submissions: SQL functions ..."). */
#define SUBMIT_COMMITTERS 2
/* Jobs per statement at most. */
#define SUBMIT_BATCH 64

struct submit_entry {
    struct store_job_new *job;
    int qs;
    bool lead; /* this thread commits the next batch */
    bool done;
    pthread_cond_t cv;
    struct submit_entry *next;
};

struct submit_queue {
    pthread_mutex_t mu;
    struct submit_entry *head, **tail;
    size_t queued; /* entries from head on */
    /* Threads committing a batch, plus queued entries handed a turn (lead) they have not
     * started yet: at most SUBMIT_COMMITTERS. */
    int committers;
};

struct submit_queue *submit_queue_create(void)
{
    struct submit_queue *q = calloc(1, sizeof(*q));
    if (q == NULL)
        return NULL;
    pthread_mutex_init(&q->mu, NULL);
    q->tail = &q->head;
    return q;
}

void submit_queue_destroy(struct submit_queue *q)
{
    if (q == NULL)
        return;
    pthread_mutex_destroy(&q->mu);
    free(q);
}

struct batch {
    struct store_job_new *jobs[SUBMIT_BATCH];
    int qs[SUBMIT_BATCH];
    size_t n;
};

static int commit_batch(struct db_conn *c, void *arg)
{
    struct batch *b = arg;
    int qs = store_jobs_insert(c, b->jobs, b->n);
    for (size_t i = 0; i < b->n; i++)
        b->qs[i] = qs < 0 ? qs : 1;
    if (qs == DB_HARD_ERROR && b->n > 1)
        for (size_t i = 0; i < b->n; i++)
            b->qs[i] = store_jobs_insert(c, &b->jobs[i], 1);
    return qs;
}

size_t submit_queue_waiting(struct submit_queue *q)
{
    pthread_mutex_lock(&q->mu);
    size_t n = q->queued;
    pthread_mutex_unlock(&q->mu);
    return n;
}

int submit_queue_insert(struct submit_queue *q, struct db *db, struct store_job_new *job)
{
    struct submit_entry e = {.job = job};
    pthread_cond_init(&e.cv, NULL);
    pthread_mutex_lock(&q->mu);
    *q->tail = &e;
    q->tail = &e.next;
    q->queued++;
    if (q->committers < SUBMIT_COMMITTERS) {
        q->committers++;
        e.lead = true;
    }
    for (;;) {
        if (e.lead) {
            e.lead = false;
            struct batch b = {.n = 0};
            struct submit_entry *taken[SUBMIT_BATCH];
            while (q->head && b.n < SUBMIT_BATCH) {
                if (q->head->lead) { /* handed a turn it has not started: this batch is it */
                    q->head->lead = false;
                    q->committers--;
                }
                taken[b.n] = q->head;
                b.jobs[b.n++] = q->head->job;
                q->head = q->head->next;
                q->queued--;
            }
            if (q->head == NULL)
                q->tail = &q->head;
            for (size_t i = 0; i < b.n; i++)
                b.qs[i] = DB_SOFT_ERROR; /* no connection: commit_batch does not run */
            pthread_mutex_unlock(&q->mu);
            db_with_conn(db, commit_batch, &b);
            pthread_mutex_lock(&q->mu);
            for (size_t i = 0; i < b.n; i++) {
                taken[i]->qs = b.qs[i];
                taken[i]->done = true;
                if (taken[i] != &e)
                    pthread_cond_signal(&taken[i]->cv);
            }
            struct submit_entry *next = q->head;
            while (next && next->lead)
                next = next->next;
            if (next) { /* the turn passes on */
                next->lead = true;
                if (next != &e)
                    pthread_cond_signal(&next->cv);
            } else {
                q->committers--;
            }
            continue;
        }
        if (e.done)
            break;
        pthread_cond_wait(&e.cv, &q->mu);
    }
    pthread_mutex_unlock(&q->mu);
    pthread_cond_destroy(&e.cv);
    return e.qs;
}

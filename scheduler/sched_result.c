/* The result of a pass: decisions, workers, GPU lists and strings in a few flat arrays.
 *
 * While the pass runs the arrays grow, so decisions and workers keep offsets (in the parallel
 * *_off arrays) and sched__result_finish() turns them into the public pointers once. */
#include "sched_internal.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct sched_result {
    sched_decision *dec;
    size_t ndec, cap_dec;
    size_t *dec_wfirst, *dec_msg; /* per decision: first worker, message offset in text */
    size_t cap_dec_wfirst, cap_dec_msg;
    sched_worker *w;
    size_t nw, cap_w;
    size_t *w_gpu, *w_node; /* per worker: offset in gpus, offset of node id in text */
    size_t cap_w_gpu, cap_w_node;
    int *gpus;
    size_t ngpus, cap_gpus;
    char *text;
    size_t ntext, cap_text;
    size_t *node_text; /* per snapshot node: offset of its id in text, SIZE_MAX when absent */
    size_t nnodes;
    size_t jobs_placed;
};

sched_result *sched__result_new(size_t njobs, size_t nnodes, size_t workers, size_t gpus)
{
    sched_result *r = calloc(1, sizeof *r);
    if (!r)
        return NULL;
    r->nnodes = nnodes;
    r->node_text = malloc((nnodes + 1) * sizeof *r->node_text);
    r->dec = malloc((njobs + 1) * sizeof *r->dec);
    r->dec_wfirst = malloc((njobs + 1) * sizeof *r->dec_wfirst);
    r->dec_msg = malloc((njobs + 1) * sizeof *r->dec_msg);
    if (!r->node_text || !r->dec || !r->dec_wfirst || !r->dec_msg) {
        sched_result_destroy(r);
        return NULL;
    }
    r->cap_dec = r->cap_dec_wfirst = r->cap_dec_msg = njobs + 1;
    if (sched__grow(&r->w, &r->cap_w, workers, sizeof *r->w) ||
        sched__grow(&r->w_gpu, &r->cap_w_gpu, workers, sizeof *r->w_gpu) ||
        sched__grow(&r->w_node, &r->cap_w_node, workers, sizeof *r->w_node) ||
        sched__grow(&r->gpus, &r->cap_gpus, gpus, sizeof *r->gpus) ||
        sched__grow(&r->text, &r->cap_text, njobs * 80 + 64, 1)) {
        sched_result_destroy(r);
        return NULL;
    }
    memset(r->node_text, 0xff, (nnodes + 1) * sizeof *r->node_text);
    return r;
}

void sched_result_destroy(sched_result *r)
{
    if (!r)
        return;
    free(r->dec);
    free(r->dec_wfirst);
    free(r->dec_msg);
    free(r->w);
    free(r->w_gpu);
    free(r->w_node);
    free(r->gpus);
    free(r->text);
    free(r->node_text);
    free(r);
}

/* Appends len bytes and a NUL to the text arena; stores the offset. Returns 0 or SCHED_ENOMEM. */
static int text_append(sched_result *r, const char *s, size_t len, size_t *off)
{
    if (sched__grow(&r->text, &r->cap_text, r->ntext + len + 1, 1))
        return SCHED_ENOMEM;
    memcpy(r->text + r->ntext, s, len);
    r->text[r->ntext + len] = '\0';
    *off = r->ntext;
    r->ntext += len + 1;
    return SCHED_OK;
}

int sched__result_begin(sched_result *r, int64_t job_id, sched_outcome outcome)
{
    if (sched__grow(&r->dec, &r->cap_dec, r->ndec + 1, sizeof *r->dec) ||
        sched__grow(&r->dec_wfirst, &r->cap_dec_wfirst, r->ndec + 1, sizeof *r->dec_wfirst) ||
        sched__grow(&r->dec_msg, &r->cap_dec_msg, r->ndec + 1, sizeof *r->dec_msg))
        return SCHED_ENOMEM;
    r->dec[r->ndec] =
        (sched_decision){.job_id = job_id, .outcome = outcome, .reserved_start = SCHED_TIME_NEVER};
    r->dec_wfirst[r->ndec] = r->nw;
    r->dec_msg[r->ndec] = SIZE_MAX;
    r->ndec++;
    if (outcome == SCHED_PLACED)
        r->jobs_placed++;
    return SCHED_OK;
}

int sched__result_message(sched_result *r, const char *fmt, ...)
{
    char buf[512];
    va_list ap;
    va_start(ap, fmt);
    int len = vsnprintf(buf, sizeof buf, fmt, ap);
    va_end(ap);
    if (len < 0)
        len = 0;
    if ((size_t)len >= sizeof buf)
        len = sizeof buf - 1;
    return text_append(r, buf, (size_t)len, &r->dec_msg[r->ndec - 1]);
}

void sched__result_set_head(sched_result *r, int64_t reserved_start)
{
    r->dec[r->ndec - 1].is_head = true;
    r->dec[r->ndec - 1].reserved_start = reserved_start;
}

int sched__result_worker(sched_result *r, const sched_worker *w, const int *gpus,
                         const char *node_id)
{
    if (sched__grow(&r->w, &r->cap_w, r->nw + 1, sizeof *r->w) ||
        sched__grow(&r->w_gpu, &r->cap_w_gpu, r->nw + 1, sizeof *r->w_gpu) ||
        sched__grow(&r->w_node, &r->cap_w_node, r->nw + 1, sizeof *r->w_node) ||
        sched__grow(&r->gpus, &r->cap_gpus, r->ngpus + (size_t)w->ngpus, sizeof *r->gpus))
        return SCHED_ENOMEM;
    if (r->node_text[w->node_index] == SIZE_MAX &&
        text_append(r, node_id, strlen(node_id), &r->node_text[w->node_index]))
        return SCHED_ENOMEM;
    r->w[r->nw] = *w;
    r->w_gpu[r->nw] = r->ngpus;
    r->w_node[r->nw] = r->node_text[w->node_index];
    if (w->ngpus) /* r->gpus is still NULL while no worker had a GPU */
        memcpy(r->gpus + r->ngpus, gpus, (size_t)w->ngpus * sizeof *gpus);
    r->ngpus += (size_t)w->ngpus;
    r->nw++;
    sched_decision *d = &r->dec[r->ndec - 1];
    d->num_workers++;
    if (w->local_rank == 0)
        d->num_nodes++;
    return SCHED_OK;
}

void sched__result_finish(sched_result *r)
{
    static const char empty[] = "";
    for (size_t i = 0; i < r->nw; i++) {
        r->w[i].node_id = r->text + r->w_node[i];
        r->w[i].gpus = r->w[i].ngpus ? r->gpus + r->w_gpu[i] : NULL;
    }
    for (size_t i = 0; i < r->ndec; i++) {
        sched_decision *d = &r->dec[i];
        d->workers = d->num_workers ? r->w + r->dec_wfirst[i] : NULL;
        d->message = r->dec_msg[i] == SIZE_MAX ? empty : r->text + r->dec_msg[i];
    }
}

size_t sched_result_count(const sched_result *r)
{
    return r ? r->ndec : 0;
}

const sched_decision *sched_result_decision(const sched_result *r, size_t i)
{
    return r && i < r->ndec ? &r->dec[i] : NULL;
}

const sched_decision *sched_result_find(const sched_result *r, int64_t job_id)
{
    for (size_t i = 0; r && i < r->ndec; i++) {
        if (r->dec[i].job_id == job_id)
            return &r->dec[i];
    }
    return NULL;
}

void sched_result_totals(const sched_result *r, size_t *jobs_placed, size_t *workers_placed)
{
    if (jobs_placed)
        *jobs_placed = r ? r->jobs_placed : 0;
    if (workers_placed)
        *workers_placed = r ? r->nw : 0;
}

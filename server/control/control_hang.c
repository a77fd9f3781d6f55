/* Hangs (issue 12): agents' `progress` messages are stored (one statement each), and once a
 * second the control loop looks for running attempts none of whose ranks progressed for the
 * job's hang_warn_s: hang.c decides and names the hang, the job's events get it once, and past
 * hang_timeout_s the job fails through ty_job_fail like a worker failure. */
#include "control_internal.h"

#include "hang.h"
#include "log.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

#define CTL_HANG_CHECK_S 1.0

void ctl__on_progress(struct control *ctl, struct ctl_node *node, const struct aproto_node_msg *m)
{
    if (m->n_progress == 0)
        return;
    if (store_progress_ingest(ctl->db, node->id, m->progress, m->n_progress) < 0)
        TY_WARN("control", "node %s: progress not stored (database error)", node->id);
}

/* The ranks of a suspect (store_hang_suspect.ranks_json) into r (n entries, malloc'd; strings
 * borrowed from *root). 0 or -1. */
static int suspect_ranks(const char *text, json_t **root, struct hang_rank **r, size_t *n)
{
    *r = NULL;
    *n = 0;
    *root = json_loads(text, 0, NULL);
    if (!json_is_array(*root) || json_array_size(*root) == 0)
        return -1;
    size_t count = json_array_size(*root);
    struct hang_rank *out = calloc(count, sizeof(*out));
    if (out == NULL)
        return -1;
    for (size_t i = 0; i < count; i++) {
        json_t *row = json_array_get(*root, i);
        out[i] = (struct hang_rank){
            .rank = json_integer_value(json_array_get(row, 0)),
            .known = true,
            .op = json_string_value(json_array_get(row, 1)),
            .coll_seq = json_integer_value(json_array_get(row, 2)),
            .in_collective = json_is_true(json_array_get(row, 3)),
            .report_seq = json_integer_value(json_array_get(row, 4)),
            .progress_age_s = json_number_value(json_array_get(row, 5)),
            .heartbeat_age_s = json_number_value(json_array_get(row, 6)),
        };
    }
    *r = out;
    *n = count;
    return 0;
}

/* One suspect: name its hang once, fail it past its timeout. */
static void check_suspect(struct control *ctl, const struct store_hang_suspect *s)
{
    json_t *root = NULL;
    struct hang_rank *r = NULL;
    size_t n = 0;
    char text[1024];
    double stalled = 0;
    bool hung = suspect_ranks(s->ranks_json, &root, &r, &n) == 0 &&
                hang_analyze(r, n, s->warn_s, &stalled, text, sizeof(text));
    free(r);
    json_decref(root);
    if (!hung)
        return;
    if (!s->warned && store_hang_warn(ctl->db, s->job, s->attempt, text) > 0)
        TY_WARN("control", "job %lld attempt %d hangs: %s", (long long)s->job, s->attempt, text);
    if (s->timeout_s > 0 && stalled >= s->timeout_s &&
        store_hang_fail(ctl->db, s->job, s->attempt, text) > 0) {
        TY_WARN("control", "job %lld failed: hang past hang_timeout_s (%g s)", (long long)s->job,
                s->timeout_s);
        ctl->dirty = true;
    }
}

void ctl__check_hangs(struct control *ctl)
{
    double now = util_mono_s();
    if (now - ctl->last_hang_check < CTL_HANG_CHECK_S)
        return;
    ctl->last_hang_check = now;
    struct store_hang_suspect *s = NULL;
    size_t n = 0;
    if (store_hang_suspects(ctl->db, &s, &n) < 0)
        return;
    for (size_t i = 0; i < n; i++)
        check_suspect(ctl, &s[i]);
    store_hang_suspects_free(s, n);
}

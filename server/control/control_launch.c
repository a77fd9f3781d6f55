/* Launch orders: the PLACED workers of an attempt (store_launch_rows) and, when the job resumes
 * from a checkpoint, each node's copy of it (store_checkpoint_launch_dirs) become one `launch`
 * per node (launch.c, pure), sent to the nodes that are connected. */
#include "control_internal.h"

#include "launch.h"
#include "log.h"
#include "store.h"

#include <jansson.h>
#include <stdlib.h>

/* The resume points of the launch's nodes (the attempt's resumed_from: resume_from_checkpoint, or
 * the checkpoint a restart resumes from): 0 with *dirs (NULL when the attempt starts fresh), or -1
 * when the lookup failed (logged): then nothing is launched. */
static int resume_dirs(struct control *ctl, int64_t job, int attempt,
                       const struct srv_launch_rows *rows, struct srv_resume_dir **dirs,
                       size_t *n_dirs)
{
    *dirs = NULL;
    *n_dirs = 0;
    int64_t ckpt = rows->resume_from;
    if (ckpt <= 0)
        return 0;
    size_t n_nodes;
    const char **nodes = srv_launch_nodes(rows, &n_nodes);
    int qs = nodes ? store_checkpoint_launch_dirs(ctl->db, ckpt, job, attempt, nodes, n_nodes, dirs,
                                                  n_dirs)
                   : DB_HARD_ERROR;
    free(nodes);
    if (qs <= 0) {
        TY_ERROR("control",
                 "job %lld attempt %d: cannot look up checkpoint %lld to resume from; "
                 "not launching",
                 (long long)job, attempt, (long long)ckpt);
        return -1;
    }
    for (size_t i = 0; i < *n_dirs; i++)
        if ((*dirs)[i].message)
            TY_WARN("control", "job %lld attempt %d: %s", (long long)job, attempt,
                    (*dirs)[i].message);
    return 0;
}

/* The job's parsed spec: the scheduling pass's (control_specs.c) when it has it, else parsed from
 * the rows into *own (jobspec_clear it). NULL when it does not parse (logged). */
static const struct jobspec *launch_spec(struct control *ctl, int64_t job,
                                         const struct srv_launch_rows *rows, struct jobspec *own)
{
    const struct jobspec *spec = ctl__spec_get(&ctl->specs, job);
    if (spec)
        return spec;
    json_t *json = json_loads(rows->spec_json ? rows->spec_json : "", 0, NULL);
    char err[256] = "";
    int rc = json ? jobspec_from_json(json, own, err, sizeof(err)) : JOBSPEC_EINVAL;
    json_decref(json);
    if (rc != JOBSPEC_OK) {
        TY_ERROR("control", "job %lld: its spec does not parse (%s); not launching", (long long)job,
                 err);
        return NULL;
    }
    return own;
}

/* ctl__send_launches; here_only: the launch was placed by another server (a notification), so a
 * node not connected here is no news: it is connected to another server, which sends its part. */
static void send_launches(struct control *ctl, int64_t job, int attempt, const char *node_id,
                          bool here_only)
{
    struct srv_launch_rows rows;
    if (store_launch_rows(ctl->db, job, attempt, node_id, &rows) <= 0)
        return;
    struct srv_resume_dir *dirs = NULL;
    size_t n_dirs = 0, n_msgs = 0;
    struct srv_launch_msg *msgs = NULL;
    char err[256];
    struct jobspec own = {0};
    const struct jobspec *spec = launch_spec(ctl, job, &rows, &own);
    if (spec == NULL || resume_dirs(ctl, job, attempt, &rows, &dirs, &n_dirs) != 0)
        goto out;
    if (srv_launch_build(job, attempt, spec, &rows, dirs, n_dirs, &msgs, &n_msgs, err,
                         sizeof(err)) != 0) {
        TY_ERROR("control", "attempt %d not launched: %s", attempt, err);
        goto out;
    }
    for (size_t k = 0; k < n_msgs; k++) {
        struct ctl_node *n = ctl__node_by_id(ctl, msgs[k].node_id);
        if (n && n->conn) {
            ctl__send_text(ctl, n->conn, msgs[k].text);
            msgs[k].text = NULL;
        } else if (!here_only) {
            TY_INFO("control",
                    "node %s is not connected to this server: job %lld launches there "
                    "through the server it is connected to, or when it registers again",
                    msgs[k].node_id, (long long)job);
        }
    }
out:
    jobspec_clear(&own);
    srv_launch_msgs_free(msgs, n_msgs);
    srv_resume_dirs_free(dirs, n_dirs);
    srv_launch_rows_free(&rows);
}

void ctl__send_launches(struct control *ctl, int64_t job, int attempt, const char *node_id)
{
    send_launches(ctl, job, attempt, node_id, false);
}

void ctl__send_launches_here(struct control *ctl, int64_t job, int attempt)
{
    send_launches(ctl, job, attempt, NULL, true);
}

void ctl__launch_placed_here(struct control *ctl)
{
    for (struct ctl_node *n = ctl->nodes; n; n = n->next) {
        struct store_live_worker *live = NULL;
        size_t nlive = 0;
        if (n->conn == 0 || store_node_live_workers(ctl->db, n->id, &live, &nlive) <= 0)
            continue;
        int64_t sent_job = 0;
        int sent_attempt = 0;
        for (size_t i = 0; i < nlive; i++) {
            if (!live[i].placed || (live[i].job == sent_job && live[i].attempt == sent_attempt))
                continue;
            sent_job = live[i].job;
            sent_attempt = live[i].attempt;
            send_launches(ctl, sent_job, sent_attempt, n->id, true);
        }
        free(live);
    }
}

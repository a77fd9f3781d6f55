/* Launch orders from typed store rows (launch.h): pure, the message itself is built by the
 * shared protocol module (common/agent_proto.c). */
#include "launch.h"

#include "agent_proto.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

void srv_launch_rows_free(struct srv_launch_rows *r)
{
    if (r == NULL)
        return;
    for (size_t i = 0; r->workers && i < r->n_workers; i++) {
        free(r->workers[i].node_id);
        free(r->workers[i].gpus);
    }
    free(r->workers);
    free(r->rendezvous_secret);
    for (int64_t i = 0; r->rank_addresses && i < r->world_size; i++)
        free(r->rank_addresses[i]);
    free(r->rank_addresses);
    free(r->spec_json);
    free(r->master_addr);
    memset(r, 0, sizeof(*r));
}

void srv_resume_dirs_free(struct srv_resume_dir *dirs, size_t n)
{
    for (size_t i = 0; dirs && i < n; i++) {
        free(dirs[i].node_id);
        free(dirs[i].path);
        free(dirs[i].message);
        free(dirs[i].fetch_sha256);
        free(dirs[i].fetch_shared);
    }
    free(dirs);
}

const char **srv_launch_nodes(const struct srv_launch_rows *rows, size_t *n)
{
    *n = 0;
    const char **ids = rows->n_workers ? calloc(rows->n_workers, sizeof(*ids)) : NULL;
    for (size_t i = 0; ids && i < rows->n_workers; i++)
        if (*n == 0 || strcmp(ids[*n - 1], rows->workers[i].node_id) != 0)
            ids[(*n)++] = rows->workers[i].node_id;
    return ids;
}

void srv_launch_msgs_free(struct srv_launch_msg *msgs, size_t n)
{
    for (size_t i = 0; msgs && i < n; i++)
        free(msgs[i].text);
    free(msgs);
}

/* The launch of the workers [first, last) of the rows, all on one node. */
static char *node_launch(struct aproto_launch *l, const struct srv_launch_rows *rows, size_t first,
                         size_t last, const struct srv_resume_dir *resume)
{
    const struct srv_launch_worker *w0 = &rows->workers[first];
    struct aproto_launch_worker *ws = calloc(last - first, sizeof(*ws));
    if (ws == NULL)
        return NULL;
    for (size_t i = first; i < last; i++)
        ws[i - first] = (struct aproto_launch_worker){
            .rank = rows->workers[i].rank,
            .local_rank = rows->workers[i].local_rank,
            .gpus = rows->workers[i].gpus,
            .n_gpus = rows->workers[i].n_gpus,
        };
    l->node_rank = w0->node_rank;
    l->local_world_size = w0->local_world_size;
    l->checkpoint_dir = resume ? resume->path : NULL;
    l->checkpoint_fetch_id = resume && !resume->path ? resume->fetch_id : 0;
    l->checkpoint_fetch_sha256 = resume && !resume->path ? resume->fetch_sha256 : NULL;
    l->checkpoint_fetch_shared = resume && !resume->path ? resume->fetch_shared : NULL;
    l->workers = ws;
    l->n_workers = last - first;
    char *text = aproto_msg_launch(l);
    free(ws);
    l->workers = NULL;
    return text;
}

/* The entrypoint as submitted: the string run with /bin/sh -c, or the argv array. NULL when out
 * of memory. */
static json_t *entrypoint_json(const struct jobspec *spec)
{
    if (spec->entrypoint_is_string && spec->argc == 3)
        return json_string(spec->argv[2]);
    json_t *argv = json_array();
    for (size_t i = 0; argv && i < spec->argc; i++)
        if (json_array_append_new(argv, json_string(spec->argv[i])) != 0) {
            json_decref(argv);
            return NULL;
        }
    return argv;
}

/* The workers' environment: env and secret_env together (secret_env wins; only the API hides the
 * secret values). NULL when out of memory. */
static json_t *worker_env(const struct jobspec *spec)
{
    json_t *env = json_object();
    for (size_t i = 0; env && i < spec->n_env + spec->n_secret_env; i++) {
        const struct jobspec_env *v =
            i < spec->n_env ? &spec->env[i] : &spec->secret_env[i - spec->n_env];
        if (json_object_set_new(env, v->name, json_string(v->value)) != 0) {
            json_decref(env);
            return NULL;
        }
    }
    return env;
}

int srv_launch_build(int64_t job, int attempt, const struct jobspec *spec,
                     const struct srv_launch_rows *rows, const struct srv_resume_dir *dirs,
                     size_t n_dirs, struct srv_launch_msg **out, size_t *n, char *err,
                     size_t errlen)
{
    *out = NULL;
    *n = 0;
    char job_text[32];
    snprintf(job_text, sizeof(job_text), "%lld", (long long)job);
    json_t *entrypoint = entrypoint_json(spec);
    json_t *env = worker_env(spec);
    struct aproto_launch l = {
        .job_id = job_text,
        .attempt = attempt,
        .backend = jobspec_backend_name(spec->backend),
        .entrypoint = entrypoint,
        .working_dir = spec->working_dir,
        .code_sha256 = spec->code_package,
        /* A restart that resumes from the job's own checkpoint does not go back to it. */
        .checkpoint_package = rows->resume_from > 0 ? NULL : spec->resume_from_package,
        .env = env,
        .config = spec->train_loop_config,
        .world_size = rows->world_size,
        .num_nodes = rows->num_nodes,
        .master_addr = rows->master_addr,
        .master_port = rows->master_port,
        .rank_addresses = (const char **)rows->rank_addresses,
        .rendezvous_secret = rows->rendezvous_secret,
        .storage_path = spec->storage_path,
        .cpu_milli = spec->cpu_milli,
        .memory_mb = spec->memory_mb,
    };
    struct srv_launch_msg *msgs = calloc(rows->n_workers + 1, sizeof(*msgs));
    int rc = msgs && entrypoint && env ? 0 : -1;
    size_t k = 0;
    for (size_t i = 0; rc == 0 && i < rows->n_workers; k++) {
        size_t first = i;
        const char *node = rows->workers[first].node_id;
        while (i < rows->n_workers && strcmp(rows->workers[i].node_id, node) == 0)
            i++;
        const struct srv_resume_dir *dir =
            dirs && k < n_dirs && dirs[k].node_id && strcmp(dirs[k].node_id, node) == 0 ? &dirs[k]
                                                                                        : NULL;
        msgs[k] = (struct srv_launch_msg){node, node_launch(&l, rows, first, i, dir)};
        if (msgs[k].text == NULL)
            rc = -1;
    }
    json_decref(env);
    json_decref(entrypoint);
    if (rc != 0) {
        srv_launch_msgs_free(msgs, k);
        snprintf(err, errlen, "job %lld: out of memory building its launch", (long long)job);
        return -1;
    }
    *out = msgs;
    *n = k;
    return 0;
}

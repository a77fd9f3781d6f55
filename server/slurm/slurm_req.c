/* slurmrestd request bodies and answers (slurm_rest.h): pure, no I/O. */
#include "slurm_rest.h"

#include <jansson.h>

#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SLURM_ERR_INVALID_JOB_ID 2017 /* ESLURM_INVALID_JOB_ID: the job has left slurmctld */

char *slurm_submit_body(const struct slurm_alloc *a)
{
    json_t *env = json_object();
    for (size_t i = 0; env && i < a->nenv; i++) {
        const char *eq = strchr(a->env[i], '=');
        if (eq == NULL || eq == a->env[i])
            continue;
        char *name = strndup(a->env[i], (size_t)(eq - a->env[i]));
        if (name)
            json_object_set_new(env, name, json_string(eq + 1));
        free(name);
    }
    /* Never requeued by Slurm (a node lost is the server's restart, on a new allocation):
     * "no_requeue", since slurmrestd 22.05 ignores "requeue": false (the job kept Requeue=1). */
    json_t *job = json_pack(
        "{s:s, s:i, s:i, s:i, s:i, s:s, s:o, s:b}", "name", a->name ? a->name : "trainyard",
        "nodes", a->nodes, "tasks", a->nodes * a->tasks_per_node, "tasks_per_node",
        a->tasks_per_node, "cpus_per_task", a->cpus_per_task > 0 ? a->cpus_per_task : 1,
        "current_working_directory", a->cwd ? a->cwd : "/tmp", "environment", env, "no_requeue", 1);
    if (job == NULL)
        return NULL;
    if (a->mem_per_node_mb > 0)
        json_object_set_new(job, "memory_per_node", json_integer(a->mem_per_node_mb));
    if (a->gpus_per_node > 0) {
        char gres[32];
        snprintf(gres, sizeof(gres), "gpu:%d", a->gpus_per_node);
        json_object_set_new(job, "gres", json_string(gres));
    }
    if (a->time_limit_min > 0)
        json_object_set_new(job, "time_limit", json_integer(a->time_limit_min));
    if (a->signal_s > 0) {
        char sig[32];
        snprintf(sig, sizeof(sig), "USR1@%d", a->signal_s);
        json_object_set_new(job, "signal", json_string(sig));
    }
    if (a->partition && a->partition[0])
        json_object_set_new(job, "partition", json_string(a->partition));
    if (a->account && a->account[0])
        json_object_set_new(job, "account", json_string(a->account));
    /* The script's own output: nowhere (the agents' logs are the workers'). */
    json_object_set_new(job, "standard_output", json_string("/dev/null"));
    json_object_set_new(job, "standard_error", json_string("/dev/null"));
    json_t *root = json_pack("{s:o, s:s}", "job", job, "script", a->script ? a->script : "");
    if (root == NULL)
        return NULL;
    char *text = json_dumps(root, JSON_COMPACT);
    json_decref(root);
    return text;
}

/* The first entry of the answer's "errors" array, or NULL. */
static json_t *first_error(json_t *root)
{
    json_t *errors = json_object_get(root, "errors");
    return json_is_array(errors) && json_array_size(errors) > 0 ? json_array_get(errors, 0) : NULL;
}

static void error_text(json_t *e, long http, char *err, size_t errlen)
{
    const char *msg = json_string_value(json_object_get(e, "error"));
    const char *desc = json_string_value(json_object_get(e, "description"));
    if (msg && desc && desc[0] && strcmp(msg, desc) != 0)
        snprintf(err, errlen, "%s (%s)", msg, desc);
    else if (msg && msg[0])
        snprintf(err, errlen, "%s", msg);
    else if (desc && desc[0])
        snprintf(err, errlen, "%s", desc);
    else
        snprintf(err, errlen, "slurmrestd answered HTTP %ld", http);
}

void slurm_answer_error(long http, const char *body, char *err, size_t errlen)
{
    json_t *root = body ? json_loads(body, 0, NULL) : NULL;
    json_t *e = first_error(root);
    if (e)
        error_text(e, http, err, errlen);
    else if (http == 401 || http == 403)
        snprintf(err, errlen, "slurmrestd refused the credentials (HTTP %ld)", http);
    else
        snprintf(err, errlen, "slurmrestd answered HTTP %ld", http);
    json_decref(root);
}

/* The JSON object of an answer, or NULL (err says why: the token refused, no JSON), which
 * leaves the job as it was: slurmrestd or its credentials are at fault, not the job. */
static json_t *answer_object(long http, const char *body, char *err, size_t errlen)
{
    if (http == 401 || http == 403) {
        slurm_answer_error(http, body, err, errlen);
        return NULL;
    }
    json_t *root = body ? json_loads(body, 0, NULL) : NULL;
    if (!json_is_object(root)) {
        json_decref(root);
        snprintf(err, errlen, "slurmrestd answered HTTP %ld with no JSON", http);
        return NULL;
    }
    return root;
}

/* Whether a Slurm error is the cluster's passing state, not the request's fault: slurmctld
 * unreachable (codes 1800-1899, SLURMCTLD_COMMUNICATIONS_*, the "Unable to contact slurm
 * controller" family), or the nodes not back yet (just after slurmctld restarted, nodes down). */
static bool transient(json_t *e, const char *text)
{
    json_int_t code = json_integer_value(json_object_get(e, "error_code"));
    static const char *const words[] = {
        "Unable to contact slurm controller", "Required node not available", "Socket timed out",
        "Zero Bytes were transmitted", "backup controller in standby mode"};
    if (code >= 1800 && code <= 1899)
        return true;
    for (size_t i = 0; i < sizeof(words) / sizeof(words[0]); i++)
        if (strstr(text, words[i]))
            return true;
    return false;
}

int slurm_parse_submit(long http, const char *body, int64_t *job_id, char *err, size_t errlen)
{
    *job_id = -1;
    json_t *root = answer_object(http, body, err, errlen);
    if (root == NULL)
        return SLURM_UNAVAILABLE;
    json_t *id = json_object_get(root, "job_id");
    if (json_is_integer(id) && json_integer_value(id) > 0)
        *job_id = json_integer_value(id);
    json_t *e = first_error(root);
    int rc = SLURM_OK;
    if (e != NULL) {
        error_text(e, http, err, errlen);
        rc = transient(e, err) ? SLURM_UNAVAILABLE : SLURM_REJECTED;
    } else if (*job_id <= 0) {
        snprintf(err, errlen, "slurmrestd answered HTTP %ld without a job id", http);
        rc = http >= 500 ? SLURM_UNAVAILABLE : SLURM_REJECTED;
    }
    json_decref(root);
    return rc;
}

static void copy_str(json_t *obj, const char *key, char *out, size_t n)
{
    const char *s = json_string_value(json_object_get(obj, key));
    snprintf(out, n, "%s", s ? s : "");
}

int slurm_parse_job(long http, const char *body, int64_t job_id, struct slurm_job_info *info,
                    char *err, size_t errlen)
{
    memset(info, 0, sizeof(*info));
    json_t *root = answer_object(http, body, err, errlen);
    if (root == NULL)
        return SLURM_UNAVAILABLE;
    int rc = SLURM_REJECTED;
    json_t *jobs = json_object_get(root, "jobs");
    size_t i;
    json_t *j;
    json_array_foreach(jobs, i, j)
    {
        if (json_integer_value(json_object_get(j, "job_id")) != job_id)
            continue;
        copy_str(j, "job_state", info->state, sizeof(info->state));
        copy_str(j, "state_reason", info->reason, sizeof(info->reason));
        copy_str(j, "nodes", info->nodes, sizeof(info->nodes));
        copy_str(j, "name", info->name, sizeof(info->name));
        rc = info->state[0] ? SLURM_OK : SLURM_UNAVAILABLE;
        if (rc != SLURM_OK)
            snprintf(err, errlen, "slurmrestd's answer has no job_state for job %lld",
                     (long long)job_id);
        break;
    }
    if (i == json_array_size(jobs)) {
        json_t *e = first_error(root);
        if (e &&
            json_integer_value(json_object_get(e, "error_number")) != SLURM_ERR_INVALID_JOB_ID &&
            json_integer_value(json_object_get(e, "error_code")) != SLURM_ERR_INVALID_JOB_ID) {
            error_text(e, http, err, errlen);
            rc = SLURM_UNAVAILABLE;
        } else {
            snprintf(err, errlen, "Slurm no longer knows job %lld", (long long)job_id);
            rc = SLURM_REJECTED;
        }
    }
    json_decref(root);
    return rc;
}

static int b64url_value(int c)
{
    if (c >= 'A' && c <= 'Z')
        return c - 'A';
    if (c >= 'a' && c <= 'z')
        return c - 'a' + 26;
    if (c >= '0' && c <= '9')
        return c - '0' + 52;
    if (c == '-' || c == '+')
        return 62;
    if (c == '_' || c == '/')
        return 63;
    return -1;
}

int slurm_jwt_claims(const char *token, char *out, size_t n, int64_t *exp)
{
    *exp = 0;
    const char *p = token ? strchr(token, '.') : NULL;
    const char *end = p ? strchr(p + 1, '.') : NULL;
    if (p == NULL || end == NULL || n == 0)
        return -1;
    p++;
    size_t len = (size_t)(end - p);
    char *dec = malloc(len + 1);
    if (dec == NULL)
        return -1;
    size_t o = 0;
    unsigned acc = 0;
    int bits = 0;
    for (size_t i = 0; i < len; i++) {
        int v = b64url_value((unsigned char)p[i]);
        if (v < 0)
            break;
        acc = (acc << 6) | (unsigned)v;
        bits += 6;
        if (bits >= 8) {
            bits -= 8;
            dec[o++] = (char)((acc >> bits) & 0xff);
        }
    }
    dec[o] = '\0';
    json_t *claims = json_loads(dec, 0, NULL);
    free(dec);
    const char *sun = json_string_value(json_object_get(claims, "sun"));
    json_t *e = json_object_get(claims, "exp");
    if (json_is_integer(e))
        *exp = json_integer_value(e);
    int rc = -1;
    if (sun && sun[0] && strlen(sun) < n) {
        snprintf(out, n, "%s", sun);
        rc = 0;
    }
    json_decref(claims);
    return rc;
}

static int state_in(const char *state, const char *const *list)
{
    for (; *list; list++)
        if (strcmp(state, *list) == 0)
            return 1;
    return 0;
}

int slurm_state_is_lost(const char *state)
{
    static const char *const lost[] = {"NODE_FAIL", "PREEMPTED", "TIMEOUT",
                                       "BOOT_FAIL", "DEADLINE",  NULL};
    return state_in(state, lost);
}

int slurm_state_is_final(const char *state)
{
    static const char *const live[] = {
        "PENDING",   "RUNNING",      "CONFIGURING", "COMPLETING", "REQUEUED", "RESIZING",
        "SUSPENDED", "REQUEUE_HOLD", "SIGNALING",   "STAGE_OUT",  "",         NULL};
    return !state_in(state, live);
}

/* Where an agent uploads and fetches (issue 23, docs/agent-protocol.md): `registered.api_urls`
 * (server -> agent), the REST base URLs of the cluster's servers, the leader's first; and the
 * `artifact_store` message (agent -> server), whether the agent's last upload or fetch there
 * worked:
 *
 *   {"type":"artifact_store", "ok":false, "url":"http://h:8080",
 *    "message":"checkpoint 3 upload to http://h:8080/api/v1/... failed: ... (retrying)",
 *    "job_id":"12", "attempt":1}
 *   {"type":"artifact_store", "ok":true, "url":"http://h:8080"}
 *
 * Not an event: no seq, no ack; the agent sends the next change. And the `disk_full` message
 * (agent -> server): a write in the agent's data directory for a job failed with ENOSPC:
 *
 *   {"type":"disk_full", "job_id":"12", "attempt":1, "path":"/data/code/ab...part/package.tar.gz",
 *    "what":"code package fetch"}
 *
 * Pure. */
#include "agent_proto_internal.h"
#include "util_json.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

bool aproto_api_url_valid(const char *url)
{
    if (url == NULL)
        return false;
    size_t len = strlen(url), scheme;
    if (strncmp(url, "http://", 7) == 0)
        scheme = 7;
    else if (strncmp(url, "https://", 8) == 0)
        scheme = 8;
    else
        return false;
    if (len <= scheme || len > APROTO_MAX_URL || url[scheme] == '/')
        return false;
    for (const char *p = url; *p; p++)
        if (*p <= ' ' || *p > '~' || *p == '"' || *p == '\\')
            return false;
    return true;
}

int aproto__parse_api_urls(json_t *root, const char ***urls, size_t *n, char *err, size_t errlen)
{
    *urls = NULL;
    *n = 0;
    json_t *v = json_object_get(root, "api_urls");
    if (v == NULL || json_is_null(v))
        return 0;
    if (!json_is_array(v) || json_array_size(v) > APROTO_MAX_API_URLS)
        return ERR("'api_urls' must be an array of at most %d URLs", APROTO_MAX_API_URLS);
    size_t count = json_array_size(v);
    if (count == 0)
        return 0;
    *urls = calloc(count, sizeof(**urls));
    if (*urls == NULL)
        return ERR("out of memory");
    for (size_t i = 0; i < count; i++) {
        json_t *u = json_array_get(v, i);
        const char *s = json_is_string(u) ? json_string_value(u) : NULL;
        if (s == NULL || strlen(s) != json_string_length(u) || !aproto_api_url_valid(s)) {
            free(*urls);
            *urls = NULL;
            return ERR("'api_urls[%zu]' must be an http:// or https:// URL of at most %d bytes", i,
                       APROTO_MAX_URL);
        }
        (*urls)[i] = s;
    }
    *n = count;
    return 0;
}

char *aproto_msg_artifact_store(const struct aproto_store_status *s)
{
    json_t *msg = json_pack("{s:s, s:b, s:s}", "type", "artifact_store", "ok", s->ok, "url",
                            s->url ? s->url : "");
    if (msg && s->message && json_object_set_new(msg, "message", json_string(s->message)) != 0)
        goto fail;
    if (msg && s->job_id && json_object_set_new(msg, "job_id", json_string(s->job_id)) != 0)
        goto fail;
    if (msg && s->job_id && s->attempt >= 0 &&
        json_object_set_new(msg, "attempt", json_integer((json_int_t)s->attempt)) != 0)
        goto fail;
    if (msg == NULL)
        return NULL;
    char *text = json_dumps(msg, JSON_COMPACT);
    json_decref(msg);
    return text;
fail:
    json_decref(msg);
    return NULL;
}

int aproto__parse_store_status(json_t *root, struct aproto_store_status *s, char *err,
                               size_t errlen)
{
    memset(s, 0, sizeof(*s));
    s->attempt = -1;
    json_t *ok = json_object_get(root, "ok");
    if (!json_is_boolean(ok))
        return ERR("'ok' must be true or false");
    s->ok = json_is_true(ok);
    json_t *url = json_object_get(root, "url");
    s->url = json_is_string(url) ? json_string_value(url) : NULL;
    if (s->url == NULL || strlen(s->url) != json_string_length(url) ||
        !aproto_api_url_valid(s->url))
        return ERR("'url' must be an http:// or https:// URL of at most %d bytes", APROTO_MAX_URL);
    json_t *msg = json_object_get(root, "message");
    if (!s->ok) {
        s->message = json_is_string(msg) ? json_string_value(msg) : NULL;
        if (s->message == NULL || json_string_length(msg) == 0 ||
            json_string_length(msg) > APROTO_MAX_STORE_MESSAGE ||
            strlen(s->message) != json_string_length(msg))
            return ERR("'message' must be a string of 1 to %d bytes", APROTO_MAX_STORE_MESSAGE);
    }
    json_t *job = json_object_get(root, "job_id");
    if (job && !json_is_null(job)) {
        s->job_id = json_is_string(job) ? json_string_value(job) : NULL;
        if (s->job_id == NULL || aproto_job_id_valid(s->job_id) != 0)
            return ERR("'job_id' must be a job id");
        if (util_json_int(root, "attempt", false, 0, INT32_MAX, &s->attempt, err, errlen) < 0)
            return -1;
    }
    return 0;
}

char *aproto_msg_disk_full(const struct aproto_disk_full *d)
{
    json_t *msg = json_pack("{s:s, s:s, s:I, s:s, s:s}", "type", "disk_full", "job_id",
                            d->job_id ? d->job_id : "", "attempt", (json_int_t)d->attempt, "path",
                            d->path ? d->path : "", "what", d->what ? d->what : "");
    char *text = msg ? json_dumps(msg, JSON_COMPACT) : NULL;
    json_decref(msg);
    return text;
}

/* A string member of root of 1 to max bytes (no NUL inside), or NULL. */
static const char *bounded_string(json_t *root, const char *key, size_t max)
{
    json_t *v = json_object_get(root, key);
    const char *s = json_is_string(v) ? json_string_value(v) : NULL;
    if (s == NULL || json_string_length(v) == 0 || json_string_length(v) > max ||
        strlen(s) != json_string_length(v))
        return NULL;
    return s;
}

int aproto__parse_disk_full(json_t *root, struct aproto_disk_full *d, char *err, size_t errlen)
{
    memset(d, 0, sizeof(*d));
    json_t *job = json_object_get(root, "job_id");
    d->job_id = json_is_string(job) ? json_string_value(job) : NULL;
    if (d->job_id == NULL || aproto_job_id_valid(d->job_id) != 0)
        return ERR("'job_id' must be a job id");
    if (util_json_int(root, "attempt", false, 0, INT32_MAX, &d->attempt, err, errlen) < 0)
        return -1;
    if ((d->path = bounded_string(root, "path", APROTO_MAX_CHECKPOINT_PATH)) == NULL)
        return ERR("'path' must be a string of 1 to %d bytes", APROTO_MAX_CHECKPOINT_PATH);
    if ((d->what = bounded_string(root, "what", APROTO_MAX_DISK_WHAT)) == NULL)
        return ERR("'what' must be a string of 1 to %d bytes", APROTO_MAX_DISK_WHAT);
    return 0;
}

/* Where agents upload and fetch (issue 23): the REST base URL a server tells each agent in
 * `registered` (its --public-url, else the host the agent dialled on --http-port), and the
 * agent's `artifact_store` message, which turns a failed upload or fetch into an event of the
 * job it was for and the node's "artifact-store-unreachable" condition (cleared by the next
 * success). */
#include "control_internal.h"

#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define SERVER_HEARD_S 2.0 /* this server's row in `servers` is rewritten this often */

int ctl__api_url(struct control *ctl, uint64_t conn, char *out, size_t n)
{
    const struct srv_config *cfg = &ctl->srv->cfg;
    if (cfg->public_url) {
        snprintf(out, n, "%s", cfg->public_url);
        return 0;
    }
    char host[256];
    if (hub_conn_host(ctl->hub, conn, host, sizeof(host)) != 0)
        return -1;
    /* The Host header is "name[:port]" or "[v6][:port]": the name, without the websocket port. */
    char *end = host[0] == '[' ? strchr(host, ']') : strchr(host, ':');
    if (host[0] == '[' && end)
        end[1] = '\0';
    else if (host[0] != '[' && end)
        *end = '\0';
    int len = snprintf(out, n, "%s://%s:%lld", cfg->tls_cert ? "https" : "http", host,
                       (long long)cfg->http_port);
    return len > 0 && (size_t)len < n && aproto_api_url_valid(out) ? 0 : -1;
}

size_t ctl__api_urls(struct control *ctl, uint64_t conn, char **urls, size_t max)
{
    char own[APROTO_MAX_URL + 1];
    bool have_own = ctl__api_url(ctl, conn, own, sizeof(own)) == 0;
    char **listed = NULL;
    size_t n_listed = 0, n = 0;
    if (store_server_urls(ctl->db, &listed, &n_listed) < 0)
        TY_WARN("control", "cannot read the servers' REST URLs");
    for (size_t i = 0; i < n_listed; i++) {
        if (n < max && aproto_api_url_valid(listed[i])) {
            if (have_own && strcmp(listed[i], own) == 0)
                have_own = false; /* listed already, in the leader's order */
            urls[n++] = listed[i];
        } else
            free(listed[i]);
    }
    free(listed);
    if (have_own && n < max && (urls[n] = strdup(own)) != NULL)
        n++;
    return n;
}

void ctl__server_heard(struct control *ctl)
{
    const char *url = ctl->srv->cfg.public_url;
    if (url == NULL || util_mono_s() - ctl->last_heard < SERVER_HEARD_S)
        return;
    ctl->last_heard = util_mono_s();
    if (store_server_heard(ctl->db, url, ctl->leading) < 0)
        TY_WARN("control", "cannot write this server's REST URL to the servers table");
}

void ctl__on_artifact_store(struct control *ctl, struct ctl_node *node,
                            const struct aproto_node_msg *m)
{
    const struct aproto_store_status *s = &m->store;
    if (store_node_condition_set(ctl->db, node->id, CTL_CONDITION_STORE,
                                 s->ok ? NULL : s->message) < 0)
        TY_WARN("control", "node %s: its artifact store condition was not stored", node->id);
    if (s->ok) {
        TY_DEBUG("control", "node %s reaches the artifact store at %s", node->id, s->url);
        return;
    }
    TY_WARN("control", "node %s: %s", node->id, s->message);
    int64_t job = 0;
    if (s->job_id && s->attempt >= 0 && util_parse_int64(s->job_id, 1, INT64_MAX, &job) == 0 &&
        store_node_job_event(ctl->db, node->id, job, s->attempt, s->message) < 0)
        TY_WARN("control", "node %s: the event of job %lld was not stored", node->id,
                (long long)job);
}

void ctl__on_disk_full(struct control *ctl, struct ctl_node *node, const struct aproto_node_msg *m)
{
    const struct aproto_disk_full *d = &m->disk_full;
    char text[APROTO_MAX_CHECKPOINT_PATH + APROTO_MAX_DISK_WHAT + 200];
    snprintf(text, sizeof(text),
             "node %s: %s: cannot write %s: No space left on device (ENOSPC); what was written "
             "there for the job was removed",
             node->id, d->what, d->path);
    TY_WARN("control", "job %s attempt %lld: %s", d->job_id, (long long)d->attempt, text);
    int64_t job = 0;
    if (util_parse_int64(d->job_id, 1, INT64_MAX, &job) == 0 &&
        store_node_job_event(ctl->db, node->id, job, d->attempt, text) < 0)
        TY_WARN("control", "node %s: the event of job %lld was not stored", node->id,
                (long long)job);
}

/* Agent message `log` (docs/agent-protocol.md): chunks of workers' output. Every log message the
 * control thread takes from the hub queue in one go is committed in one transaction
 * (store_logs_append: ty_log_append_batch, which skips chunks already stored, so agents may
 * resend freely, and chunks of workers the sending node does not run) and acked after the commit.
 * When the commit fails, the connections of the batch are closed unacked: their agents reconnect
 * and resend from their last acked offset. */
#include "control_internal.h"

#include "agent_proto.h"
#include "log.h"
#include "server.h"
#include "store.h"
#include "util.h"

#include <stdlib.h>
#include <string.h>

void ctl__on_log(struct control *ctl, struct ctl_node *node, uint64_t conn,
                 const struct aproto_node_msg *m)
{
    struct ctl_logs *b = &ctl->logs;
    const struct aproto_log_chunk *c = &m->log;
    int64_t job = 0;
    if (util_parse_int64(c->job_id, 1, INT64_MAX, &job) != 0) {
        TY_BAD_PEER("control", "node %s: log of job '%s', which this server never ran", node->id,
                    c->job_id);
        ctl__send_text(ctl, conn, aproto_msg_ack(m->seq));
        return;
    }
    if (b->n == CTL_LOGS_MAX)
        ctl__flush_logs(ctl);
    if (!b->rows && !(b->rows = json_array()))
        goto oom;
    const char *stream = aproto_log_stream_name(c->stream);
    json_t *body =
        json_pack("{s:I, s:I, s:s, s:I, s:I, s:O}", "rank", (json_int_t)c->rank, "attempt",
                  (json_int_t)c->attempt, "stream", stream, "offset", (json_int_t)c->offset,
                  "bytes", (json_int_t)c->bytes, "lines", (json_t *)c->lines);
    json_t *row =
        body ? json_pack("{s:I, s:s, s:I, s:I, s:s, s:I, s:I, s:I, s:o}", "job_id", (json_int_t)job,
                         "node_id", node->id, "attempt", (json_int_t)c->attempt, "rank",
                         (json_int_t)c->rank, "stream", stream, "log_offset", (json_int_t)c->offset,
                         "log_bytes", (json_int_t)c->bytes, "dropped", (json_int_t)c->dropped,
                         "body", body)
             : NULL;
    if (!row || json_array_append_new(b->rows, row) != 0)
        goto oom;
    b->conn[b->n] = conn;
    b->seq[b->n] = m->seq;
    b->n++;
    return;
oom:
    TY_ERROR("control", "node %s: out of memory queueing a log chunk; reconnecting it", node->id);
    node->conn = 0;
    hub_close(ctl->hub, conn);
}

void ctl__flush_logs(struct control *ctl)
{
    struct ctl_logs *b = &ctl->logs;
    if (b->n == 0)
        return;
    char *text = json_dumps(b->rows, JSON_COMPACT);
    struct store_log_outcome out;
    int qs = text ? store_logs_append(ctl->db, text, ctl->srv->cfg.max_log_bytes_per_job, &out)
                  : DB_HARD_ERROR;
    free(text);
    if (qs >= 0) {
        struct srv_telemetry *t = &ctl->srv->telemetry;
        SRV_COUNT(t, log_lines_ingested, (uint_fast64_t)out.lines);
        SRV_COUNT(t, log_bytes_ingested, (uint_fast64_t)out.bytes);
        SRV_COUNT(t, log_bytes_dropped, (uint_fast64_t)out.dropped);
        TY_DEBUG("control",
                 "%zu log chunk(s): %lld line(s) stored, %lld byte(s) dropped by the cap", b->n,
                 (long long)out.lines, (long long)out.dropped);
    } else {
        TY_WARN("control", "could not store %zu log chunk(s); reconnecting their agents", b->n);
    }
    for (size_t i = 0; i < b->n; i++) {
        struct ctl_node *node = ctl__node_by_conn(ctl, b->conn[i]);
        if (node == NULL)
            continue; /* closed: the agent resends */
        if (qs >= 0) {
            ctl__send_text(ctl, b->conn[i], aproto_msg_ack(b->seq[i]));
        } else {
            node->conn = 0;
            hub_close(ctl->hub, b->conn[i]);
        }
    }
    json_array_clear(b->rows);
    b->n = 0;
}

/* Agent message `report` (docs/agent-protocol.md): a worker's trainyard.report() / ty_report(),
 * relayed by its node's agent from its on-disk spool:
 *
 *   {"type":"report", "seq":<agent event seq>, "job_id", "attempt", "rank", "report_seq":k,
 *    "metrics":{name: number, ...}, "step":n|null, "time":"RFC 3339", "checkpoint_dir":path|null,
 *    "checkpoint_bytes":n|null}
 *
 * The report is committed first (store_report_insert: report row, one metrics row per number,
 * rank 0's numbers as the job's result), then its checkpoint part (on_round_complete:
 * checkpoint_bytes, and checkpoint k once round k is complete), and only then acked. What the
 * server does with each kind of message:
 *
 *   committed, or a resend of a committed one      -> ack (resends change nothing)
 *   malformed (a field missing or of a wrong type) -> logged as the agent's fault, then acked:
 *   or refused by the database for its data           a resend would be refused the same way, and
 *                                                     the agent must not keep it forever
 *   for a worker that does not run on that node    -> logged, acked, dropped (a deleted job)
 *   not committed (database down, out of memory)   -> not acked, and the connection is dropped
 *   no integer seq                                 -> logged; nothing to ack
 *
 * Dropping the connection is what makes "not acked" mean "will be resent": acks are cumulative
 * (an ack of seq covers every event before it), so merely staying silent would let the ack of a
 * later event drop this report from the agent's spool. After the node is detached from the
 * connection, later messages on it are refused ("send register first") and none is acked; the
 * agent reconnects, registers and resends everything not acked, in order.
 *
 * Metric values that are not JSON numbers (strings, booleans, null, arrays, objects) are skipped,
 * here and in the job's result: a metric is a number. Names must be 1..256 bytes. */
#include "control_internal.h"

#include "agent_proto.h"
#include "log.h"
#include "store.h"

#include <ctype.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define REPORT_MAX_NAME_LEN 256
#define REPORT_MAX_PATH_LEN 4096

/* True when `s` is an RFC 3339 date-time: YYYY-MM-DDTHH:MM:SS[.frac](Z|+HH:MM|-HH:MM), 'T' or
 * 't' or ' ' between date and time. Calendar errors (Feb 30) are left to PostgreSQL, which
 * refuses them with SQLSTATE class 22. */
static bool rfc3339_valid(const char *s)
{
    static const char shape[] = "dddd-dd-ddTdd:dd:dd";
    for (size_t i = 0; i < sizeof(shape) - 1; i++) {
        char c = s[i];
        bool ok;
        if (shape[i] == 'd')
            ok = isdigit((unsigned char)c) != 0;
        else if (shape[i] == 'T')
            ok = c == 'T' || c == 't' || c == ' ';
        else
            ok = c == shape[i];
        if (!ok) /* also stops at the terminator: '\0' matches no shape character */
            return false;
    }
    int month = (s[5] - '0') * 10 + (s[6] - '0'), day = (s[8] - '0') * 10 + (s[9] - '0');
    int hour = (s[11] - '0') * 10 + (s[12] - '0'), min = (s[14] - '0') * 10 + (s[15] - '0');
    int sec = (s[17] - '0') * 10 + (s[18] - '0');
    if (month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 || min > 59 || sec > 60)
        return false;
    const char *p = s + sizeof(shape) - 1;
    if (*p == '.') {
        if (!isdigit((unsigned char)p[1]))
            return false;
        for (p++; isdigit((unsigned char)*p); p++)
            ;
    }
    if ((*p == 'Z' || *p == 'z') && p[1] == '\0')
        return true;
    return (*p == '+' || *p == '-') && isdigit((unsigned char)p[1]) &&
           isdigit((unsigned char)p[2]) && p[3] == ':' && isdigit((unsigned char)p[4]) &&
           isdigit((unsigned char)p[5]) && p[6] == '\0';
}

/* Reads integer field `name` within [min, max]. Returns 0 or -1 with `err`. */
static int int_field(json_t *msg, const char *name, int64_t min, int64_t max, int64_t *out,
                     char *err, size_t errlen)
{
    json_t *v = json_object_get(msg, name);
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        snprintf(err, errlen, "'%s' must be an integer from %lld to %lld", name, (long long)min,
                 (long long)max);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

/* Validates the message into *r (strings borrowed from msg) and builds *numbers, a new object
 * of its numeric metrics (caller decrefs); *skipped counts the entries left out. Returns 0, or
 * -1 with the reason in `err`. r->node_id and r->metrics_json are left for the caller. */
static int parse_report(json_t *msg, struct store_report *r, int64_t *step, json_t **numbers,
                        int *skipped, char *err, size_t errlen)
{
    int64_t attempt, rank;
    memset(r, 0, sizeof(*r));
    *numbers = NULL;
    *skipped = 0;
    r->job = ctl__job_id(msg);
    if (r->job <= 0) {
        snprintf(err, errlen, "'job_id' must be a job id");
        return -1;
    }
    if (int_field(msg, "attempt", 0, INT32_MAX, &attempt, err, errlen) != 0 ||
        int_field(msg, "rank", 0, INT32_MAX, &rank, err, errlen) != 0 ||
        int_field(msg, "report_seq", 1, INT64_MAX, &r->seq, err, errlen) != 0)
        return -1;
    r->attempt = (int)attempt;
    r->rank = (int)rank;
    json_t *stepv = json_object_get(msg, "step");
    if (stepv && !json_is_null(stepv)) {
        if (int_field(msg, "step", 0, INT64_MAX, step, err, errlen) != 0)
            return -1;
        r->step = step;
    }
    r->time = json_string_value(json_object_get(msg, "time"));
    if (r->time == NULL || !rfc3339_valid(r->time)) {
        snprintf(err, errlen, "'time' must be an RFC 3339 date-time");
        return -1;
    }
    json_t *dir = json_object_get(msg, "checkpoint_dir");
    if (dir && !json_is_null(dir)) {
        r->checkpoint_dir = json_string_value(dir);
        if (r->checkpoint_dir == NULL || *r->checkpoint_dir == '\0' ||
            strlen(r->checkpoint_dir) > REPORT_MAX_PATH_LEN) {
            snprintf(err, errlen, "'checkpoint_dir' must be null or a path of 1 to %d bytes",
                     REPORT_MAX_PATH_LEN);
            return -1;
        }
    }
    json_t *metrics = json_object_get(msg, "metrics");
    if (!json_is_object(metrics)) {
        snprintf(err, errlen, "'metrics' must be an object");
        return -1;
    }
    *numbers = json_object();
    if (*numbers == NULL) {
        snprintf(err, errlen, "out of memory");
        return -1;
    }
    const char *name;
    json_t *value;
    json_object_foreach(metrics, name, value)
    {
        size_t len = strlen(name);
        if (!json_is_number(value) || len == 0 || len > REPORT_MAX_NAME_LEN) {
            (*skipped)++;
            continue;
        }
        json_object_set(*numbers, name, value);
    }
    return 0;
}

/* The report could not be committed: detach the node from this connection and close it, so that
 * no later ack covers the report and the agent resends it after reconnecting (see the top). */
static void drop_connection(struct control *ctl, struct ctl_node *node, uint64_t conn)
{
    node->conn = 0;
    hub_close(ctl->hub, conn);
}

static void send_ack(struct control *ctl, uint64_t conn, int64_t seq)
{
    ctl__send_text(ctl, conn, agent_msg_ack(seq));
}

/* Checkpoint registration (DESIGN section 4): records this report's checkpoint_bytes and, when
 * `try_register` (round k now complete, or a resend of a report whose registration may have
 * failed), registers checkpoint k of the attempt if every rank made its k-th report and one of
 * them passed a checkpoint_dir (store_checkpoint_round: one row per (job, attempt, k), rank 0's
 * step and metrics, location = the agent-owned directories on each node). Runs before the ack:
 * returns 0 (ack), 1 (refused by the database for its data: log, ack, drop) or -1 (not
 * committed: do not ack, drop the connection so that the agent resends and this runs again). */
static int on_round_complete(struct control *ctl, const struct store_report *r,
                             const int64_t *bytes, bool try_register)
{
    struct store_checkpoint_round in = {r->job, r->seq, r->attempt, r->rank, bytes, try_register};
    bool registered = false;
    char sqlstate[6];
    int qs = store_checkpoint_round(ctl->db, &in, &registered, sqlstate);
    if (qs < 0) {
        bool refused = strncmp(sqlstate, "22", 2) == 0 || strncmp(sqlstate, "23", 2) == 0;
        TY_WARN("control", "job %lld attempt %d: checkpoint %lld not registered (%s%s)",
                (long long)r->job, r->attempt, (long long)r->seq,
                refused ? "refused by the database, SQLSTATE " : "database error",
                refused ? sqlstate : "");
        return refused ? 1 : -1;
    }
    if (registered)
        TY_INFO("control", "job %lld attempt %d: checkpoint %lld registered", (long long)r->job,
                r->attempt, (long long)r->seq);
    return 0;
}

void ctl__on_report(struct control *ctl, uint64_t conn, json_t *msg)
{
    struct ctl_node *node = ctl__node_by_conn(ctl, conn);
    if (node == NULL)
        return; /* the dispatcher refuses unregistered connections before this */
    json_t *seqv = json_object_get(msg, "seq");
    if (!json_is_integer(seqv) || json_integer_value(seqv) < 1) {
        TY_BAD_PEER("control", "node %s: report without an integer seq >= 1; cannot ack it",
                    node->id);
        return;
    }
    int64_t seq = json_integer_value(seqv);
    struct store_report r;
    int64_t step = 0;
    json_t *numbers = NULL;
    int skipped = 0;
    char err[160];
    if (parse_report(msg, &r, &step, &numbers, &skipped, err, sizeof(err)) != 0) {
        json_decref(numbers);
        TY_BAD_PEER("control", "node %s: report (event %lld) dropped: %s", node->id, (long long)seq,
                    err);
        send_ack(ctl, conn, seq);
        return;
    }
    if (skipped > 0)
        TY_DEBUG("control", "job %lld rank %d report %lld: %d non-numeric metrics skipped",
                 (long long)r.job, r.rank, (long long)r.seq, skipped);
    char *metrics_json = json_dumps(numbers, JSON_COMPACT);
    json_decref(numbers);
    if (metrics_json == NULL) {
        TY_ERROR("control", "node %s: out of memory recording report (event %lld)", node->id,
                 (long long)seq);
        drop_connection(ctl, node, conn);
        return;
    }
    r.node_id = node->id;
    r.metrics_json = metrics_json;
    /* checkpoint_bytes (optional): bytes of the agent-owned directory after this part merged. */
    int64_t bytes = 0;
    bool has_bytes = false;
    json_t *bytesv = json_object_get(msg, "checkpoint_bytes");
    if (r.checkpoint_dir && bytesv && !json_is_null(bytesv)) {
        if (int_field(msg, "checkpoint_bytes", 0, INT64_MAX, &bytes, err, sizeof(err)) != 0) {
            free(metrics_json);
            TY_BAD_PEER("control", "node %s: report (event %lld) dropped: %s", node->id,
                        (long long)seq, err);
            send_ack(ctl, conn, seq);
            return;
        }
        has_bytes = true;
    }
    struct store_report_outcome out;
    int qs = store_report_insert(ctl->db, &r, &out);
    free(metrics_json);
    if (qs < 0 && out.refused) {
        TY_BAD_PEER("control",
                    "node %s: report (event %lld) of job %lld rank %d refused by the database "
                    "(SQLSTATE %s); dropped",
                    node->id, (long long)seq, (long long)r.job, r.rank, out.sqlstate);
        send_ack(ctl, conn, seq);
        return;
    }
    if (qs < 0) {
        TY_WARN("control",
                "node %s: could not record report (event %lld); closing the connection so the "
                "agent resends it",
                node->id, (long long)seq);
        drop_connection(ctl, node, conn);
        return;
    }
    if (!out.known_worker)
        TY_INFO("control",
                "node %s: report of job %lld attempt %d rank %d, a worker this node does not "
                "run; dropped",
                node->id, (long long)r.job, r.attempt, r.rank);
    else if (out.duplicate)
        TY_DEBUG("control", "job %lld rank %d report %lld: already recorded", (long long)r.job,
                 r.rank, (long long)r.seq);
    /* A duplicate retries registration too: its first delivery may have committed the report
     * and then failed here, before the ack. */
    bool try_register = out.known_worker && (out.round_complete || out.duplicate);
    if (try_register || (out.known_worker && has_bytes)) {
        int rc = on_round_complete(ctl, &r, has_bytes ? &bytes : NULL, try_register);
        if (rc < 0) {
            drop_connection(ctl, node, conn);
            return;
        }
    }
    send_ack(ctl, conn, seq);
}

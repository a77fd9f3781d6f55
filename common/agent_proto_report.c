/* The agent protocol's `report` message as the server reads it (agent_proto.h, struct
 * aproto_report): a worker's trainyard.report() / ty_report(), relayed by its node's agent
 * from its on-disk spool:
 *
 *   {"type":"report", "seq":<agent event seq>, "job_id", "attempt", "rank", "report_seq":k,
 *    "metrics":{name: value, ...}, "step":n|null, "time":"RFC 3339", "checkpoint_dir":path|null,
 *    "checkpoint_bytes":n|null}
 *
 * A metric's value is any JSON value, as the worker reported it (numbers are charted, the rest
 * shown as they are: docs/report-protocol.md); names outside 1..256 bytes are skipped, not
 * refused. Pure. */
#include "agent_proto_internal.h"

#include "util.h"
#include "util_json.h"

#include <ctype.h>
#include <stdio.h>
#include <string.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

bool aproto_rfc3339_valid(const char *s)
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

/* job_id: the server's job id, as the protocol's decimal string or as an integer. */
static int job_field(const json_t *msg, int64_t *job, char *err, size_t errlen)
{
    json_t *v = json_object_get(msg, "job_id");
    if (json_is_integer(v) && json_integer_value(v) >= 1) {
        *job = json_integer_value(v);
        return 0;
    }
    if (json_is_string(v) && util_parse_int64(json_string_value(v), 1, INT64_MAX, job) == 0)
        return 0;
    return ERR("'job_id' must be a job id");
}

/* The metrics of `metrics` with a valid name into a new object r->values. */
static int values_field(const json_t *msg, struct aproto_report *r, char *err, size_t errlen)
{
    json_t *metrics = json_object_get(msg, "metrics");
    if (!json_is_object(metrics))
        return ERR("'metrics' must be an object");
    r->values = json_object();
    if (r->values == NULL)
        return ERR("out of memory");
    const char *name;
    json_t *value;
    json_object_foreach(metrics, name, value)
    {
        size_t len = strlen(name);
        if (len == 0 || len > APROTO_MAX_METRIC_NAME) {
            r->skipped++;
            continue;
        }
        if (json_object_set(r->values, name, value) != 0)
            return ERR("out of memory");
    }
    return 0;
}

int aproto__parse_report(json_t *msg, struct aproto_report *r, char *err, size_t errlen)
{
    *r = (struct aproto_report){.step = -1, .checkpoint_bytes = -1};
    if (util_json_int(msg, "seq", false, 1, INT64_MAX, &r->seq, err, errlen) < 0 ||
        job_field(msg, &r->job, err, errlen) != 0 ||
        util_json_int(msg, "attempt", false, 0, INT32_MAX, &r->attempt, err, errlen) < 0 ||
        util_json_int(msg, "rank", false, 0, INT32_MAX, &r->rank, err, errlen) < 0 ||
        util_json_int(msg, "report_seq", false, 1, INT64_MAX, &r->report_seq, err, errlen) < 0 ||
        util_json_int(msg, "step", true, 0, INT64_MAX, &r->step, err, errlen) < 0)
        return -1;
    r->time = json_string_value(json_object_get(msg, "time"));
    if (r->time == NULL || !aproto_rfc3339_valid(r->time))
        return ERR("'time' must be an RFC 3339 date-time");
    json_t *dir = json_object_get(msg, "checkpoint_dir");
    if (dir && !json_is_null(dir)) {
        r->checkpoint_dir = json_string_value(dir);
        if (r->checkpoint_dir == NULL || *r->checkpoint_dir == '\0' ||
            strlen(r->checkpoint_dir) != json_string_length(dir) ||
            json_string_length(dir) > APROTO_MAX_CHECKPOINT_PATH)
            return ERR("'checkpoint_dir' must be null or a path of 1 to %d bytes",
                       APROTO_MAX_CHECKPOINT_PATH);
        /* checkpoint_bytes: bytes of the agent-owned directory after this part merged. */
        if (util_json_int(msg, "checkpoint_bytes", true, 0, INT64_MAX, &r->checkpoint_bytes, err,
                          errlen) < 0)
            return -1;
    }
    return values_field(msg, r, err, errlen);
}

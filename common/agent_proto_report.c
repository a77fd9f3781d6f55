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
 * refused. The server reads thousands of these a second (issue 27): a message written plainly is
 * scanned once (json_scan.h) into one allocation, its metrics' text kept as written; any other
 * goes through jansson, which names what is wrong, and is then held the same way. Pure. */
#include "agent_proto_internal.h"

#include "json_scan.h"
#include "util.h"
#include "util_json.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
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

/* ---- one allocation per report ---- */

/* The names of a report's metrics so far: slot[h] is the index + 1 of the metric whose name
 * hashes to h (open addressing, at most half full); on the stack up to 256 names. */
struct names {
    uint32_t *slot;
    size_t cap;
    uint32_t stack[512];
};

/* The slot of `name` among metrics[0..n): where it is, or the empty slot where it goes. */
static size_t names_slot(const struct names *t, const struct aproto_metric *metrics,
                         const char *name)
{
    size_t h = util_fnv1a(UTIL_FNV1A_BASIS, name) & (t->cap - 1);
    while (t->slot[h] != 0 && strcmp(metrics[t->slot[h] - 1].name, name) != 0)
        h = (h + 1) & (t->cap - 1);
    return h;
}

/* Room for metric n + 1 in the table. 0, or -1 when out of memory. */
static int names_grow(struct names *t, const struct aproto_metric *metrics, size_t n)
{
    if (2 * (n + 1) <= t->cap)
        return 0;
    uint32_t *slot = calloc(2 * t->cap, sizeof(*slot));
    if (slot == NULL)
        return -1;
    if (t->slot != t->stack)
        free(t->slot);
    t->slot = slot;
    t->cap *= 2;
    for (size_t k = 0; k < n; k++)
        t->slot[names_slot(t, metrics, metrics[k].name)] = (uint32_t)(k + 1);
    return 0;
}

/* Fills r's metrics, skipped, values_text and owned from `values`, the text of a JSON object (len
 * bytes, valid: scanned, or written by jansson), with a copy of `time` and `dir` (NULL: none)
 * beside. Of a name written twice the last value is kept, where the name came first (as jansson
 * reads it); a name outside 1..APROTO_MAX_METRIC_NAME bytes is skipped. values_text is the text
 * as written, or when a member went, the members kept as written. Refuses (-1, nothing held) a
 * number jansson refuses, and when out of memory. */
static int hold_metrics(struct aproto_report *r, const char *values, size_t len, const char *time,
                        size_t tlen, const char *dir, size_t dlen)
{
    /* the values' text, then the names decoded (each shorter than written), time and dir */
    char *owned = malloc(2 * len + tlen + dlen + 2), *names = NULL;
    size_t cap = 16, n = 0;
    struct aproto_metric *metrics = malloc(cap * sizeof(*metrics));
    struct {
        size_t at, end; /* the member "name": value in `values` */
    } *member = malloc(cap * sizeof(*member));
    struct names t = {.cap = sizeof(t.stack) / sizeof(t.stack[0])};
    memset(t.stack, 0, sizeof(t.stack));
    t.slot = t.stack;
    bool rebuilt = false;
    if (owned == NULL || metrics == NULL || member == NULL)
        goto refuse;
    names = owned + len;
    size_t i = jscan_space(values, len, 1);
    while (i < len && values[i] == '"') {
        size_t at = i, nlen;
        char *name = names;
        i = jscan_string(values, len, i, name, &nlen, NULL);
        i = jscan_space(values, len, jscan_space(values, len, i) + 1); /* past ':' */
        size_t end = jscan_value(values, len, i);
        struct aproto_metric m = {.name = name, .end = end};
        if (values[i] == '-' || (values[i] >= '0' && values[i] <= '9')) {
            bool integer;
            int64_t as_int;
            jscan_number(values, len, i, &integer);
            if (jscan_number_value(values, i, end, integer, &as_int, &m.number) != 0)
                goto refuse;
            m.is_number = true;
        }
        i = jscan_space(values, len, end);
        if (i < len && values[i] == ',')
            i = jscan_space(values, len, i + 1);
        if (nlen == 0 || nlen > APROTO_MAX_METRIC_NAME) {
            r->skipped++;
            rebuilt = true;
            continue;
        }
        name[nlen] = '\0';
        if (names_grow(&t, metrics, n) != 0)
            goto refuse;
        size_t h = names_slot(&t, metrics, name);
        if (t.slot[h] != 0) { /* written again: this value, in the first one's place */
            size_t k = t.slot[h] - 1;
            m.name = metrics[k].name;
            metrics[k] = m;
            member[k].at = at;
            member[k].end = end;
            rebuilt = true;
            continue;
        }
        if (n == cap) {
            void *grown_m = realloc(metrics, 2 * cap * sizeof(*metrics));
            if (grown_m != NULL)
                metrics = grown_m;
            void *grown = grown_m ? realloc(member, 2 * cap * sizeof(*member)) : NULL;
            if (grown == NULL)
                goto refuse;
            member = grown;
            cap *= 2;
        }
        names += nlen + 1;
        member[n].at = at;
        member[n].end = end;
        metrics[n++] = m;
        t.slot[h] = (uint32_t)n;
    }
    if (!rebuilt) {
        memcpy(owned, values, len);
        r->values_len = len;
    } else { /* {"name": value,...} of the members kept, each as written */
        char *p = owned;
        *p++ = '{';
        for (size_t k = 0; k < n; k++) {
            if (k > 0)
                *p++ = ',';
            memcpy(p, values + member[k].at, member[k].end - member[k].at);
            p += member[k].end - member[k].at;
            metrics[k].end = (size_t)(p - owned);
        }
        *p++ = '}';
        r->values_len = (size_t)(p - owned);
    }
    memcpy(names, time, tlen);
    names[tlen] = '\0';
    r->time = names;
    if (dir != NULL) {
        memcpy(names + tlen + 1, dir, dlen);
        names[tlen + 1 + dlen] = '\0';
        r->checkpoint_dir = names + tlen + 1;
    }
    r->metrics = metrics;
    r->n_metrics = n;
    r->values_text = owned;
    r->owned = owned;
    free(member);
    if (t.slot != t.stack)
        free(t.slot);
    return 0;
refuse:
    free(owned);
    free(metrics);
    free(member);
    if (t.slot != t.stack)
        free(t.slot);
    r->skipped = 0;
    return -1;
}

void aproto_report_keep(struct aproto_report *r, size_t n)
{
    if (n >= r->n_metrics)
        return;
    /* the members kept are the text's first ones: the object closes after the last of them */
    size_t end = n > 0 ? r->metrics[n - 1].end : 1;
    r->owned[end] = '}';
    r->values_len = end + 1;
    r->skipped += r->n_metrics - n;
    r->n_metrics = n;
}

void aproto_report_free(struct aproto_report *r)
{
    free(r->metrics);
    free(r->owned);
    r->metrics = NULL;
    r->owned = NULL;
    r->n_metrics = 0;
}

/* ---- the plainly written report, scanned ---- */

enum field {
    F_TYPE,
    F_SEQ,
    F_JOB,
    F_ATTEMPT,
    F_RANK,
    F_REPORT_SEQ,
    F_STEP,
    F_TIME,
    F_DIR,
    F_DIR_BYTES,
    F_METRICS,
    F_N
};
static const char *const field_names[F_N] = {
    "type", "seq",  "job_id",         "attempt",          "rank",   "report_seq",
    "step", "time", "checkpoint_dir", "checkpoint_bytes", "metrics"};

/* Where each field's value is written (text[at..end)); end 0: absent. */
struct span {
    size_t at, end;
};

static bool is_null(const char *text, struct span s)
{
    return s.end == 0 || (s.end - s.at == 4 && memcmp(text + s.at, "null", 4) == 0);
}

/* The integer written at s, when it is one within [min, max]. */
static bool int_at(const char *text, struct span s, int64_t min, int64_t max, int64_t *out)
{
    bool integer;
    double d;
    return s.end != 0 && jscan_number(text, s.end, s.at, &integer) == s.end && integer &&
           jscan_number_value(text, s.at, s.end, true, out, &d) == 0 && *out >= min && *out <= max;
}

/* The string written at s without an escape: its bytes text[*at .. *at + *n). */
static bool plain_string_at(const char *text, struct span s, size_t *at, size_t *n)
{
    bool escaped;
    if (s.end == 0 || text[s.at] != '"' ||
        jscan_string(text, s.end, s.at, NULL, NULL, &escaped) != s.end || escaped)
        return false;
    *at = s.at + 1;
    *n = s.end - s.at - 2;
    return true;
}

int aproto__scan_report(const char *text, size_t len, struct aproto_report *r)
{
    *r = (struct aproto_report){.step = -1, .checkpoint_bytes = -1};
    struct span f[F_N] = {{0}};
    size_t i = jscan_space(text, len, 0);
    if (i >= len || text[i] != '{')
        return -1;
    for (i = jscan_space(text, len, i + 1); i < len && text[i] == '"';) {
        size_t name = i + 1, nlen;
        bool escaped;
        i = jscan_string(text, len, i, NULL, &nlen, &escaped);
        if (i == 0 || escaped)
            return -1;
        i = jscan_space(text, len, i);
        if (i >= len || text[i] != ':')
            return -1;
        size_t at = jscan_space(text, len, i + 1), end = jscan_value(text, len, at);
        if (end == 0)
            return -1;
        for (int k = 0; k < F_N; k++)
            if (strlen(field_names[k]) == nlen && memcmp(text + name, field_names[k], nlen) == 0) {
                if (f[k].end != 0)
                    return -1; /* written twice: jansson's reading keeps the last */
                f[k] = (struct span){at, end};
            }
        if (f[F_TYPE].end == end && (end - at != 8 || memcmp(text + at, "\"report\"", 8) != 0))
            return -1; /* another message (a log chunk...): not scanned further */
        i = jscan_space(text, len, end);
        if (i >= len || text[i] != ',')
            break;
        i = jscan_space(text, len, i + 1);
        if (i >= len || text[i] != '"')
            return -1;
    }
    if (i >= len || text[i] != '}' || jscan_space(text, len, i + 1) != len)
        return -1;
    size_t at, n, tat, tlen, dat = 0, dlen = 0;
    char job[24];
    if (f[F_TYPE].end == 0 || !int_at(text, f[F_SEQ], 1, INT64_MAX, &r->seq) ||
        !int_at(text, f[F_ATTEMPT], 0, INT32_MAX, &r->attempt) ||
        !int_at(text, f[F_RANK], 0, INT32_MAX, &r->rank) ||
        !int_at(text, f[F_REPORT_SEQ], 1, INT64_MAX, &r->report_seq) ||
        (!is_null(text, f[F_STEP]) && !int_at(text, f[F_STEP], 0, INT64_MAX, &r->step)))
        return -1;
    if (plain_string_at(text, f[F_JOB], &at, &n)) {
        if (n >= sizeof(job))
            return -1;
        memcpy(job, text + at, n);
        job[n] = '\0';
        if (util_parse_int64(job, 1, INT64_MAX, &r->job) != 0)
            return -1;
    } else if (!int_at(text, f[F_JOB], 1, INT64_MAX, &r->job))
        return -1;
    char time[64];
    if (!plain_string_at(text, f[F_TIME], &tat, &tlen) || tlen >= sizeof(time))
        return -1;
    memcpy(time, text + tat, tlen);
    time[tlen] = '\0';
    if (!aproto_rfc3339_valid(time))
        return -1;
    bool dir = !is_null(text, f[F_DIR]);
    if (dir && (!plain_string_at(text, f[F_DIR], &dat, &dlen) || dlen == 0 ||
                dlen > APROTO_MAX_CHECKPOINT_PATH ||
                (!is_null(text, f[F_DIR_BYTES]) &&
                 !int_at(text, f[F_DIR_BYTES], 0, INT64_MAX, &r->checkpoint_bytes))))
        return -1;
    if (f[F_METRICS].end == 0 || text[f[F_METRICS].at] != '{')
        return -1;
    return hold_metrics(r, text + f[F_METRICS].at, f[F_METRICS].end - f[F_METRICS].at, time, tlen,
                        dir ? text + dat : NULL, dlen);
}

/* ---- any other report, through jansson ---- */

/* The metrics of `metrics`, held in r (hold_metrics) from their text as jansson writes it. */
static int values_field(const json_t *msg, struct aproto_report *r, char *err, size_t errlen)
{
    json_t *metrics = json_object_get(msg, "metrics");
    if (!json_is_object(metrics))
        return ERR("'metrics' must be an object");
    char *text = json_dumps(metrics, JSON_COMPACT);
    int rc = text == NULL
                 ? -1
                 : hold_metrics(r, text, strlen(text), r->time, strlen(r->time), r->checkpoint_dir,
                                r->checkpoint_dir ? strlen(r->checkpoint_dir) : 0);
    free(text);
    return rc == 0 ? 0 : ERR("out of memory");
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

/*
 * follow_format.c - one line per stream row for the follow commands; no I/O.
 */
#include "follow_format.h"

#include "job_status.h"
#include "output.h"

#include <string.h>

static const json_t *field(const struct stream_msg *m, const char *key)
{
    return json_object_get(m->data, key);
}

static bool is_kind(const struct stream_msg *m, const char *kind)
{
    return m->kind && strcmp(m->kind, kind) == 0;
}

/* Appends " key value" when the field is present and not null. */
static void opt_field(struct strbuf *sb, const struct stream_msg *m, const char *key)
{
    const json_t *v = field(m, key);
    if (v && !json_is_null(v)) {
        sb_printf(sb, " %s ", key);
        out_value(sb, v);
    }
}

/* Appends " name=value" for each metric (only `only` when not NULL); returns how many. */
static int metrics_text(struct strbuf *sb, const json_t *metrics, const char *only)
{
    const char *name;
    json_t *v;
    int n = 0;
    json_object_foreach((json_t *)metrics, name, v)
    {
        if (only && strcmp(name, only) != 0)
            continue;
        sb_puts(sb, " ");
        out_clean(sb, name, strlen(name));
        sb_puts(sb, "=");
        out_value(sb, v);
        n++;
    }
    return n;
}

static void attempt_text(struct strbuf *sb, const struct stream_msg *m)
{
    const json_t *a = field(m, "attempt");
    if (json_is_integer(a))
        sb_printf(sb, " (attempt %lld)", (long long)json_integer_value(a));
    else if (m->attempt > 0)
        sb_printf(sb, " (attempt %lld)", m->attempt);
}

const char *follow_event_status(const struct stream_msg *m)
{
    if (!is_kind(m, "event"))
        return NULL;
    return json_string_value(field(m, "status"));
}

bool follow_is_terminal(const struct stream_msg *m)
{
    const char *status = follow_event_status(m);
    enum job_status s;
    return status && job_status_from_string(status, &s) == 0 && job_status_is_terminal(s);
}

bool follow_format_event(struct strbuf *sb, const struct stream_msg *m)
{
    size_t start = sb->len;
    out_time(sb, m->at);
    if (is_kind(m, "event")) {
        sb_puts(sb, " status ");
        out_value(sb, field(m, "status"));
        attempt_text(sb, m);
        const json_t *msg = field(m, "message");
        if (json_is_string(msg) && json_string_length(msg)) {
            sb_puts(sb, ": ");
            out_value(sb, msg);
        }
    } else if (is_kind(m, "worker")) {
        sb_puts(sb, " worker rank ");
        out_value(sb, field(m, "rank"));
        sb_puts(sb, " ");
        out_value(sb, field(m, "status"));
        attempt_text(sb, m);
        opt_field(sb, m, "node_id");
        opt_field(sb, m, "pid");
        opt_field(sb, m, "exit_code");
        opt_field(sb, m, "signal");
    } else if (is_kind(m, "checkpoint")) {
        sb_puts(sb, " checkpoint ");
        out_value(sb, field(m, "index"));
        sb_puts(sb, " ");
        out_value(sb, field(m, "status"));
        attempt_text(sb, m);
        opt_field(sb, m, "step");
        metrics_text(sb, field(m, "metrics"), NULL);
    } else if (is_kind(m, "log_dropped")) {
        sb_puts(sb, " logs dropped: ");
        out_value(sb, field(m, "bytes"));
        sb_puts(sb, " bytes of rank ");
        out_value(sb, field(m, "rank"));
        sb_puts(sb, " (");
        out_value(sb, field(m, "reason"));
        sb_puts(sb, ")");
    } else {
        sb->len = start;
        if (sb->buf)
            sb->buf[start] = '\0';
        return false;
    }
    return true;
}

/* The rank of a report: its data's, else the row's. */
static long long report_rank(const struct stream_msg *m)
{
    const json_t *r = field(m, "rank");
    return json_is_integer(r) ? json_integer_value(r) : m->rank;
}

bool follow_format_report(struct strbuf *sb, const struct stream_msg *m, const char *name,
                          long rank)
{
    if (!is_kind(m, "report") || (rank >= 0 && report_rank(m) != rank))
        return false;
    struct strbuf line = STRBUF_INIT;
    out_time(&line, m->at);
    sb_printf(&line, " rank %lld step ", report_rank(m));
    out_value(&line, field(m, "step"));
    int n = metrics_text(&line, field(m, "metrics"), name);
    if (n > 0 || !name)
        sb_append(sb, sb_str(&line), line.len);
    sb_free(&line);
    return n > 0 || !name;
}

bool follow_format_rank0_report(struct strbuf *sb, const struct stream_msg *m)
{
    if (!is_kind(m, "report") || report_rank(m) != 0)
        return false;
    sb_puts(sb, "[report] step ");
    out_value(sb, field(m, "step"));
    metrics_text(sb, field(m, "metrics"), NULL);
    return true;
}

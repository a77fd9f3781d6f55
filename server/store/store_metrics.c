/* Metric queries: committing batches of workers' reports (their values, their report rows, their
 * stream rows, the jobs' results), and reading metric series back, downsampled per (name, rank)
 * by downsample.c. A reported value is any JSON value: numbers are what the downsampling weighs
 * (and charts draw); the others (strings, booleans, null, arrays, objects) come back as they were
 * reported, as the value of their points and the first/last of their buckets. */
#include "store.h"

#include "db_query.h"
#include "textbuf.h"
#include "downsample.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* ------------------------------------------------------------------------------------------ */
/* Reports                                                                                      */
/* ------------------------------------------------------------------------------------------ */

struct report_txn {
    const char *batch_json;
    const struct store_report *reports;
    size_t n;
    struct store_report_outcome *out;
    char *sqlstate;
};

/* The batch as ty_report_ingest_batch takes it (store/sql/): a JSON array of objects. NULL on
 * OOM. */
static char *batch_json(const struct store_report *r, size_t n)
{
    json_t *a = json_array();
    for (size_t i = 0; a && i < n; i++) {
        json_t *o = json_pack("{s:I, s:I, s:i, s:i, s:I, s:o, s:o, s:s, s:s, s:O, s:I}", "i",
                              (json_int_t)i, "job_id", (json_int_t)r[i].job, "attempt",
                              r[i].attempt, "rank", r[i].rank, "seq", (json_int_t)r[i].seq, "step",
                              r[i].step ? json_integer(*r[i].step) : json_null(), "checkpoint_dir",
                              r[i].checkpoint_dir ? json_string(r[i].checkpoint_dir) : json_null(),
                              "node_id", r[i].node_id, "time", r[i].time, "metrics",
                              (json_t *)r[i].values, "max_bytes", (json_int_t)r[i].max_bytes);
        if (o == NULL || json_array_append_new(a, o) != 0) {
            json_decref(a);
            a = NULL;
        }
    }
    char *text = a ? json_dumps(a, JSON_COMPACT) : NULL;
    json_decref(a);
    return text;
}

/* One statement: ty_report_ingest_batch stores every report with its values inline (one row per
 * report), its stream row and the jobs' results, and says what happened to each; a fresh report
 * stored all of its values. */
static int report_batch_body(struct db_conn *c, void *arg)
{
    static const struct db_stmt st = {"report_ingest_batch",
                                      "SELECT i, known, fresh, round_ready "
                                      "  FROM ty_report_ingest_batch($1::jsonb)",
                                      1, false};
    struct report_txn *t = arg;
    const char *p[] = {t->batch_json};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs == DB_HARD_ERROR) /* read now: the ROLLBACK clears it */
        snprintf(t->sqlstate, 6, "%s", db_last_sqlstate(c));
    if (qs < 0)
        return qs;
    if ((size_t)qs != t->n) {
        PQclear(res);
        snprintf(t->sqlstate, 6, "XX000");
        return DB_HARD_ERROR; /* our bug: the function answers one row per report */
    }
    for (int row = 0; row < qs; row++) {
        long i = strtol(PQgetvalue(res, row, 0), NULL, 10);
        if (i < 0 || (size_t)i >= t->n)
            continue;
        struct store_report_outcome *o = &t->out[i];
        o->known_worker = PQgetvalue(res, row, 1)[0] == 't';
        o->duplicate = o->known_worker && PQgetvalue(res, row, 2)[0] != 't';
        bool fresh = PQgetvalue(res, row, 2)[0] == 't';
        o->metrics_stored = fresh ? (int)json_object_size(t->reports[i].values) : 0;
        o->round_ready = PQgetvalue(res, row, 3)[0] == 't';
    }
    PQclear(res);
    return qs;
}

int store_reports_insert(struct db_conn *c, const struct store_report *reports, size_t n,
                         struct store_report_outcome *outcome, char sqlstate[6])
{
    sqlstate[0] = '\0';
    memset(outcome, 0, n * sizeof(*outcome));
    if (n == 0)
        return 0;
    char *text = batch_json(reports, n);
    if (text == NULL) {
        snprintf(sqlstate, 6, "53200"); /* out of memory */
        return DB_HARD_ERROR;
    }
    struct report_txn t = {text, reports, n, outcome, sqlstate};
    int qs = db_run_txn(c, report_batch_body, &t);
    free(text);
    return qs;
}

/* ------------------------------------------------------------------------------------------ */
/* Series                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Columns of the series query: the raw row, so that only the points kept are formatted. */
enum { COL_NAME, COL_RANK, COL_ATTEMPT, COL_STEP, COL_VALUE, COL_TIME_US, COL_OTHER };

/* RFC 3339 UTC text of `us` microseconds since the epoch, as ty_ts() writes times. */
static void format_time(int64_t us, char *out, size_t outlen)
{
    int64_t secs = us / 1000000, frac = us % 1000000;
    if (frac < 0) {
        secs--;
        frac += 1000000;
    }
    time_t t = (time_t)secs;
    struct tm tm;
    char date[32] = "";
    if (gmtime_r(&t, &tm))
        strftime(date, sizeof(date), "%Y-%m-%dT%H:%M:%S", &tm);
    snprintf(out, outlen, "%s.%06lldZ", date, (long long)frac);
}

/* Appends ,"superseded":true when row i belongs to an attempt older than the job's current one. */
static void append_superseded(struct textbuf *b, const PGresult *res, int i, long current_attempt)
{
    if (strtol(PQgetvalue(res, i, COL_ATTEMPT), NULL, 10) < current_attempt)
        textbuf_puts(b, ",\"superseded\":true");
}

/* Appends the value of row i: the number (null when not finite), or the JSON text of a value that
 * is not a number (COL_OTHER) when `other` is true. */
static void put_value(struct textbuf *b, const PGresult *res, int i, bool other)
{
    const char *value = PQgetvalue(res, i, COL_VALUE);
    if (other && !PQgetisnull(res, i, COL_OTHER))
        textbuf_puts(b, PQgetvalue(res, i, COL_OTHER));
    else
        textbuf_puts(b, isfinite(strtod(value, NULL)) ? value : "null");
}

/* Appends row i as {"name","rank","attempt","step","value","time"[,"superseded"]}; name_json is
 * the series' name already encoded as a JSON string. */
static void append_point(struct textbuf *b, const PGresult *res, int i, const char *name_json,
                         long current_attempt)
{
    char head[160], time_text[48];
    format_time(strtoll(PQgetvalue(res, i, COL_TIME_US), NULL, 10), time_text, sizeof(time_text));
    textbuf_puts(b, "{\"name\":");
    textbuf_puts(b, name_json);
    snprintf(head, sizeof(head),
             ",\"rank\":%s,\"attempt\":%s,\"step\":%s,\"value\":", PQgetvalue(res, i, COL_RANK),
             PQgetvalue(res, i, COL_ATTEMPT),
             PQgetisnull(res, i, COL_STEP) ? "null" : PQgetvalue(res, i, COL_STEP));
    textbuf_puts(b, head);
    /* PostgreSQL writes float8 as the shortest text that reads back exactly, a JSON number for
     * every finite value, and jsonb as JSON text. */
    put_value(b, res, i, true);
    textbuf_puts(b, ",\"time\":\"");
    textbuf_puts(b, time_text);
    textbuf_puts(b, "\"");
    append_superseded(b, res, i, current_attempt);
    textbuf_puts(b, "}");
}

/* Appends ,"<key>":<value of row i> (put_value). */
static void append_value(struct textbuf *b, const char *key, const PGresult *res, int i, bool other)
{
    textbuf_puts(b, ",\"");
    textbuf_puts(b, key);
    textbuf_puts(b, "\":");
    put_value(b, res, i, other);
}

/* Appends one bucket of a band, rows first..last of the result (`base` + the band's indices):
 * {"name","rank","attempt" (of its last point),"count","start","end" (times of its first and last
 * points),"step_first","step_last","first","last","min","max"[,"superseded"]}. */
static void append_band(struct textbuf *b, const PGresult *res, int base,
                        const struct srv_band *band, const char *name_json, long current_attempt)
{
    int first = base + (int)band->first, last = base + (int)band->last;
    char head[200], start[48], end[48];
    format_time(strtoll(PQgetvalue(res, first, COL_TIME_US), NULL, 10), start, sizeof(start));
    format_time(strtoll(PQgetvalue(res, last, COL_TIME_US), NULL, 10), end, sizeof(end));
    textbuf_puts(b, "{\"name\":");
    textbuf_puts(b, name_json);
    snprintf(head, sizeof(head),
             ",\"rank\":%s,\"attempt\":%s,\"count\":%zu,\"start\":\"%s\",\"end\":\"%s\","
             "\"step_first\":%s,\"step_last\":%s",
             PQgetvalue(res, last, COL_RANK), PQgetvalue(res, last, COL_ATTEMPT), band->count,
             start, end,
             PQgetisnull(res, first, COL_STEP) ? "null" : PQgetvalue(res, first, COL_STEP),
             PQgetisnull(res, last, COL_STEP) ? "null" : PQgetvalue(res, last, COL_STEP));
    textbuf_puts(b, head);
    append_value(b, "first", res, first, true);
    append_value(b, "last", res, last, true);
    append_value(b, "min", res, base + (int)band->min, false);
    append_value(b, "max", res, base + (int)band->max, false);
    append_superseded(b, res, last, current_attempt);
    textbuf_puts(b, "}");
}

/* True when rows a and b belong to the same (name, rank) series. */
static bool same_series(const PGresult *res, int a, int b)
{
    return strcmp(PQgetvalue(res, a, COL_RANK), PQgetvalue(res, b, COL_RANK)) == 0 &&
           strcmp(PQgetvalue(res, a, COL_NAME), PQgetvalue(res, b, COL_NAME)) == 0;
}

/* Downsamples each series of `res` to max_points (points by LTTB, or buckets of a band) and
 * returns the JSON array of what is kept (malloc'd), or NULL on OOM. */
static char *points_json(const PGresult *res, size_t max_points, bool band, long current_attempt)
{
    int nrows = PQntuples(res);
    size_t cap = (size_t)nrows + 1;
    double *x = malloc(cap * sizeof(double));
    double *y = malloc(cap * sizeof(double));
    size_t *idx = malloc(cap * sizeof(size_t));
    struct srv_band *bands = band ? malloc(cap * sizeof(*bands)) : NULL;
    struct textbuf b;
    textbuf_init(&b, 4096);
    if (x == NULL || y == NULL || idx == NULL || b.text == NULL || (band && bands == NULL))
        goto fail;
    for (int i = 0; i < nrows; i++) {
        x[i] = (double)strtoll(PQgetvalue(res, i, COL_TIME_US), NULL, 10) / 1e6;
        y[i] = strtod(PQgetvalue(res, i, COL_VALUE), NULL);
    }
    textbuf_puts(&b, "[");
    bool first = true;
    for (int start = 0, end; start < nrows; start = end) {
        for (end = start + 1; end < nrows && same_series(res, start, end); end++)
            ;
        json_t *name = json_string(PQgetvalue(res, start, COL_NAME));
        char *name_json = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
        json_decref(name);
        if (name_json == NULL)
            goto fail;
        size_t n = band ? srv_downsample_band(y + start, (size_t)(end - start), max_points, bands)
                        : srv_downsample_lttb(x + start, y + start, (size_t)(end - start),
                                              max_points, idx);
        for (size_t k = 0; k < n; k++) {
            if (!first)
                textbuf_puts(&b, ",");
            first = false;
            if (band)
                append_band(&b, res, start, &bands[k], name_json, current_attempt);
            else
                append_point(&b, res, start + (int)idx[k], name_json, current_attempt);
        }
        free(name_json);
    }
    textbuf_puts(&b, "]");
    free(x);
    free(y);
    free(idx);
    free(bands);
    return b.text;
fail:
    free(x);
    free(y);
    free(idx);
    free(bands);
    free(b.text);
    return NULL;
}

int store_metrics_series(struct db_conn *c, int64_t job, const struct store_metrics_query *q,
                         char **json_out)
{
    static const struct db_stmt exists = {
        "metrics_job_attempt", "SELECT attempt FROM jobs WHERE id = $1::bigint", 1, true};
    /* Raw rows, each series' points together, oldest first; the time as integer microseconds
     * (exact, and cheaper than formatting every row in SQL when most are downsampled away).
     * A report holds all of its numbers (reports.metrics, migration 0022): with name= only
     * those keys are looked up in each report of the job (reports_series_idx with rank=). */
    static const struct db_stmt series = {
        "metrics_series",
        "SELECT e.name, r.rank, r.attempt, r.step, ty_metric_value(e.value), "
        "       (extract(epoch FROM r.reported_at) * 1000000)::bigint, "
        "       CASE WHEN jsonb_typeof(e.value) <> 'number' THEN e.value::text END "
        "  FROM reports r "
        "  CROSS JOIN LATERAL ( "
        "        SELECT key AS name, value FROM jsonb_each(r.metrics) WHERE $2::text IS NULL "
        "        UNION ALL "
        "        SELECT n, r.metrics -> n FROM unnest(string_to_array($2::text, ',')) n "
        "         WHERE r.metrics ? n) e "
        " WHERE r.job_id = $1::bigint "
        "   AND ($3::int IS NULL OR r.rank = $3::int) "
        "   AND ($4::int IS NULL OR r.attempt = $4::int) "
        "   AND ($6::bigint IS NULL OR r.step >= $6::bigint) "
        "   AND ($7::bigint IS NULL OR r.step <= $7::bigint) "
        "   AND ($8::bigint IS NULL OR r.reported_at >= "
        "        'epoch'::timestamptz + $8::bigint * interval '1 microsecond') "
        "   AND ($9::bigint IS NULL OR r.reported_at <= "
        "        'epoch'::timestamptz + $9::bigint * interval '1 microsecond') "
        " ORDER BY e.name, r.rank, r.reported_at, r.attempt, r.seq"
        " LIMIT $5::bigint",
        9, true};
    *json_out = NULL;
    char j[32], rank[32], attempt[32], limit[32], step_min[32], step_max[32], time_min[32],
        time_max[32];
    STORE_NUM(j, job);
    STORE_NUM(limit, q->max_rows + 1);
    STORE_NUM(rank, q->rank);
    STORE_NUM(attempt, q->attempt);
    STORE_NUM(step_min, q->step_min);
    STORE_NUM(step_max, q->step_max);
    STORE_NUM(time_min, q->time_min_us);
    STORE_NUM(time_max, q->time_max_us);
    const char *p1[] = {j};
    char *current = NULL;
    int qs = db_exec_text(c, &exists, p1, &current);
    if (qs <= 0)
        return qs;
    long current_attempt = current ? strtol(current, NULL, 10) : 0;
    free(current);
    const char *p2[] = {j,
                        q->names,
                        q->rank >= 0 ? rank : NULL,
                        q->attempt > 0 ? attempt : NULL,
                        q->max_rows > 0 ? limit : NULL,
                        q->step_range ? step_min : NULL,
                        q->step_range ? step_max : NULL,
                        q->time_range && q->time_min_us != INT64_MIN ? time_min : NULL,
                        q->time_range && q->time_max_us != INT64_MAX ? time_max : NULL};
    PGresult *res = NULL;
    qs = db_exec(c, &series, p2, &res);
    if (qs < 0)
        return qs;
    if (q->max_rows > 0 && res != NULL && PQntuples(res) > q->max_rows) {
        PQclear(res);
        if (q->too_many)
            *q->too_many = true;
        *json_out = strdup("[]");
        return *json_out ? DB_ONE_RESULT : DB_HARD_ERROR;
    }
    *json_out =
        points_json(res, q->max_points, q->band, current_attempt); /* PQntuples(NULL) is 0 */
    PQclear(res);
    return *json_out ? DB_ONE_RESULT : DB_HARD_ERROR;
}

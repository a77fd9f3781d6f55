/* Metric queries: committing a worker's report (its numbers, its report row, the job's result),
 * and reading metric series back, downsampled per (name, rank) by downsample.c. */
#include "store.h"

#include "db_query.h"
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
    const struct store_report *in;
    struct store_report_outcome *out;
};

/* One statement, so the report row, every number and the job's result commit together:
 *   w: the worker exists, in that attempt, on the node that relays its report (else nothing);
 *   r: the report row; ON CONFLICT makes a resent report insert nothing, and so nothing below;
 *   m: one metrics row per number;
 *   j: jobs.last_metrics = rank 0's numbers plus "step", when this report is newer (by attempt,
 *      then seq) than the one held;
 * and the last two columns tell whether round k (report seq of every rank) is now complete:
 * `reports` is read from the statement's snapshot, which does not hold r's row, hence + r. */
static int report_body(struct db_conn *c, void *arg)
{
    static const struct db_stmt st = {
        "report_insert",
        "WITH w AS (SELECT 1 FROM workers WHERE job_id = $1::bigint AND attempt = $2::int "
        "             AND rank = $3::int AND node_id = $7::text), "
        "     r AS (INSERT INTO reports (job_id, attempt, rank, seq, step, checkpoint_dir, "
        "                                node_id, reported_at) "
        "           SELECT $1::bigint, $2::int, $3::int, $4::bigint, $5::bigint, $6::text, "
        "                  $7::text, $8::timestamptz FROM w "
        "           ON CONFLICT DO NOTHING "
        "           RETURNING job_id, attempt, rank, seq, step, reported_at), "
        "     m AS (INSERT INTO metrics (job_id, attempt, rank, seq, name, step, value, "
        "                                reported_at) "
        "           SELECT r.job_id, r.attempt, r.rank, r.seq, e.key, r.step, "
        "                  e.value::double precision, r.reported_at "
        "             FROM r, jsonb_each($9::jsonb) e "
        "           ON CONFLICT DO NOTHING RETURNING 1), "
        "     j AS (UPDATE jobs SET last_metrics = CASE WHEN r.step IS NULL THEN $9::jsonb "
        "                          ELSE $9::jsonb || jsonb_build_object('step', r.step) END, "
        "                          last_metrics_attempt = r.attempt, last_metrics_seq = r.seq "
        "             FROM r WHERE jobs.id = r.job_id AND r.rank = 0 "
        "              AND (r.attempt, r.seq) > (coalesce(jobs.last_metrics_attempt, -1), "
        "                                        coalesce(jobs.last_metrics_seq, -1)) "
        "           RETURNING 1) "
        "SELECT (SELECT count(*) FROM w), (SELECT count(*) FROM r), (SELECT count(*) FROM m), "
        "       (SELECT count(*) FROM j), "
        "       (SELECT count(*) FROM reports x WHERE x.job_id = $1::bigint "
        "          AND x.attempt = $2::int AND x.seq = $4::bigint) + (SELECT count(*) FROM r), "
        "       (SELECT world_size FROM attempts WHERE job_id = $1::bigint AND attempt = $2::int)",
        9, false};
    struct report_txn *t = arg;
    const struct store_report *in = t->in;
    struct store_report_outcome *out = t->out;
    memset(out, 0, sizeof(*out));
    char job[32], attempt[32], rank[32], seq[32], step[32];
    STORE_NUM(job, in->job);
    STORE_NUM(attempt, in->attempt);
    STORE_NUM(rank, in->rank);
    STORE_NUM(seq, in->seq);
    if (in->step)
        STORE_NUM(step, *in->step);
    const char *p[] = {job,
                       attempt,
                       rank,
                       seq,
                       in->step ? step : NULL,
                       in->checkpoint_dir,
                       in->node_id,
                       in->time,
                       in->metrics_json};
    PGresult *res = NULL;
    int qs = db_exec(c, &st, p, &res);
    if (qs == DB_HARD_ERROR) {
        /* Class 22 (data exception: a time or number PostgreSQL will not take) and 23
         * (integrity: the job was deleted meanwhile) come from the message itself, so a
         * resend would fail the same way. Read now: the ROLLBACK clears the SQLSTATE. */
        const char *state = db_last_sqlstate(c);
        out->refused = strncmp(state, "22", 2) == 0 || strncmp(state, "23", 2) == 0;
        snprintf(out->sqlstate, sizeof(out->sqlstate), "%s", state);
    }
    if (qs <= 0) {
        PQclear(res); /* db_exec hands over a result even with zero rows */
        return qs;
    }
    out->known_worker = strtol(PQgetvalue(res, 0, 0), NULL, 10) > 0;
    out->duplicate = out->known_worker && strtol(PQgetvalue(res, 0, 1), NULL, 10) == 0;
    out->metrics_stored = (int)strtol(PQgetvalue(res, 0, 2), NULL, 10);
    out->result_updated = strtol(PQgetvalue(res, 0, 3), NULL, 10) > 0;
    long reported = strtol(PQgetvalue(res, 0, 4), NULL, 10);
    long world = PQgetisnull(res, 0, 5) ? 0 : strtol(PQgetvalue(res, 0, 5), NULL, 10);
    out->round_complete = !out->duplicate && out->known_worker && world > 0 && reported >= world;
    PQclear(res);
    return qs;
}

int store_report_insert(struct db_conn *c, const struct store_report *report,
                        struct store_report_outcome *outcome)
{
    struct report_txn t = {report, outcome};
    return db_run_txn(c, report_body, &t);
}

/* ------------------------------------------------------------------------------------------ */
/* Series                                                                                       */
/* ------------------------------------------------------------------------------------------ */

/* Columns of the series query: the raw row, so that only the points kept are formatted. */
enum { COL_NAME, COL_RANK, COL_ATTEMPT, COL_STEP, COL_VALUE, COL_TIME_US };

/* A growing text buffer; on OOM `text` becomes NULL and further appends do nothing. */
struct buf {
    char *text;
    size_t len, cap;
};

static void buf_append(struct buf *b, const char *s, size_t n)
{
    if (b->text == NULL)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap * 2 > b->len + n + 1 ? b->cap * 2 : b->len + n + 1;
        char *t = realloc(b->text, cap);
        if (t == NULL) {
            free(b->text);
            b->text = NULL;
            return;
        }
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
}

static void buf_puts(struct buf *b, const char *s)
{
    buf_append(b, s, strlen(s));
}

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

/* Appends row i as {"name","rank","attempt","step","value","time"}; name_json is the series'
 * name already encoded as a JSON string. */
static void append_point(struct buf *b, const PGresult *res, int i, const char *name_json)
{
    char head[160], time_text[48];
    const char *value = PQgetvalue(res, i, COL_VALUE);
    double v = strtod(value, NULL);
    format_time(strtoll(PQgetvalue(res, i, COL_TIME_US), NULL, 10), time_text, sizeof(time_text));
    buf_puts(b, "{\"name\":");
    buf_puts(b, name_json);
    snprintf(head, sizeof(head),
             ",\"rank\":%s,\"attempt\":%s,\"step\":%s,\"value\":", PQgetvalue(res, i, COL_RANK),
             PQgetvalue(res, i, COL_ATTEMPT),
             PQgetisnull(res, i, COL_STEP) ? "null" : PQgetvalue(res, i, COL_STEP));
    buf_puts(b, head);
    /* PostgreSQL writes float8 as the shortest text that reads back exactly, a JSON number for
     * every finite value; only numbers are stored, so null is for rows written by other means. */
    buf_puts(b, isfinite(v) ? value : "null");
    buf_puts(b, ",\"time\":\"");
    buf_puts(b, time_text);
    buf_puts(b, "\"}");
}

/* True when rows a and b belong to the same (name, rank) series. */
static bool same_series(const PGresult *res, int a, int b)
{
    return strcmp(PQgetvalue(res, a, COL_RANK), PQgetvalue(res, b, COL_RANK)) == 0 &&
           strcmp(PQgetvalue(res, a, COL_NAME), PQgetvalue(res, b, COL_NAME)) == 0;
}

/* Downsamples each series of `res` to max_points and returns the JSON array of the points kept
 * (malloc'd), or NULL on OOM. */
static char *points_json(const PGresult *res, size_t max_points)
{
    int nrows = PQntuples(res);
    size_t cap = (size_t)nrows + 1;
    double *x = malloc(cap * sizeof(double));
    double *y = malloc(cap * sizeof(double));
    size_t *idx = malloc(cap * sizeof(size_t));
    struct buf b = {malloc(4096), 0, 4096};
    if (x == NULL || y == NULL || idx == NULL || b.text == NULL)
        goto fail;
    for (int i = 0; i < nrows; i++) {
        x[i] = (double)strtoll(PQgetvalue(res, i, COL_TIME_US), NULL, 10) / 1e6;
        y[i] = strtod(PQgetvalue(res, i, COL_VALUE), NULL);
    }
    buf_puts(&b, "[");
    bool first = true;
    for (int start = 0, end; start < nrows; start = end) {
        for (end = start + 1; end < nrows && same_series(res, start, end); end++)
            ;
        json_t *name = json_string(PQgetvalue(res, start, COL_NAME));
        char *name_json = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
        json_decref(name);
        if (name_json == NULL)
            goto fail;
        size_t n =
            srv_downsample_lttb(x + start, y + start, (size_t)(end - start), max_points, idx);
        for (size_t k = 0; k < n; k++) {
            if (!first)
                buf_puts(&b, ",");
            first = false;
            append_point(&b, res, start + (int)idx[k], name_json);
        }
        free(name_json);
    }
    buf_puts(&b, "]");
    free(x);
    free(y);
    free(idx);
    return b.text;
fail:
    free(x);
    free(y);
    free(idx);
    free(b.text);
    return NULL;
}

int store_metrics_series(struct db_conn *c, int64_t job, const struct store_metrics_query *q,
                         char **json_out)
{
    static const struct db_stmt exists = {"metrics_job_exists",
                                          "SELECT 1 FROM jobs WHERE id = $1::bigint", 1, true};
    /* Raw rows, each series' points together, oldest first; the time as integer microseconds
     * (exact, and cheaper than formatting every row in SQL when most are downsampled away). */
    static const struct db_stmt series = {
        "metrics_series",
        "SELECT m.name, m.rank, m.attempt, m.step, m.value, "
        "       (extract(epoch FROM m.reported_at) * 1000000)::bigint "
        "  FROM metrics m "
        " WHERE m.job_id = $1::bigint "
        "   AND ($2::text IS NULL OR m.name = ANY (string_to_array($2::text, ','))) "
        "   AND ($3::int IS NULL OR m.rank = $3::int) "
        "   AND ($4::int IS NULL OR m.attempt = $4::int) "
        " ORDER BY m.name, m.rank, m.reported_at, m.attempt, m.seq",
        4, true};
    *json_out = NULL;
    char j[32], rank[32], attempt[32];
    STORE_NUM(j, job);
    STORE_NUM(rank, q->rank);
    STORE_NUM(attempt, q->attempt);
    const char *p1[] = {j};
    int qs = db_exec(c, &exists, p1, NULL);
    if (qs <= 0)
        return qs;
    const char *p2[] = {j, q->names, q->rank >= 0 ? rank : NULL, q->attempt > 0 ? attempt : NULL};
    PGresult *res = NULL;
    qs = db_exec(c, &series, p2, &res);
    if (qs < 0)
        return qs;
    *json_out = points_json(res, q->max_points); /* PQntuples(NULL) is 0 */
    PQclear(res);
    return *json_out ? DB_ONE_RESULT : DB_HARD_ERROR;
}

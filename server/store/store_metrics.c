/* Metric queries: committing batches of workers' reports (their values, their report rows, their
 * stream rows, the jobs' results), and reading metric series back, downsampled per (name, rank)
 * by downsample.c. A reported value is any JSON value: numbers are what the downsampling weighs
 * (and charts draw); the others (strings, booleans, null, arrays, objects) come back as they were
 * reported, as the value of their points and the first/last of their buckets. */
#include "store.h"

#include "db_array.h"
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

/* The batch as ty_report_ingest_batch takes it (store/sql/): one array per column, sent in
 * binary (db_array.h), so that PostgreSQL parses each report's values on its own. */
enum {
    B_JOB,
    B_ATTEMPT,
    B_RANK,
    B_SEQ,
    B_STEP,
    B_CHECKPOINT_DIR,
    B_NODE,
    B_TIME,
    B_METRICS,
    B_METRICS_BYTES,
    B_MAX_BYTES,
    B_NAME,    /* the names listed (NULL: none sent) */
    B_NAME_AT, /* and their reports' places in the batch */
    B_FB_JOB,  /* the blocks summed up by the caller (NULL: none sent), one per block */
    B_FB_ATTEMPT,
    B_FB_RANK,
    B_FB_BLOCK,
    B_FB_REPORTS,
    B_FR_AT, /* and their rows */
    B_FR_NAME,
    B_FR_COUNT,
    B_FR_SEQ_FIRST,
    B_FR_SEQ_LAST,
    B_FR_START,
    B_FR_END,
    B_FR_STEP_FIRST,
    B_FR_STEP_LAST,
    B_FR_V_FIRST,
    B_FR_V_LAST,
    B_FR_V_MIN,
    B_FR_V_MAX,
    B_COLS
};
struct report_batch {
    struct db_array col[B_COLS];
    const char *values[B_COLS];
    int lengths[B_COLS], formats[B_COLS];
};

static const unsigned batch_oids[B_COLS] = {
    [B_JOB] = DB_OID_INT8,          [B_ATTEMPT] = DB_OID_INT4,
    [B_RANK] = DB_OID_INT4,         [B_SEQ] = DB_OID_INT8,
    [B_STEP] = DB_OID_INT8,         [B_CHECKPOINT_DIR] = DB_OID_TEXT,
    [B_NODE] = DB_OID_TEXT,         [B_TIME] = DB_OID_TEXT,
    [B_METRICS] = DB_OID_JSONB,     [B_METRICS_BYTES] = DB_OID_INT8,
    [B_MAX_BYTES] = DB_OID_INT8,    [B_NAME] = DB_OID_TEXT,
    [B_NAME_AT] = DB_OID_INT4,      [B_FB_JOB] = DB_OID_INT8,
    [B_FB_ATTEMPT] = DB_OID_INT4,   [B_FB_RANK] = DB_OID_INT4,
    [B_FB_BLOCK] = DB_OID_INT8,     [B_FB_REPORTS] = DB_OID_INT4,
    [B_FR_AT] = DB_OID_INT4,        [B_FR_NAME] = DB_OID_TEXT,
    [B_FR_COUNT] = DB_OID_INT8,     [B_FR_SEQ_FIRST] = DB_OID_INT8,
    [B_FR_SEQ_LAST] = DB_OID_INT8,  [B_FR_START] = DB_OID_TEXT,
    [B_FR_END] = DB_OID_TEXT,       [B_FR_STEP_FIRST] = DB_OID_INT8,
    [B_FR_STEP_LAST] = DB_OID_INT8, [B_FR_V_FIRST] = DB_OID_FLOAT8,
    [B_FR_V_LAST] = DB_OID_FLOAT8,  [B_FR_V_MIN] = DB_OID_FLOAT8,
    [B_FR_V_MAX] = DB_OID_FLOAT8,
};

static void batch_free(struct report_batch *rb)
{
    for (int k = 0; k < B_COLS; k++)
        free(rb->col[k].b.text);
}

static void put_text(struct db_array *a, const char *s)
{
    db_array_text(a, s, strlen(s));
}

static void put_step(struct db_array *a, int64_t step)
{
    if (step >= 0)
        db_array_int8(a, step);
    else
        db_array_null(a);
}

/* Encodes the blocks `fb` into rb's B_FB_* and B_FR_* columns (begun). */
static void blocks_encode(struct report_batch *rb, const struct store_report_blocks *fb)
{
    struct db_array *c = rb->col;
    for (size_t k = 0; k < fb->n; k++) {
        const struct store_block *b = &fb->block[k];
        db_array_int8(&c[B_FB_JOB], b->job);
        db_array_int4(&c[B_FB_ATTEMPT], b->attempt);
        db_array_int4(&c[B_FB_RANK], b->rank);
        db_array_int8(&c[B_FB_BLOCK], b->block);
        db_array_int4(&c[B_FB_REPORTS], b->reports);
    }
    for (size_t k = 0; k < fb->nrows; k++) {
        const struct store_block_row *r = &fb->row[k];
        db_array_int4(&c[B_FR_AT], (int32_t)r->at);
        put_text(&c[B_FR_NAME], fb->text + r->name);
        db_array_int8(&c[B_FR_COUNT], r->count);
        db_array_int8(&c[B_FR_SEQ_FIRST], r->seq_first);
        db_array_int8(&c[B_FR_SEQ_LAST], r->seq_last);
        put_text(&c[B_FR_START], fb->text + r->start_at);
        put_text(&c[B_FR_END], fb->text + r->end_at);
        put_step(&c[B_FR_STEP_FIRST], r->step_first);
        put_step(&c[B_FR_STEP_LAST], r->step_last);
        db_array_float8(&c[B_FR_V_FIRST], r->v_first);
        db_array_float8(&c[B_FR_V_LAST], r->v_last);
        db_array_float8(&c[B_FR_V_MIN], r->v_min);
        db_array_float8(&c[B_FR_V_MAX], r->v_max);
    }
}

/* Encodes reports r[0..n), `names` and `fb` (NULL: none) into rb: each report's values as its
 * message wrote them (agent_proto.h: values_text). 0, or -1 when out of memory (rb is then
 * freed). */
static int batch_encode(struct report_batch *rb, const struct store_report *r, size_t n,
                        const struct store_report_names *names,
                        const struct store_report_blocks *fb)
{
    struct db_array *c = rb->col;
    for (int k = 0; k < B_COLS; k++)
        db_array_begin(&c[k], batch_oids[k]);
    for (size_t i = 0; i < n; i++) {
        db_array_int8(&c[B_JOB], r[i].job);
        db_array_int4(&c[B_ATTEMPT], r[i].attempt);
        db_array_int4(&c[B_RANK], r[i].rank);
        db_array_int8(&c[B_SEQ], r[i].seq);
        if (r[i].step)
            db_array_int8(&c[B_STEP], *r[i].step);
        else
            db_array_null(&c[B_STEP]);
        if (r[i].checkpoint_dir)
            db_array_text(&c[B_CHECKPOINT_DIR], r[i].checkpoint_dir, strlen(r[i].checkpoint_dir));
        else
            db_array_null(&c[B_CHECKPOINT_DIR]);
        db_array_text(&c[B_NODE], r[i].node_id, strlen(r[i].node_id));
        db_array_text(&c[B_TIME], r[i].time, strlen(r[i].time));
        db_array_jsonb(&c[B_METRICS], r[i].values_text, r[i].values_len);
        db_array_int8(&c[B_METRICS_BYTES], (int64_t)r[i].values_len);
        db_array_int8(&c[B_MAX_BYTES], r[i].max_bytes);
    }
    for (size_t k = 0; names && k < names->n; k++) {
        db_array_text(&c[B_NAME], names->name[k], strlen(names->name[k]));
        db_array_int4(&c[B_NAME_AT], (int32_t)names->at[k]);
    }
    bool no_blocks = fb == NULL || fb->n == 0;
    if (!no_blocks)
        blocks_encode(rb, fb);
    int failed = 0;
    for (int k = 0; k < B_COLS; k++) {
        failed |= db_array_end(&c[k]);
        bool none =
            (names == NULL && (k == B_NAME || k == B_NAME_AT)) || (no_blocks && k >= B_FB_JOB);
        rb->values[k] = none ? NULL : c[k].b.text;
        rb->lengths[k] = (int)c[k].b.len;
        rb->formats[k] = 1;
    }
    if (failed)
        batch_free(rb);
    return failed ? -1 : 0;
}

struct report_txn {
    const struct report_batch *batch;
    const struct store_report *reports;
    size_t n;
    struct store_report_outcome *out;
    char *sqlstate;
};

/* One statement: ty_report_ingest_batch stores every report with its values inline (one row per
 * report), its stream row and the jobs' results, and says what happened to each; a fresh report
 * stored all of its values. */
static const struct db_stmt report_batch_st = {
    "report_ingest_batch",
    "SELECT i, known, fresh, round_ready "
    "  FROM ty_report_ingest_batch($1::bigint[], $2::integer[], $3::integer[], $4::bigint[], "
    "                              $5::bigint[], $6::text[], $7::text[], $8::text[], "
    "                              $9::jsonb[], $10::bigint[], $11::bigint[], $12::text[], "
    "                              $13::integer[], $14::bigint[], $15::integer[], "
    "                              $16::integer[], $17::bigint[], $18::integer[], "
    "                              $19::integer[], $20::text[], $21::bigint[], $22::bigint[], "
    "                              $23::bigint[], $24::text[], $25::text[], $26::bigint[], "
    "                              $27::bigint[], $28::float8[], $29::float8[], $30::float8[], "
    "                              $31::float8[])",
    B_COLS, false};

/* Reads the batch's result (qs, res: db_exec's) into t->out. */
static int read_outcomes(struct db_conn *c, struct report_txn *t, int qs, PGresult *res)
{
    if (qs == DB_HARD_ERROR) /* read now: a ROLLBACK (db_run_txn) clears it */
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
        o->metrics_stored = fresh ? (int)t->reports[i].n_metrics : 0;
        o->round_ready = PQgetvalue(res, row, 3)[0] == 't';
    }
    PQclear(res);
    return qs;
}

static int report_batch_body(struct db_conn *c, void *arg)
{
    struct report_txn *t = arg;
    const struct report_batch *rb = t->batch;
    PGresult *res = NULL;
    int qs = db_exec_params(c, &report_batch_st, rb->values, rb->lengths, rb->formats, &res);
    return read_outcomes(c, t, qs, res);
}

int store_reports_insert(struct db_conn *c, const struct store_report *reports, size_t n,
                         const struct store_report_names *names,
                         const struct store_report_blocks *blocks,
                         struct store_report_outcome *outcome, char sqlstate[6])
{
    sqlstate[0] = '\0';
    memset(outcome, 0, n * sizeof(*outcome));
    if (n == 0)
        return 0;
    struct report_batch rb;
    if (batch_encode(&rb, reports, n, names, blocks) != 0) {
        snprintf(sqlstate, 6, "53200"); /* out of memory */
        return DB_HARD_ERROR;
    }
    struct report_txn t = {&rb, reports, n, outcome, sqlstate};
    int qs = db_run_txn(c, report_batch_body, &t);
    batch_free(&rb);
    return qs;
}

int store_reports_send(struct db_conn *c, const struct store_report *reports, size_t n,
                       const struct store_report_names *names,
                       const struct store_report_blocks *blocks)
{
    struct report_batch rb;
    if (batch_encode(&rb, reports, n, names, blocks) != 0)
        return DB_HARD_ERROR;
    int qs = db_send_params(c, &report_batch_st, rb.values, rb.lengths, rb.formats);
    batch_free(&rb);
    return qs;
}

int store_reports_collect(struct db_conn *c, const struct store_report *reports, size_t n,
                          struct store_report_outcome *outcome, char sqlstate[6])
{
    sqlstate[0] = '\0';
    memset(outcome, 0, n * sizeof(*outcome));
    struct report_txn t = {NULL, reports, n, outcome, sqlstate};
    PGresult *res = NULL;
    int qs = db_collect(c, &report_batch_st, &res);
    return read_outcomes(c, &t, qs, res);
}

bool store_reports_done(struct db_conn *c)
{
    return db_sent_done(c);
}

int store_reports_socket(struct db_conn *c)
{
    return db_socket(c);
}

int store_report_blocks_fill(struct db_conn *c, int max_series, int *moved)
{
    static const struct db_stmt st = {"report_blocks_fill",
                                      "SELECT ty_report_blocks_fill($1::integer)", 1, false};
    char limit[32];
    snprintf(limit, sizeof(limit), "%d", max_series);
    const char *p[] = {limit};
    char *v = NULL;
    int qs = db_exec_text(c, &st, p, &v);
    *moved = v ? (int)strtol(v, NULL, 10) : 0;
    free(v);
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

/* True when rows a and b belong to the same (name, rank) series. */
static bool same_series(const PGresult *res, int a, int b)
{
    return strcmp(PQgetvalue(res, a, COL_RANK), PQgetvalue(res, b, COL_RANK)) == 0 &&
           strcmp(PQgetvalue(res, a, COL_NAME), PQgetvalue(res, b, COL_NAME)) == 0;
}

/* Downsamples each series of `res` to max_points points by LTTB and returns the JSON array of
 * what is kept (malloc'd), or NULL on OOM. */
static char *points_json(const PGresult *res, size_t max_points, long current_attempt)
{
    int nrows = PQntuples(res);
    size_t cap = (size_t)nrows + 1;
    double *x = malloc(cap * sizeof(double));
    double *y = malloc(cap * sizeof(double));
    size_t *idx = malloc(cap * sizeof(size_t));
    struct textbuf b;
    textbuf_init(&b, 4096);
    if (x == NULL || y == NULL || idx == NULL || b.text == NULL)
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
        size_t n =
            srv_downsample_lttb(x + start, y + start, (size_t)(end - start), max_points, idx);
        for (size_t k = 0; k < n; k++) {
            if (!first)
                textbuf_puts(&b, ",");
            first = false;
            append_point(&b, res, start + (int)idx[k], name_json, current_attempt);
        }
        free(name_json);
    }
    textbuf_puts(&b, "]");
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

/* The rows of the series query, shared by both modes: each (name, rank) of the job's reports
 * that carry that name, looked up by the names the job reported (report_names, migration 0043)
 * rather than by expanding every report (jsonb_each was most of a chart's read). $1 job, $2
 * names (comma separated) or NULL, $3 rank, $4 attempt, $6..$9 the step and time ranges. */
#define SERIES_ROWS                                                                                \
    "SELECT n.name, r.rank, r.attempt, r.seq, r.step, r.reported_at, r.metrics -> n.name AS jv "   \
    "  FROM report_names n JOIN reports r ON r.job_id = n.job_id AND r.metrics ? n.name "          \
    " WHERE n.job_id = $1::bigint AND r.job_id = $1::bigint "                                      \
    "   AND ($2::text IS NULL OR n.name = ANY (string_to_array($2::text, ','))) "                  \
    "   AND ($3::int IS NULL OR r.rank = $3::int) "                                                \
    "   AND ($4::int IS NULL OR r.attempt = $4::int) "                                             \
    "   AND ($6::bigint IS NULL OR r.step >= $6::bigint) "                                         \
    "   AND ($7::bigint IS NULL OR r.step <= $7::bigint) "                                         \
    "   AND ($8::bigint IS NULL OR r.reported_at >= "                                              \
    "        'epoch'::timestamptz + $8::bigint * interval '1 microsecond') "                       \
    "   AND ($9::bigint IS NULL OR r.reported_at <= "                                              \
    "        'epoch'::timestamptz + $9::bigint * interval '1 microsecond') "

/* Cuts the rows of CTE n (i: 0-based index within its series, total: the series' count) into
 * min(total, $5) buckets of consecutive rows, as even as integers allow: f adds each row's bucket
 * k and whether it is its bucket's first or last. Used over points and over report_blocks. */
#define BUCKET_CUT                                                                                 \
    "), b AS ("                                                                                    \
    "  SELECT n.*, ((i + 1) * least(total, $5::bigint) - 1) / total AS k,"                         \
    "         least(total, $5::bigint) AS nb FROM n"                                               \
    "), f AS ("                                                                                    \
    "  SELECT b.*, i = k * total / nb AS is_first, i = (k + 1) * total / nb - 1 AS is_last"        \
    "    FROM b"                                                                                   \
    ") "

/* Band columns: one row per bucket, ordered by name, rank, bucket. */
enum {
    BCOL_NAME,
    BCOL_RANK,
    BCOL_ATTEMPT,
    BCOL_COUNT,
    BCOL_START_US,
    BCOL_END_US,
    BCOL_STEP_FIRST,
    BCOL_STEP_LAST,
    BCOL_FIRST,
    BCOL_LAST,
    BCOL_MIN,
    BCOL_MAX,
    BCOL_BLOCKS /* the blocks query only: how many blocks its series has */
};

/* Appends column col of row i: its text, or null when NULL. */
static void put_col(struct textbuf *b, const PGresult *res, int i, int col)
{
    textbuf_puts(b, PQgetisnull(res, i, col) ? "null" : PQgetvalue(res, i, col));
}

/* The JSON array of the buckets the band query made (malloc'd): {"name","rank","attempt" (of its
 * last point),"count","start","end" (times of its first and last points),"step_first",
 * "step_last","first","last","min","max"[,"superseded"]}, or NULL on OOM. *rows: the points they
 * hold together. */
static char *bands_json(const PGresult *res, long current_attempt, int64_t *rows)
{
    struct textbuf b;
    textbuf_init(&b, 4096);
    if (b.text == NULL)
        return NULL;
    textbuf_puts(&b, "[");
    char *name_json = NULL;
    *rows = 0;
    for (int i = 0; i < PQntuples(res); i++) {
        if (i == 0 || strcmp(PQgetvalue(res, i, BCOL_NAME), PQgetvalue(res, i - 1, BCOL_NAME))) {
            free(name_json);
            json_t *name = json_string(PQgetvalue(res, i, BCOL_NAME));
            name_json = name ? json_dumps(name, JSON_ENCODE_ANY) : NULL;
            json_decref(name);
            if (name_json == NULL) {
                free(b.text);
                return NULL;
            }
        }
        char head[240], start[48], end[48];
        format_time(strtoll(PQgetvalue(res, i, BCOL_START_US), NULL, 10), start, sizeof(start));
        format_time(strtoll(PQgetvalue(res, i, BCOL_END_US), NULL, 10), end, sizeof(end));
        long attempt = strtol(PQgetvalue(res, i, BCOL_ATTEMPT), NULL, 10);
        *rows += strtoll(PQgetvalue(res, i, BCOL_COUNT), NULL, 10);
        textbuf_puts(&b, i ? ",{\"name\":" : "{\"name\":");
        textbuf_puts(&b, name_json);
        snprintf(head, sizeof(head),
                 ",\"rank\":%s,\"attempt\":%ld,\"count\":%s,\"start\":\"%s\",\"end\":\"%s\","
                 "\"step_first\":",
                 PQgetvalue(res, i, BCOL_RANK), attempt, PQgetvalue(res, i, BCOL_COUNT), start,
                 end);
        textbuf_puts(&b, head);
        put_col(&b, res, i, BCOL_STEP_FIRST);
        textbuf_puts(&b, ",\"step_last\":");
        put_col(&b, res, i, BCOL_STEP_LAST);
        textbuf_puts(&b, ",\"first\":");
        put_col(&b, res, i, BCOL_FIRST);
        textbuf_puts(&b, ",\"last\":");
        put_col(&b, res, i, BCOL_LAST);
        textbuf_puts(&b, ",\"min\":");
        put_col(&b, res, i, BCOL_MIN);
        textbuf_puts(&b, ",\"max\":");
        put_col(&b, res, i, BCOL_MAX);
        if (attempt < current_attempt)
            textbuf_puts(&b, ",\"superseded\":true");
        textbuf_puts(&b, "}");
    }
    free(name_json);
    textbuf_puts(&b, "]");
    return b.text;
}

/* True when every series of the blocks query's result has at least 2 blocks per bucket (so at
 * least 32 points), where cutting at block boundaries keeps buckets of nearly equal count (within
 * 16 points); a shorter series is cut from its points, exactly. */
static bool blocks_enough(const PGresult *res, size_t max_points)
{
    for (int i = 0; i < PQntuples(res); i++)
        if (strtoull(PQgetvalue(res, i, BCOL_BLOCKS), NULL, 10) < 2 * max_points)
            return false;
    return true;
}

int store_metrics_series(struct db_conn *c, int64_t job, const struct store_metrics_query *q,
                         char **json_out)
{
    static const struct db_stmt exists = {
        "metrics_job_attempt", "SELECT attempt FROM jobs WHERE id = $1::bigint", 1, true};
    /* Raw rows, each series' points together, oldest first; the time as integer microseconds
     * (exact, and cheaper than formatting every row in SQL when most are downsampled away). */
    static const struct db_stmt series = {
        "metrics_series",
        "SELECT name, rank, attempt, step, ty_metric_value(jv), "
        "       (extract(epoch FROM reported_at) * 1000000)::bigint, "
        "       CASE WHEN jsonb_typeof(jv) <> 'number' THEN jv::text END "
        "  FROM (" SERIES_ROWS ") e "
        " ORDER BY name, rank, reported_at, attempt, seq"
        " LIMIT $5::bigint",
        9, true};
    /* A band is cut in PostgreSQL: only its buckets travel (a million points are 600 rows per
     * series, not a million). Bucket k of a series of `total` points (nb = least(total, $5)
     * buckets) holds its points i (0-based, oldest first) with floor(k * total / nb) <= i <
     * floor((k + 1) * total / nb), consecutive, of (almost) equal count; min and max ignore values
     * that are not finite. */
    static const struct db_stmt band = {
        "metrics_band",
        "WITH n AS ("
        "  SELECT e.*, ty_metric_value(jv) AS v,"
        "         row_number() OVER (PARTITION BY name, rank"
        "                            ORDER BY reported_at, attempt, seq) - 1 AS i,"
        "         count(*) OVER (PARTITION BY name, rank) AS total"
        "    FROM (" SERIES_ROWS ") e" BUCKET_CUT
        "SELECT name, rank, max(attempt) FILTER (WHERE is_last), count(*),"
        "       min((extract(epoch FROM reported_at) * 1000000)::bigint) FILTER (WHERE is_first),"
        "       max((extract(epoch FROM reported_at) * 1000000)::bigint) FILTER (WHERE is_last),"
        "       min(step) FILTER (WHERE is_first), max(step) FILTER (WHERE is_last),"
        "       min(ty_metric_text(jv)) FILTER (WHERE is_first),"
        "       min(ty_metric_text(jv)) FILTER (WHERE is_last),"
        "       min(v) FILTER (WHERE v NOT IN ('NaN', 'Infinity', '-Infinity')),"
        "       max(v) FILTER (WHERE v NOT IN ('NaN', 'Infinity', '-Infinity'))"
        "  FROM f GROUP BY name, rank, k ORDER BY name, rank, k",
        9, true};
    /* The same buckets made of report_blocks (migration 0046): 16 reports per row, so a long
     * series reads a row per 16 points; the blocks of a (name, rank) are numbered and cut as the
     * points are above, in (attempt, block) order, so that a bucket holds whole blocks. Stored
     * blocks are taken below each series' block_next (migration 0047); from there on (blocks the
     * leader's maintenance has not stored yet, or must sum up again since a report came late,
     * ty_reports_added) they are summed up here from their reports, exactly as they will be
     * stored, so that a read right after any writer's insert sees every report. Used for a band
     * without a step or time range when every series has at least 2 blocks per bucket
     * (blocks_enough); zooms and short series are cut from their points. */
    static const struct db_stmt blocks = {
        "metrics_band_blocks",
        "WITH blk AS ("
        "  SELECT b.* FROM report_blocks b JOIN report_series s"
        "    ON s.job_id = b.job_id AND s.attempt = b.attempt AND s.rank = b.rank"
        "   WHERE b.job_id = $1::bigint AND b.block < s.block_next"
        "     AND ($3::int IS NULL OR b.rank = $3::int)"
        "     AND ($4::int IS NULL OR b.attempt = $4::int)"
        "  UNION ALL"
        "  SELECT e.* FROM report_series s"
        "   CROSS JOIN LATERAL ty_report_blocks_of(s.job_id, s.attempt, s.rank, s.block_next,"
        "                                          NULL) e"
        "   WHERE s.job_id = $1::bigint"
        "     AND ($3::int IS NULL OR s.rank = $3::int)"
        "     AND ($4::int IS NULL OR s.attempt = $4::int)"
        "), n AS ("
        "  SELECT b.*, row_number() OVER (PARTITION BY rank, name"
        "                                 ORDER BY attempt, block) - 1 AS i,"
        "         count(*) OVER (PARTITION BY rank, name) AS total"
        "    FROM blk b"
        "   WHERE ($2::text IS NULL OR name = ANY (string_to_array($2::text, ',')))" BUCKET_CUT
        "SELECT name, rank, max(attempt) FILTER (WHERE is_last), sum(count),"
        "       min((extract(epoch FROM start_at) * 1000000)::bigint) FILTER (WHERE is_first),"
        "       max((extract(epoch FROM end_at) * 1000000)::bigint) FILTER (WHERE is_last),"
        "       min(step_first) FILTER (WHERE is_first), max(step_last) FILTER (WHERE is_last),"
        "       min(v_first) FILTER (WHERE is_first), min(v_last) FILTER (WHERE is_last),"
        "       min(v_min), max(v_max), min(total)"
        "  FROM f GROUP BY rank, name, k ORDER BY name, rank, k",
        5, true};
    *json_out = NULL;
    char j[32], rank[32], attempt[32], limit[32], step_min[32], step_max[32], time_min[32],
        time_max[32];
    STORE_NUM(j, job);
    STORE_NUM(limit, q->band ? (int64_t)q->max_points : q->max_rows + 1);
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
                        q->band || q->max_rows > 0 ? limit : NULL,
                        q->step_range ? step_min : NULL,
                        q->step_range ? step_max : NULL,
                        q->time_range && q->time_min_us != INT64_MIN ? time_min : NULL,
                        q->time_range && q->time_max_us != INT64_MAX ? time_max : NULL};
    PGresult *res = NULL;
    if (q->band && !q->step_range && !q->time_range) {
        qs = db_exec(c, &blocks, p2, &res);
        if (qs < 0)
            return qs;
        if (qs == 0 || !blocks_enough(res, q->max_points)) {
            PQclear(res);
            res = NULL;
        }
    }
    if (res == NULL) {
        qs = db_exec(c, q->band ? &band : &series, p2, &res);
        if (qs < 0)
            return qs;
    }
    if (q->band) {
        int64_t rows = 0;
        *json_out = bands_json(res, current_attempt, &rows); /* PQntuples(NULL) is 0 */
        PQclear(res);
        if (*json_out && q->max_rows > 0 && rows > q->max_rows) {
            free(*json_out);
            if (q->too_many)
                *q->too_many = true;
            *json_out = strdup("[]");
        }
        return *json_out ? DB_ONE_RESULT : DB_HARD_ERROR;
    }
    if (q->max_rows > 0 && res != NULL && PQntuples(res) > q->max_rows) {
        PQclear(res);
        if (q->too_many)
            *q->too_many = true;
        *json_out = strdup("[]");
        return *json_out ? DB_ONE_RESULT : DB_HARD_ERROR;
    }
    *json_out = points_json(res, q->max_points, current_attempt);
    PQclear(res);
    return *json_out ? DB_ONE_RESULT : DB_HARD_ERROR;
}

/*
 * output.c - JSON pretty-printing, tables, key: value blocks and error rendering.
 */
#include "output.h"

#include "http.h"

#include <stdbool.h>
#include <stdlib.h>
#include <string.h>

/* ---------------------------------------------------------------------------------------------
 * Scalars
 * ------------------------------------------------------------------------------------------- */

/* Writes d in %g form with at most max_prec significant digits, the fewest that read back as d
 * (or max_prec), always recognisable as a real. */
static void format_real_prec(char *buf, size_t n, double d, int max_prec)
{
    for (int prec = 1; prec <= max_prec; prec++) {
        snprintf(buf, n, "%.*g", prec, d);
        if (strtod(buf, NULL) == d)
            break;
    }
    if (!strpbrk(buf, ".eEn")) { /* "3" would read back as an integer */
        size_t len = strlen(buf);
        if (len + 2 < n)
            memcpy(buf + len, ".0", 3);
    }
}

/* Writes d in the shortest %g form that reads back as d, always recognisable as a real. */
static void format_real(char *buf, size_t n, double d)
{
    format_real_prec(buf, n, d, 17);
}

/* Appends v as compact JSON, its reals in the shortest form that reads back (json_dumps would
 * write 0.8637 as 0.86370000000000002). */
static void json_shortest(struct strbuf *sb, const json_t *v)
{
    char num[64];
    size_t i;
    const char *k;
    json_t *e;
    switch (json_typeof(v)) {
    case JSON_REAL:
        format_real(num, sizeof num, json_real_value(v));
        sb_puts(sb, num);
        break;
    case JSON_ARRAY:
        sb_puts(sb, "[");
        json_array_foreach(v, i, e)
        {
            if (i)
                sb_puts(sb, ",");
            json_shortest(sb, e);
        }
        sb_puts(sb, "]");
        break;
    case JSON_OBJECT:
        sb_puts(sb, "{");
        i = 0;
        json_object_foreach((json_t *)v, k, e)
        {
            json_t *key = json_string(k);
            char *ks = key ? json_dumps(key, JSON_ENCODE_ANY) : NULL;
            sb_printf(sb, "%s%s:", i++ ? "," : "", ks ? ks : "\"\"");
            free(ks);
            json_decref(key);
            json_shortest(sb, e);
        }
        sb_puts(sb, "}");
        break;
    default: {
        char *s = json_dumps(v, JSON_COMPACT | JSON_ENCODE_ANY);
        if (s)
            sb_puts(sb, s);
        free(s);
    }
    }
}

void out_clean(struct strbuf *sb, const char *text, size_t len)
{
    size_t start = 0;
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)text[i];
        if (ch < 0x20 || ch == 0x7f) {
            sb_append(sb, text + start, i - start);
            sb_append(sb, " ", 1);
            start = i + 1;
        }
    }
    sb_append(sb, text + start, len - start);
}

/* A real for people (tables, key: value blocks): 6 significant digits, so that a loss of
 * 0.1111111111111111 is 0.111111 and a row stays readable; -o json keeps every digit. */
static void format_short(char *buf, size_t n, double d)
{
    format_real_prec(buf, n, d, 6);
}

void out_value(struct strbuf *sb, const json_t *v)
{
    char num[64];
    switch (v ? json_typeof(v) : JSON_NULL) {
    case JSON_NULL:
        sb_puts(sb, "-");
        break;
    case JSON_STRING:
        out_clean(sb, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        sb_printf(sb, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        format_short(num, sizeof num, json_real_value(v));
        sb_puts(sb, num);
        break;
    case JSON_TRUE:
        sb_puts(sb, "true");
        break;
    case JSON_FALSE:
        sb_puts(sb, "false");
        break;
    case JSON_ARRAY: {
        size_t i;
        json_t *e;
        if (json_array_size(v) == 0)
            sb_puts(sb, "-");
        json_array_foreach(v, i, e)
        {
            if (i)
                sb_puts(sb, ",");
            out_value(sb, e);
        }
        break;
    }
    case JSON_OBJECT: {
        const char *k;
        json_t *e;
        bool first = true;
        if (json_object_size(v) == 0)
            sb_puts(sb, "-");
        json_object_foreach((json_t *)v, k, e)
        {
            if (!first)
                sb_puts(sb, " ");
            first = false;
            out_clean(sb, k, strlen(k));
            sb_puts(sb, "=");
            if (json_is_object(e) || json_is_array(e)) {
                struct strbuf nested = STRBUF_INIT;
                json_shortest(&nested, e);
                out_clean(sb, sb_str(&nested), nested.len);
                sb_free(&nested);
            } else {
                out_value(sb, e);
            }
        }
        break;
    }
    }
}

void out_time(struct strbuf *sb, const json_t *v)
{
    const char *s = json_string_value(v);
    const char *t = s ? strchr(s, 'T') : NULL;
    const char *dot = t ? strchr(t, '.') : NULL;
    if (!dot) {
        out_value(sb, v);
        return;
    }
    const char *rest = dot + 1;
    while (*rest >= '0' && *rest <= '9')
        rest++;
    out_clean(sb, s, (size_t)(dot - s));
    out_clean(sb, rest, strlen(rest));
}

/* ---------------------------------------------------------------------------------------------
 * Pretty JSON
 * ------------------------------------------------------------------------------------------- */

static void json_string_out(FILE *f, const char *s, size_t len)
{
    fputc('"', f);
    for (size_t i = 0; i < len; i++) {
        unsigned char ch = (unsigned char)s[i];
        switch (ch) {
        case '"':
            fputs("\\\"", f);
            break;
        case '\\':
            fputs("\\\\", f);
            break;
        case '\n':
            fputs("\\n", f);
            break;
        case '\r':
            fputs("\\r", f);
            break;
        case '\t':
            fputs("\\t", f);
            break;
        case '\b':
            fputs("\\b", f);
            break;
        case '\f':
            fputs("\\f", f);
            break;
        default:
            if (ch < 0x20 || ch == 0x7f)
                fprintf(f, "\\u%04x", ch);
            else
                fputc(ch, f);
        }
    }
    fputc('"', f);
}

static void indent(FILE *f, int depth)
{
    for (int i = 0; i < depth; i++)
        fputs("  ", f);
}

static void json_out(FILE *f, const json_t *v, int depth)
{
    char num[64];
    switch (json_typeof(v)) {
    case JSON_OBJECT: {
        void *it = json_object_iter((json_t *)v);
        if (!it) {
            fputs("{}", f);
            break;
        }
        fputs("{\n", f);
        while (it) {
            const char *key = json_object_iter_key(it);
            void *next = json_object_iter_next((json_t *)v, it);
            indent(f, depth + 1);
            json_string_out(f, key, strlen(key));
            fputs(": ", f);
            json_out(f, json_object_iter_value(it), depth + 1);
            fputs(next ? ",\n" : "\n", f);
            it = next;
        }
        indent(f, depth);
        fputc('}', f);
        break;
    }
    case JSON_ARRAY: {
        size_t n = json_array_size(v);
        if (n == 0) {
            fputs("[]", f);
            break;
        }
        fputs("[\n", f);
        for (size_t i = 0; i < n; i++) {
            indent(f, depth + 1);
            json_out(f, json_array_get(v, i), depth + 1);
            fputs(i + 1 < n ? ",\n" : "\n", f);
        }
        indent(f, depth);
        fputc(']', f);
        break;
    }
    case JSON_STRING:
        json_string_out(f, json_string_value(v), json_string_length(v));
        break;
    case JSON_INTEGER:
        fprintf(f, "%" JSON_INTEGER_FORMAT, json_integer_value(v));
        break;
    case JSON_REAL:
        format_real(num, sizeof num, json_real_value(v));
        fputs(num, f);
        break;
    case JSON_TRUE:
        fputs("true", f);
        break;
    case JSON_FALSE:
        fputs("false", f);
        break;
    case JSON_NULL:
        fputs("null", f);
        break;
    }
}

void out_json(FILE *f, const json_t *v)
{
    json_out(f, v, 0);
    fputc('\n', f);
}

/* ---------------------------------------------------------------------------------------------
 * Tables
 * ------------------------------------------------------------------------------------------- */

void table_init(struct out_table *t, const char *const *headers, size_t ncols)
{
    memset(t, 0, sizeof *t);
    t->ncols = ncols;
    t->headers = headers;
}

void table_cell_steal(struct out_table *t, char *text)
{
    if (t->ncells == t->cap) {
        t->cap = t->cap ? t->cap * 2 : 32;
        t->cells = xrealloc(t->cells, t->cap * sizeof *t->cells);
    }
    t->cells[t->ncells++] = text;
}

void table_cell(struct out_table *t, const char *text)
{
    struct strbuf sb = STRBUF_INIT;
    out_clean(&sb, text ? text : "-", text ? strlen(text) : 1);
    table_cell_steal(t, sb_steal(&sb));
}

void table_cell_json(struct out_table *t, const json_t *v)
{
    struct strbuf sb = STRBUF_INIT;
    out_value(&sb, v);
    table_cell_steal(t, sb_steal(&sb));
}

void table_cell_time(struct out_table *t, const json_t *v)
{
    struct strbuf sb = STRBUF_INIT;
    out_time(&sb, v);
    table_cell_steal(t, sb_steal(&sb));
}

/* Display width of UTF-8 text: code points, not bytes. */
static size_t text_width(const char *s)
{
    size_t w = 0;
    for (; *s; s++)
        if (((unsigned char)*s & 0xC0) != 0x80)
            w++;
    return w;
}

static void print_row(FILE *f, const char *const *cells, size_t ncols, const size_t *widths)
{
    for (size_t c = 0; c < ncols; c++) {
        const char *s = cells[c] ? cells[c] : "";
        fputs(s, f);
        if (c + 1 < ncols)
            fprintf(f, "%*s", (int)(widths[c] - text_width(s) + 2), "");
    }
    fputc('\n', f);
}

void table_print(const struct out_table *t, FILE *f)
{
    size_t nrows = (t->ncells + t->ncols - 1) / t->ncols;
    size_t *widths = xmalloc(t->ncols * sizeof *widths);
    const char **row = xmalloc(t->ncols * sizeof *row);
    for (size_t c = 0; c < t->ncols; c++)
        widths[c] = t->headers ? text_width(t->headers[c]) : 0;
    for (size_t i = 0; i < t->ncells; i++) {
        size_t w = text_width(t->cells[i]);
        if (w > widths[i % t->ncols])
            widths[i % t->ncols] = w;
    }
    if (t->headers)
        print_row(f, t->headers, t->ncols, widths);
    for (size_t r = 0; r < nrows; r++) {
        for (size_t c = 0; c < t->ncols; c++) {
            size_t i = r * t->ncols + c;
            row[c] = i < t->ncells ? t->cells[i] : "";
        }
        print_row(f, row, t->ncols, widths);
    }
    free(row);
    free(widths);
}

void table_free(struct out_table *t)
{
    for (size_t i = 0; i < t->ncells; i++)
        free(t->cells[i]);
    free(t->cells);
    memset(t, 0, sizeof *t);
}

void kv_json(struct out_table *t, const char *key, const json_t *v)
{
    struct strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "%s:", key);
    table_cell_steal(t, sb_steal(&sb));
    table_cell_json(t, v);
}

void kv_text(struct out_table *t, const char *key, const char *text)
{
    struct strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "%s:", key);
    table_cell_steal(t, sb_steal(&sb));
    table_cell(t, text);
}

/* ---------------------------------------------------------------------------------------------
 * Errors
 * ------------------------------------------------------------------------------------------- */

#define SNIPPET_BYTES 200

/* Appends the first bytes of a body, cleaned, with "..." when cut. */
static void snippet(struct strbuf *sb, const char *body, size_t len)
{
    size_t n = len < SNIPPET_BYTES ? len : SNIPPET_BYTES;
    /* Do not cut a UTF-8 sequence in half. */
    while (n < len && n > 0 && ((unsigned char)body[n] & 0xC0) == 0x80)
        n--;
    out_clean(sb, body, n);
    if (n < len)
        sb_puts(sb, "...");
}

void out_odd_reply(const struct http_response *r, const char *what)
{
    struct strbuf sb = STRBUF_INIT;
    sb_printf(&sb, "error: unexpected reply from the server (HTTP %ld, %s)", r->status, what);
    if (r->len) {
        sb_puts(&sb, ": ");
        snippet(&sb, r->body, r->len);
    }
    fprintf(stderr, "%s\n", sb_str(&sb));
    sb_free(&sb);
}

static const char *string_member(const json_t *obj, const char *key)
{
    const json_t *v = json_object_get(obj, key);
    return json_is_string(v) ? json_string_value(v) : NULL;
}

/* Whether `detail` is exactly "<field>: <fdetail>". */
static bool repeats_detail(const char *detail, const char *field, const char *fdetail)
{
    size_t flen = strlen(field);
    return strncmp(detail, field, flen) == 0 && strncmp(detail + flen, ": ", 2) == 0 &&
           strcmp(detail + flen + 2, fdetail) == 0;
}

void out_problem(const struct http_response *r)
{
    json_t *p = r->len ? json_loadb(r->body, r->len, 0, NULL) : NULL;
    const char *title = json_is_object(p) ? string_member(p, "title") : NULL;
    const char *detail = json_is_object(p) ? string_member(p, "detail") : NULL;
    struct strbuf sb = STRBUF_INIT;

    if (!title && !detail) {
        sb_printf(&sb, "error: the server answered HTTP %ld", r->status);
        if (r->len) {
            sb_puts(&sb, ": ");
            snippet(&sb, r->body, r->len);
        }
        sb_puts(&sb, "\n");
    } else {
        sb_puts(&sb, "error: ");
        if (title)
            out_clean(&sb, title, strlen(title));
        else
            sb_printf(&sb, "HTTP %ld", r->status);
        if (detail) {
            sb_puts(&sb, ": ");
            out_clean(&sb, detail, strlen(detail));
        }
        sb_puts(&sb, "\n");
        size_t i;
        json_t *e;
        json_array_foreach(json_object_get(p, "errors"), i, e)
        {
            const char *field = json_is_object(e) ? string_member(e, "field") : NULL;
            const char *fdetail = json_is_object(e) ? string_member(e, "detail") : NULL;
            if (field && fdetail && detail && repeats_detail(detail, field, fdetail))
                continue; /* the detail line above already says exactly this */
            sb_puts(&sb, "  ");
            if (field) {
                out_clean(&sb, field, strlen(field));
                sb_puts(&sb, ": ");
            }
            if (fdetail)
                out_clean(&sb, fdetail, strlen(fdetail));
            else if (!field)
                out_value(&sb, e);
            sb_puts(&sb, "\n");
        }
    }
    fputs(sb_str(&sb), stderr);
    sb_free(&sb);
    json_decref(p);
}

/*
 * output.h - everything the CLI prints: pretty JSON, aligned tables and key: value blocks, and
 * server errors (RFC 9457 problem+json) as the server phrased them.
 */
#ifndef TY_CLI_OUTPUT_H
#define TY_CLI_OUTPUT_H

#include "strbuf.h"

#include <jansson.h>
#include <stdio.h>

struct http_response;

/*
 * Prints v as indented JSON followed by a newline. Numbers keep their value exactly: reals are
 * written in the shortest form that reads back to the same double, integers as integers.
 */
void out_json(FILE *f, const json_t *v);

/*
 * Appends v as one table cell: null "-", strings as is, numbers (reals to 6 significant digits:
 * -o json keeps them whole), booleans, arrays as "a,b",
 * objects as "k=v k=v". Control characters become spaces (a cell stays on its line, and server
 * text cannot drive the terminal).
 */
void out_value(struct strbuf *sb, const json_t *v);

/* Appends an RFC 3339 time without its fraction of a second ("...T07:43:04Z"); other values as
 * out_value does. For table columns; json output keeps the server's text. */
void out_time(struct strbuf *sb, const json_t *v);

/* Appends text with control characters replaced by spaces (for printing server-provided text). */
void out_clean(struct strbuf *sb, const char *text, size_t len);

/* ----- tables ---------------------------------------------------------------------------- */

/* Rows of cells printed with aligned columns, two spaces apart, the last column unpadded. */
struct out_table {
    size_t ncols;
    const char *const *headers; /* ncols names, or NULL for a header-less table */
    char **cells;               /* nrows * ncols owned strings */
    size_t ncells, cap;
};

/* headers: ncols column titles (kept by pointer, must outlive the table) or NULL. */
void table_init(struct out_table *t, const char *const *headers, size_t ncols);

/* Appends the next cell (copied, cleaned of control characters); rows fill left to right. */
void table_cell(struct out_table *t, const char *text);

/* Appends the next cell formatted from a JSON value (see out_value); v may be NULL ("-"). */
void table_cell_json(struct out_table *t, const json_t *v);

/* Appends the next cell formatted as a time (see out_time). */
void table_cell_time(struct out_table *t, const json_t *v);

/* Appends the next cell; takes ownership of `text` (which must be malloc'ed and clean). */
void table_cell_steal(struct out_table *t, char *text);

/* Prints the header (if any) and all rows. */
void table_print(const struct out_table *t, FILE *f);

void table_free(struct out_table *t);

/* ----- key: value blocks ----------------------------------------------------------------- */

/* Adds "key:" and a JSON value (out_value) as a row of a header-less 2-column table. */
void kv_json(struct out_table *t, const char *key, const json_t *v);

/* Adds "key:" and text. */
void kv_text(struct out_table *t, const char *key, const char *text);

/* ----- errors ---------------------------------------------------------------------------- */

/*
 * Prints a 4xx/5xx reply on stderr: "error: <title>: <detail>" then "  <field>: <detail>" per
 * entry of "errors"; for a body that is not problem JSON, the status and the body's first bytes.
 */
void out_problem(const struct http_response *r);

/* Prints "error: unexpected reply from the server (HTTP n): <first bytes>" on stderr. */
void out_odd_reply(const struct http_response *r, const char *what);

#endif

/* One-dimensional arrays in PostgreSQL's binary format (what array_recv reads), for statements
 * that take a batch as one array parameter per column, sent in binary (db_exec_params): each
 * element is then parsed on its own by its type's receive function. A batch sent as one JSON
 * document was parsed whole before any row could be read from it, several times slower for a
 * batch of reports (issue 27, docs/decisions.md). */
#ifndef SERVER_STORE_DB_ARRAY_H
#define SERVER_STORE_DB_ARRAY_H

#include "textbuf.h"

#include <stddef.h>
#include <stdint.h>

/* Element types (pg_type OIDs): the parameter's declared array type must hold exactly these. */
enum {
    DB_OID_INT8 = 20,
    DB_OID_INT4 = 23,
    DB_OID_TEXT = 25,
    DB_OID_FLOAT8 = 701,
    DB_OID_JSONB = 3802
};

struct db_array {
    struct textbuf b; /* b.text, b.len: the parameter's bytes once db_array_end succeeded */
    size_t n;         /* elements so far */
};

/* Starts an array of `elem_oid` elements (DB_OID_*). */
void db_array_begin(struct db_array *a, unsigned elem_oid);
void db_array_int8(struct db_array *a, int64_t v);
void db_array_int4(struct db_array *a, int32_t v);
void db_array_float8(struct db_array *a, double v);
/* n bytes of text (no NUL among them). */
void db_array_text(struct db_array *a, const char *s, size_t n);
/* n bytes of JSON text, as jsonb (jsonb_recv parses it, as jsonb_in would). */
void db_array_jsonb(struct db_array *a, const char *s, size_t n);
void db_array_null(struct db_array *a);
/* Completes the array. Returns 0, or -1 when an allocation failed (b.text is then NULL). */
int db_array_end(struct db_array *a);

#endif

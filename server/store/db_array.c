/* See db_array.h for what this module does and its contract. The format (PostgreSQL's
 * array_send): int32 dimensions, int32 flags, uint32 element type, then per dimension int32 size
 * and int32 lower bound, then per element int32 length (-1: NULL) and its bytes in the element
 * type's binary format; every integer in network byte order. */
#include "db_array.h"

#include <arpa/inet.h>
#include <string.h>

enum { SIZE_AT = 12 }; /* where the header holds the element count */

static void put32(struct db_array *a, uint32_t v)
{
    uint32_t be = htonl(v);
    textbuf_append(&a->b, (const char *)&be, 4);
}

void db_array_begin(struct db_array *a, unsigned elem_oid)
{
    textbuf_init(&a->b, 4096);
    a->n = 0;
    put32(a, 1); /* one dimension */
    put32(a, 0); /* flags: array_recv finds the NULLs itself */
    put32(a, elem_oid);
    put32(a, 0); /* its size, written by db_array_end */
    put32(a, 1); /* its lower bound */
}

void db_array_int8(struct db_array *a, int64_t v)
{
    put32(a, 8);
    put32(a, (uint32_t)((uint64_t)v >> 32));
    put32(a, (uint32_t)v);
    a->n++;
}

void db_array_int4(struct db_array *a, int32_t v)
{
    put32(a, 4);
    put32(a, (uint32_t)v);
    a->n++;
}

void db_array_float8(struct db_array *a, double v)
{
    uint64_t bits; /* float8send: the IEEE 754 bits, as an int8 */
    memcpy(&bits, &v, sizeof(bits));
    db_array_int8(a, (int64_t)bits);
}

void db_array_text(struct db_array *a, const char *s, size_t n)
{
    put32(a, (uint32_t)n);
    textbuf_append(&a->b, s, n);
    a->n++;
}

void db_array_jsonb(struct db_array *a, const char *s, size_t n)
{
    put32(a, (uint32_t)n + 1);
    textbuf_append(&a->b, "\1", 1); /* jsonb's binary format: version 1, then the JSON text */
    textbuf_append(&a->b, s, n);
    a->n++;
}

void db_array_null(struct db_array *a)
{
    put32(a, UINT32_MAX); /* -1 */
    a->n++;
}

int db_array_end(struct db_array *a)
{
    if (a->b.text == NULL)
        return -1;
    if (a->n == 0) { /* an empty array has no dimensions */
        memset(a->b.text, 0, 4);
        a->b.len = SIZE_AT;
        return 0;
    }
    uint32_t be = htonl((uint32_t)a->n);
    memcpy(a->b.text + SIZE_AT, &be, 4);
    return 0;
}

/* Parsers of query-string values (the network's text, after libmicrohttpd split and decoded
 * the query string): pure, no I/O, fuzzed by tests/fuzz/fuzz_query.c. */
#ifndef SRV_QUERY_H
#define SRV_QUERY_H

#include <stddef.h>

#define SRV_QUERY_MAX_RANKS 1024
/* Room for SRV_QUERY_MAX_RANKS ranks in srv_query_ranks_array's literal. */
#define SRV_QUERY_RANKS_LEN (SRV_QUERY_MAX_RANKS * 12 + 4)
#define SRV_QUERY_MAX_NAMES 100
#define SRV_QUERY_MAX_NAME_LEN 256

/* Turns "RUNNING,pending,running" into the array literal "{PENDING,RUNNING}": each status once,
 * in lifecycle order, so the literal is bounded by the number of statuses however long the
 * query is (out needs 128 bytes). Returns 0, or -1 naming the unknown status in `bad` (always
 * set on -1). */
int srv_query_statuses_array(const char *in, char *out, size_t outlen, char *bad, size_t badlen);

/* Checks a comma separated list of metric names: 1..SRV_QUERY_MAX_NAMES names, none empty or
 * longer than SRV_QUERY_MAX_NAME_LEN. Returns 0, or -1 with the reason in `detail`. */
int srv_query_names_valid(const char *names, char *detail, size_t len);

/* "0,2,5" -> "{0,2,5}" in out (SRV_QUERY_RANKS_LEN bytes); *count = the number of ranks, at
 * most SRV_QUERY_MAX_RANKS, each 0..INT32_MAX. 0, or -1 when malformed. */
int srv_query_ranks_array(const char *s, char *out, size_t outlen, int *count);

/* Whether s[0..n) is text PostgreSQL takes: well-formed UTF-8 (no overlong forms, surrogates
 * or code points past U+10FFFF) without NUL bytes. */
int srv_query_text_valid(const char *s, size_t n);

/* Makes the NUL-terminated s valid UTF-8 in place: each byte that does not begin a well-formed
 * sequence becomes '?' (for echoing what a client sent into a JSON reply). */
void srv_query_text_scrub(char *s);

#endif

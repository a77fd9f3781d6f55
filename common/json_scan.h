/* A validating scanner of JSON text (RFC 8259) that builds nothing: it walks the text, says where
 * each value ends, decodes a string into the caller's buffer and reads a number, so that a hot
 * parser (the agent's `report` message: agent_proto_report.c, issue 27) takes what it needs
 * without a jansson object per value. It accepts exactly what jansson's json_loadb accepts by
 * default, or less (nesting past JSCAN_MAX_DEPTH): a caller that gets an error falls back to
 * jansson, which names the problem. Every function reads text[0..len) only; the text need not be
 * NUL-terminated. An index returned is one past the construct; 0 means invalid (no construct
 * ends at 0). Pure. Prefix jscan_. */
#ifndef COMMON_JSON_SCAN_H
#define COMMON_JSON_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define JSCAN_MAX_DEPTH 64

/* The length of the valid UTF-8 sequence at s (n >= 1 bytes there), or 0 when the bytes there
 * are not one: a bad lead or continuation byte, an overlong form, a surrogate, past U+10FFFF, a
 * sequence cut short by n, or NUL (no JSON string holds it raw, nor PostgreSQL's jsonb). Also
 * the agent's check of its workers' log lines (worker/agent/logcut.c). */
size_t jscan_utf8_length(const unsigned char *s, size_t n);

/* The first index from i on that is not JSON white space. */
size_t jscan_space(const char *text, size_t len, size_t i);

/* The string whose opening quote is text[i]: valid UTF-8, no control character, escapes well
 * formed (surrogates paired, no \u0000). out (may be NULL): its decoded bytes, *out_len of them,
 * no NUL added; out must hold the string's written length (decoding never lengthens it).
 * *escaped (may be NULL): whether it has an escape. Returns the index past its closing quote. */
size_t jscan_string(const char *text, size_t len, size_t i, char *out, size_t *out_len,
                    bool *escaped);

/* The number that starts at text[i]. *integer: written with neither a fraction nor an exponent.
 * Returns the index past it. */
size_t jscan_number(const char *text, size_t len, size_t i, bool *integer);

/* Reads the number text[i..end) (as jscan_number found it) as jansson does: an integer must fit
 * int64 (*as_int set, *value its double), a real must be finite. Returns 0, -1 when jansson
 * would refuse it or it is longer than 64 bytes. */
int jscan_number_value(const char *text, size_t i, size_t end, bool integer, int64_t *as_int,
                       double *value);

/* Any value that starts at text[i] (objects and arrays to JSCAN_MAX_DEPTH levels); returns the
 * index past it. */
size_t jscan_value(const char *text, size_t len, size_t i);

#endif

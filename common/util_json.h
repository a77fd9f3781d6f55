/* Checked reads of a parsed JSON object's members: the one field reader of every wire format's
 * parser (agent protocol, report protocol, spooled bodies). jansson only: libtrainyard compiles it
 * in too. Prefix util_json_. */
#ifndef COMMON_UTIL_JSON_H
#define COMMON_UTIL_JSON_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

/* Reads integer member `key` of `obj` into *out when it lies within [min, max]. `optional`: an
 * absent or null member is no error (returns 1, *out unchanged). Returns 0 when read; -1 when
 * the member is missing (and required), not an integer, or out of range, with err (may be NULL)
 * naming it: "'KEY' is missing" or "'KEY' must be an integer from MIN to MAX". The message starts
 * with the quote, so that a caller reading a member of a row can name the row: "'rows[3].%s",
 * err + 1. */
int util_json_int(const json_t *obj, const char *key, bool optional, int64_t min, int64_t max,
                  int64_t *out, char *err, size_t errlen);

#endif

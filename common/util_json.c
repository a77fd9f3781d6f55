/* See util_json.h for what this module does and its contract. */
#include "util_json.h"

#include <stdio.h>

int util_json_int(const json_t *obj, const char *key, bool optional, int64_t min, int64_t max,
                  int64_t *out, char *err, size_t errlen)
{
    json_t *v = json_object_get(obj, key);
    if (v == NULL || json_is_null(v)) {
        if (optional)
            return 1;
        if (err && errlen)
            snprintf(err, errlen, "'%s' is missing", key);
        return -1;
    }
    if (!json_is_integer(v) || json_integer_value(v) < min || json_integer_value(v) > max) {
        if (err && errlen)
            snprintf(err, errlen, "'%s' must be an integer from %lld to %lld", key, (long long)min,
                     (long long)max);
        return -1;
    }
    *out = json_integer_value(v);
    return 0;
}

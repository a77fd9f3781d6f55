/* See util_json.h for what this module does and its contract. */
#include "util_json.h"

#include <stdio.h>
#include <string.h>

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

/* Past the JSON string that starts at text[i] (its opening quote). */
static size_t skip_string(const char *text, size_t len, size_t i)
{
    for (i++; i < len && text[i] != '"'; i++)
        if (text[i] == '\\')
            i++;
    return i + 1;
}

static size_t skip_space(const char *text, size_t len, size_t i)
{
    while (i < len && (text[i] == ' ' || text[i] == '\t' || text[i] == '\n' || text[i] == '\r'))
        i++;
    return i;
}

/* Past the JSON value that starts at text[i]. */
static size_t skip_value(const char *text, size_t len, size_t i)
{
    if (i < len && text[i] == '"')
        return skip_string(text, len, i);
    int depth = 0;
    for (; i < len; i++) {
        char c = text[i];
        if (c == '"')
            i = skip_string(text, len, i) - 1;
        else if (c == '{' || c == '[')
            depth++;
        else if (c == '}' || c == ']') {
            if (depth == 0)
                return i;
            if (--depth == 0)
                return i + 1;
        } else if (depth == 0 && (c == ',' || c == ' ' || c == '\t' || c == '\n' || c == '\r'))
            return i;
    }
    return i;
}

int util_json_member_text(const char *text, size_t len, const char *key, const char **at, size_t *n)
{
    size_t klen = strlen(key), i = skip_space(text, len, 0);
    int found = -1;
    if (i >= len || text[i] != '{')
        return -1;
    for (i = skip_space(text, len, i + 1); i < len && text[i] == '"';) {
        size_t name = i + 1, end = skip_string(text, len, i);
        if (memchr(text + name, '\\', end - 1 - name) != NULL)
            return -1;
        bool match = end - 1 - name == klen && memcmp(text + name, key, klen) == 0;
        i = skip_space(text, len, end);
        if (i >= len || text[i] != ':')
            return -1;
        size_t value = skip_space(text, len, i + 1);
        i = skip_value(text, len, value);
        if (match && i > value && i <= len) {
            *at = text + value;
            *n = i - value;
            found = 0;
        }
        i = skip_space(text, len, i);
        if (i < len && text[i] == ',')
            i = skip_space(text, len, i + 1);
    }
    return found;
}

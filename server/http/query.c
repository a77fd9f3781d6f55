/* Parsers of query-string values (query.h). */
#include "query.h"

#include "job_status.h"
#include "util.h"

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

int srv_query_statuses_array(const char *in, char *out, size_t outlen, char *bad, size_t badlen)
{
    bool seen[JOB_STATUS_COUNT] = {false};
    const char *p = in;
    while (*p) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        enum job_status s;
        if (job_status_from_token(p, len, &s) != 0) {
            snprintf(bad, badlen, "%.*s", (int)(len > 32 ? 32 : len), p);
            return -1;
        }
        seen[s] = true;
        p += len + (comma ? 1 : 0);
    }
    size_t used = 0;
    out[used++] = '{';
    out[used] = '\0';
    for (int s = 0; s < JOB_STATUS_COUNT; s++) {
        if (!seen[s])
            continue;
        int n = snprintf(out + used, outlen - used, "%s%s", used > 1 ? "," : "",
                         job_status_name((enum job_status)s));
        if (n < 0 || (size_t)n >= outlen - used - 1) {
            snprintf(bad, badlen, "(too long)");
            return -1;
        }
        used += (size_t)n;
    }
    snprintf(out + used, outlen - used, "}");
    return 0;
}

int srv_query_names_valid(const char *names, char *detail, size_t len)
{
    int count = 0;
    const char *p = names;
    for (;;) {
        size_t n = strcspn(p, ",");
        if (n == 0) {
            snprintf(detail, len, "must be metric names separated by commas, none empty");
            return -1;
        }
        if (n > SRV_QUERY_MAX_NAME_LEN) {
            snprintf(detail, len, "a metric name is at most %d bytes", SRV_QUERY_MAX_NAME_LEN);
            return -1;
        }
        if (++count > SRV_QUERY_MAX_NAMES) {
            snprintf(detail, len, "at most %d names", SRV_QUERY_MAX_NAMES);
            return -1;
        }
        if (p[n] == '\0')
            return 0;
        p += n + 1;
    }
}

int srv_query_ranks_array(const char *s, char *out, size_t outlen, int *count)
{
    size_t o = 0;
    *count = 0;
    out[o++] = '{';
    for (const char *p = s;;) {
        size_t n = strcspn(p, ",");
        char num[16];
        int64_t r;
        if (n == 0 || n >= sizeof(num) || ++*count > SRV_QUERY_MAX_RANKS)
            return -1;
        memcpy(num, p, n);
        num[n] = '\0';
        if (util_parse_int64(num, 0, INT32_MAX, &r) != 0)
            return -1;
        int w = snprintf(out + o, outlen - o, "%s%lld", *count > 1 ? "," : "", (long long)r);
        if (w < 0 || (size_t)w >= outlen - o - 1)
            return -1;
        o += (size_t)w;
        if (p[n] == '\0')
            break;
        p += n + 1;
    }
    out[o++] = '}';
    out[o] = '\0';
    return 0;
}

/* The length of the well-formed UTF-8 sequence at p (n bytes left, n > 0), or 0 when it is not
 * one. NUL is not text. */
static size_t utf8_seq(const unsigned char *p, size_t n)
{
    unsigned c = p[0];
    if (c == 0)
        return 0;
    if (c < 0x80)
        return 1;
    size_t len = c >= 0xc2 && c <= 0xdf   ? 2
                 : c >= 0xe0 && c <= 0xef ? 3
                 : c >= 0xf0 && c <= 0xf4 ? 4
                                          : 0;
    if (len == 0 || n < len)
        return 0;
    unsigned lo = 0x80, hi = 0xbf; /* the second byte's range */
    if (c == 0xe0)
        lo = 0xa0; /* overlong */
    else if (c == 0xed)
        hi = 0x9f; /* surrogates */
    else if (c == 0xf0)
        lo = 0x90; /* overlong */
    else if (c == 0xf4)
        hi = 0x8f; /* past U+10FFFF */
    if (p[1] < lo || p[1] > hi)
        return 0;
    for (size_t k = 2; k < len; k++)
        if (p[k] < 0x80 || p[k] > 0xbf)
            return 0;
    return len;
}

void srv_query_text_scrub(char *s)
{
    unsigned char *p = (unsigned char *)s;
    size_t n = strlen(s), i = 0;
    while (i < n) {
        size_t len = utf8_seq(p + i, n - i);
        if (len == 0) {
            p[i] = '?';
            len = 1;
        }
        i += len;
    }
}

int srv_query_text_valid(const char *s, size_t n)
{
    const unsigned char *p = (const unsigned char *)s;
    size_t i = 0;
    while (i < n) {
        size_t len = utf8_seq(p + i, n - i);
        if (len == 0)
            return 0;
        i += len;
    }
    return 1;
}

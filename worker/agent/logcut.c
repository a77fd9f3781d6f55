/* Cutting a worker's output into log lines, reading a log file's journal, and finding the line
 * that says why a worker failed (pure): agent_log_cut, agent_log_journal_parse and
 * agent_log_failure_line, declared in agent.h. */
#include "agent.h"
#include "json_scan.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

/* Appends raw[0..n) to `lines` as one string, each invalid byte replaced by U+FFFD. 0 or -1. */
static int append_line(json_t *lines, const unsigned char *raw, size_t n)
{
    char *out = malloc(n * 3 + 1);
    if (!out)
        return -1;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = jscan_utf8_length(raw + i, n - i);
        if (k == 0) {
            memcpy(out + o, "\xEF\xBF\xBD", 3);
            o += 3;
            i++;
        } else {
            memcpy(out + o, raw + i, k);
            o += k;
            i += k;
        }
    }
    int rc = json_array_append_new(lines, json_stringn_nocheck(out, o));
    free(out);
    return rc;
}

/* Where to end a piece of a line longer than max that starts at p (n bytes available, n > max):
 * at max bytes, moved back (by 3 bytes at most) so that a valid UTF-8 character is not split. */
static size_t split_point(const unsigned char *p, size_t max)
{
    size_t cut = max;
    for (size_t back = 0; back < 3 && cut > 1; back++) {
        if ((p[cut] & 0xC0) != 0x80)
            return cut; /* p[cut] starts a character (or is ASCII): cut before it */
        cut--;
    }
    return max; /* not a valid sequence anyway: cut at max */
}

size_t agent_log_cut(const char *buf, size_t len, size_t line_max, bool final, json_t *lines)
{
    const unsigned char *p = (const unsigned char *)buf;
    size_t used = 0;
    if (line_max == 0)
        line_max = 1;
    while (used < len) {
        size_t rest = len - used;
        const unsigned char *nl = memchr(p + used, '\n', rest < line_max + 1 ? rest : line_max + 1);
        size_t take, text;
        if (nl) {
            text = (size_t)(nl - (p + used));
            take = text + 1;
        } else if (rest > line_max) {
            text = take = split_point(p + used, line_max);
        } else if (final) {
            text = take = rest;
        } else {
            break; /* a partial line: wait for its end */
        }
        if (append_line(lines, p + used, text) != 0)
            break;
        used += take;
    }
    return used;
}

/* Reads a non-negative decimal at *p (then past it and one following space). 0 or -1. */
static int journal_number(const char **p, int64_t *out)
{
    char *end;
    errno = 0;
    long long v = strtoll(*p, &end, 10);
    if (end == *p || errno != 0 || v < 0)
        return -1;
    *out = v;
    *p = *end == ' ' ? end + 1 : end;
    return 0;
}

void agent_log_journal_parse(const char *text, struct agent_log_journal *j)
{
    memset(j, 0, sizeof(*j));
    for (const char *line = text; line && *line;) {
        const char *eol = strchr(line, '\n');
        if (!eol)
            break; /* a torn last record */
        const char *p = line + 2;
        int64_t x, y, z;
        if (line[0] == 'a' && line[1] == ' ' && journal_number(&p, &x) == 0 && p == eol) {
            j->acked = x;
            size_t k = 0; /* the chunks up to x are acked; those after it are not */
            for (size_t i = 0; i < j->n; i++)
                if (j->end[i] > x) {
                    j->start[k] = j->start[i];
                    j->end[k] = j->end[i];
                    j->dropped[k] = j->dropped[i];
                    k++;
                }
            j->n = k;
        } else if (line[0] == 'c' && line[1] == ' ' && journal_number(&p, &x) == 0 &&
                   journal_number(&p, &y) == 0 && journal_number(&p, &z) == 0 && p == eol &&
                   y > x && x >= j->acked && (j->n == 0 || x >= j->end[j->n - 1])) {
            if (j->n == AGENT_LOG_JOURNAL_MAX) { /* cannot happen with the window: keep the last */
                memmove(j->start, j->start + 1, (j->n - 1) * sizeof(*j->start));
                memmove(j->end, j->end + 1, (j->n - 1) * sizeof(*j->end));
                memmove(j->dropped, j->dropped + 1, (j->n - 1) * sizeof(*j->dropped));
                j->n--;
            }
            j->start[j->n] = x;
            j->end[j->n] = y;
            j->dropped[j->n] = z;
            j->n++;
        }
        line = eol + 1;
    }
}

/* Whether line[0..n) contains the NUL-less string s. */
static bool line_has(const char *line, size_t n, const char *s)
{
    size_t k = strlen(s);
    for (size_t i = 0; i + k <= n; i++)
        if (memcmp(line + i, s, k) == 0)
            return true;
    return false;
}

/* Whether line[0..n) starts with s. */
static bool line_starts(const char *line, size_t n, const char *s)
{
    size_t k = strlen(s);
    return n >= k && memcmp(line, s, k) == 0;
}

/* Whether line[0..n) reads like an error without a traceback: "NameError: ...", "FooException:
 * ...", or "error: ..." / "fatal: ..." / "panic: ..." at its start. */
static bool generic_error(const char *line, size_t n)
{
    if (line_starts(line, n, "error:") || line_starts(line, n, "Error:") ||
        line_starts(line, n, "fatal:") || line_starts(line, n, "FATAL:") ||
        line_starts(line, n, "panic:"))
        return true;
    static const char *const tails[] = {"Error: ", "Exception: ", "Error:", "Exception:"};
    for (size_t t = 0; t < sizeof(tails) / sizeof(*tails); t++) {
        size_t k = strlen(tails[t]);
        for (size_t i = 1; i + k <= n; i++) /* a word before it: "ValueError:" */
            if (memcmp(line + i, tails[t], k) == 0 && (((unsigned char)line[i - 1] | 0x20) >= 'a' &&
                                                       ((unsigned char)line[i - 1] | 0x20) <= 'z'))
                return true;
    }
    return false;
}

size_t agent_log_failure_line(const char *buf, size_t len, bool whole, char *out, size_t outlen)
{
    if (outlen == 0)
        return 0;
    out[0] = '\0';
    const char *p = buf, *end = buf + len;
    if (!whole) { /* the first line may be the end of one that started before buf */
        const char *nl = memchr(p, '\n', len);
        p = nl ? nl + 1 : end;
    }
    const char *strong = NULL, *generic = NULL;
    size_t strong_n = 0, generic_n = 0;
    bool in_traceback = false;
    while (p < end) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        size_t n = nl ? (size_t)(nl - p) : (size_t)(end - p);
        while (n > 0 && (p[n - 1] == '\r' || p[n - 1] == ' ' || p[n - 1] == '\t'))
            n--;
        if (line_starts(p, n, "Traceback (most recent call last):")) {
            in_traceback = true;
        } else if (in_traceback && n > 0 && p[0] != ' ' && p[0] != '\t') {
            /* The first unindented line after the frames: the exception and its message. */
            in_traceback = false;
            strong = p;
            strong_n = n;
        } else if ((line_has(p, n, "Assertion `") && line_has(p, n, "' failed")) ||
                   line_starts(p, n, "Fatal Python error:") ||
                   line_starts(p, n, "terminate called after throwing") ||
                   line_has(p, n, "ERROR: AddressSanitizer")) {
            strong = p;
            strong_n = n;
        } else if (!in_traceback && generic_error(p, n)) {
            generic = p;
            generic_n = n;
        }
        p = nl ? nl + 1 : end;
    }
    const char *line = strong ? strong : generic;
    size_t n = strong ? strong_n : generic_n;
    if (!line)
        return 0;
    /* Valid UTF-8 of at most outlen - 1 bytes: invalid bytes and control characters become '?',
     * and a character that does not fit is left out whole. */
    const unsigned char *u = (const unsigned char *)line;
    size_t o = 0;
    for (size_t i = 0; i < n;) {
        size_t k = jscan_utf8_length(u + i, n - i);
        if (k == 0 || (k == 1 && (u[i] < 0x20 || u[i] == 0x7F))) {
            if (o + 1 >= outlen)
                break;
            out[o++] = u[i] == '\t' ? ' ' : '?';
            i++;
            continue;
        }
        if (o + k >= outlen)
            break;
        memcpy(out + o, u + i, k);
        o += k;
        i += k;
    }
    out[o] = '\0';
    return o;
}

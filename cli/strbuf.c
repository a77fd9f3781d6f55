/*
 * strbuf.c - growable string buffer and the allocation helpers the CLI uses everywhere.
 */
#include "strbuf.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void oom(void)
{
    fputs("error: out of memory\n", stderr);
    exit(70);
}

void *xmalloc(size_t n)
{
    void *p = malloc(n ? n : 1);
    if (!p)
        oom();
    return p;
}

void *xrealloc(void *p, size_t n)
{
    void *q = realloc(p, n ? n : 1);
    if (!q)
        oom();
    return q;
}

char *xstrdup(const char *s)
{
    char *p = strdup(s);
    if (!p)
        oom();
    return p;
}

/* Makes room for `extra` more bytes plus the NUL. */
static void sb_reserve(struct strbuf *sb, size_t extra)
{
    if (extra > (size_t)-1 / 2 - sb->len)
        oom();
    size_t need = sb->len + extra + 1;
    if (need <= sb->cap)
        return;
    size_t cap = sb->cap ? sb->cap : 64;
    while (cap < need)
        cap *= 2;
    sb->buf = xrealloc(sb->buf, cap);
    sb->cap = cap;
}

void sb_append(struct strbuf *sb, const char *s, size_t len)
{
    sb_reserve(sb, len);
    if (len)
        memcpy(sb->buf + sb->len, s, len);
    sb->len += len;
    sb->buf[sb->len] = '\0';
}

void sb_puts(struct strbuf *sb, const char *s)
{
    sb_append(sb, s, strlen(s));
}

void sb_printf(struct strbuf *sb, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(NULL, 0, fmt, ap);
    va_end(ap);
    if (n < 0)
        return;
    sb_reserve(sb, (size_t)n);
    va_start(ap, fmt);
    vsnprintf(sb->buf + sb->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    sb->len += (size_t)n;
}

const char *sb_str(const struct strbuf *sb)
{
    return sb->buf ? sb->buf : "";
}

char *sb_steal(struct strbuf *sb)
{
    char *p = sb->buf ? sb->buf : xstrdup("");
    sb->buf = NULL;
    sb->len = sb->cap = 0;
    return p;
}

void sb_free(struct strbuf *sb)
{
    free(sb->buf);
    sb->buf = NULL;
    sb->len = sb->cap = 0;
}

/*
 * strbuf.h - a growable, always NUL-terminated string buffer.
 *
 * Allocation failure is fatal (the CLI is a short-lived process: printing "out of memory" and
 * exiting is the only sensible reaction), so the append functions return nothing.
 */
#ifndef TY_CLI_STRBUF_H
#define TY_CLI_STRBUF_H

#include <stddef.h>

struct strbuf {
    char *buf;  /* NUL-terminated; NULL until the first append */
    size_t len; /* bytes before the NUL */
    size_t cap; /* bytes allocated */
};

#define STRBUF_INIT                                                                                \
    {                                                                                              \
        NULL, 0, 0                                                                                 \
    }

/* Appends len bytes of s (which need not be NUL-terminated). */
void sb_append(struct strbuf *sb, const char *s, size_t len);

/* Appends the NUL-terminated string s. */
void sb_puts(struct strbuf *sb, const char *s);

/* Appends printf-style formatted text. */
void sb_printf(struct strbuf *sb, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Returns the contents ("" when empty); the buffer keeps ownership. */
const char *sb_str(const struct strbuf *sb);

/* Hands the contents to the caller (free() it; never NULL) and leaves sb empty. */
char *sb_steal(struct strbuf *sb);

/* Frees the contents and leaves sb empty and reusable. */
void sb_free(struct strbuf *sb);

/* Allocation helpers that exit(70) with a message instead of returning NULL. */
void *xmalloc(size_t n);
void *xrealloc(void *p, size_t n);
char *xstrdup(const char *s);

#endif

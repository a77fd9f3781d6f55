/* A growable, NUL-terminated text buffer for the server's hand-written replies (GET /metrics,
 * metric series). Out of memory is not fatal: the first failed allocation frees the text, sets it
 * to NULL, and makes every later append a no-op, so a caller checks once, at the end. */
#ifndef COMMON_TEXTBUF_H
#define COMMON_TEXTBUF_H

#include <stddef.h>

struct textbuf {
    char *text; /* NUL-terminated, malloc'd (the caller frees it); NULL after a failed allocation */
    size_t len; /* bytes before the NUL */
    size_t cap; /* bytes allocated */
};

/* An empty buffer with room for `cap` bytes (text "", or NULL when out of memory). */
void textbuf_init(struct textbuf *b, size_t cap);
/* Appends n bytes of s (which need not be NUL-terminated). */
void textbuf_append(struct textbuf *b, const char *s, size_t n);
/* Appends the NUL-terminated string s. */
void textbuf_puts(struct textbuf *b, const char *s);

#endif

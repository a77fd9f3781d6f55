/* See textbuf.h for what this module does and its contract. */
#include "textbuf.h"

#include <stdlib.h>
#include <string.h>

void textbuf_init(struct textbuf *b, size_t cap)
{
    b->cap = cap > 0 ? cap : 1;
    b->len = 0;
    b->text = malloc(b->cap);
    if (b->text)
        b->text[0] = '\0';
}

void textbuf_append(struct textbuf *b, const char *s, size_t n)
{
    if (b->text == NULL)
        return;
    if (b->len + n + 1 > b->cap) {
        size_t cap = b->cap * 2 > b->len + n + 1 ? b->cap * 2 : b->len + n + 1;
        char *t = realloc(b->text, cap);
        if (t == NULL) {
            free(b->text);
            b->text = NULL;
            return;
        }
        b->text = t;
        b->cap = cap;
    }
    memcpy(b->text + b->len, s, n);
    b->len += n;
    b->text[b->len] = '\0';
}

void textbuf_puts(struct textbuf *b, const char *s)
{
    textbuf_append(b, s, strlen(s));
}

/* Error codes shared by the Fashion-MNIST example's modules.
 *
 * Internal functions return 0 on success or one of these negative codes, and write a one-line
 * human message into an optional caller buffer (`char *err, size_t errlen`; NULL/0 to skip). */
#ifndef FM_ERROR_H
#define FM_ERROR_H

#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>

enum {
    FM_OK = 0,
    FM_EIO = -1,     /* open/read/write/rename failed; errno text is in the message */
    FM_EFORMAT = -2, /* file or buffer is not what it claims to be (magic, truncation, CRC) */
    FM_ENOMEM = -3,  /* allocation failed */
    FM_EINVAL = -4,  /* bad argument or configuration value */
    FM_ESDK = -5,    /* a Trainyard SDK call failed */
};

/* fm_seterr: formats a message into err[errlen] when err is non-NULL. Never fails. */
__attribute__((format(printf, 3, 4))) static inline void fm_seterr(char *err, size_t errlen,
                                                                   const char *fmt, ...)
{
    if (err == NULL || errlen == 0)
        return;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
}

#endif

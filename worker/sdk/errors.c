/*
 * errors.c — ty_strerror(), generated from TY_ERRNO_MAP. Compiled into libtrainyard and into
 * the static tyerrors, which the agent links to name the TY_E* codes of the report protocol.
 */
#include "trainyard.h"

/* Static description of code; never NULL. */
const char *ty_strerror(int code)
{
    switch (code) {
    case 0:
        return "success";
#define TY__ERRNO_CASE(name, value, msg)                                                           \
    case (value):                                                                                  \
        return (msg);
        TY_ERRNO_MAP(TY__ERRNO_CASE)
#undef TY__ERRNO_CASE
    default:
        return "unknown error";
    }
}

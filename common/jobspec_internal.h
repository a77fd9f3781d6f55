/* Shared by jobspec.c (validation) and jobspec_view.c (typed view) only. */
#ifndef TY_JOBSPEC_INTERNAL_H
#define TY_JOBSPEC_INTERNAL_H

#include <stddef.h>

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

extern const char *const jobspec__backend_names[4];
extern const char *const jobspec__strategy_names[4];
extern const char *const jobspec__score_order_names[2];

/* Index of `s` in `names`, or -1. */
int jobspec__name_index(const char *const *names, size_t n, const char *s);

#endif

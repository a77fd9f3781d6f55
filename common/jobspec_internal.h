/* Shared by jobspec.c (validation), jobspec_config.c (validation of scaling_config and
 * run_config) and jobspec_view.c (typed view) only. */
#ifndef TY_JOBSPEC_INTERNAL_H
#define TY_JOBSPEC_INTERNAL_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "vocab.h"

#define NELEM(a) (sizeof(a) / sizeof((a)[0]))

/* How many names each X-macro of vocab.h has; the first name of each is the default. */
#define JOBSPEC__ONE(...) +1
#define JOBSPEC__NBACKENDS (0 JOBSPEC_BACKEND_MAP(JOBSPEC__ONE))
#define JOBSPEC__NSTRATEGIES (0 JOBSPEC_STRATEGY_MAP(JOBSPEC__ONE))
#define JOBSPEC__NSCORE_ORDERS (0 JOBSPEC_SCORE_ORDER_MAP(JOBSPEC__ONE))

extern const char *const jobspec__backend_names[JOBSPEC__NBACKENDS];
extern const char *const jobspec__strategy_names[JOBSPEC__NSTRATEGIES];
extern const char *const jobspec__score_order_names[JOBSPEC__NSCORE_ORDERS];

/* Index of `s` in `names`, or -1. */
int jobspec__name_index(const char *const *names, size_t n, const char *s);

/* ------------------------------------------------------------------------------------------ */
/* Validation context and typed readers (jobspec.c), for jobspec_config.c                       */
/* ------------------------------------------------------------------------------------------ */

#define JOBSPEC__PATH_LEN 320 /* a dotted field path; keys longer than 256 bytes are cut */

/* One validation: the errors found so far, and whether an allocation failed. */
struct jobspec__vctx {
    json_t *errors; /* array of {"field", "detail"} */
    bool nomem;
};

/* Appends {"field": path, "detail": <formatted>} to the error list. */
void jobspec__fail(struct jobspec__vctx *c, const char *path, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));
/* Flags a failed allocation; returns v. */
json_t *jobspec__chk(struct jobspec__vctx *c, json_t *v);
/* Sets obj[key] = v, stealing v. A NULL v (an error already recorded) is skipped. */
void jobspec__put(struct jobspec__vctx *c, json_t *obj, const char *key, json_t *v);
/* buf = "parent.key"; a key over 256 bytes is cut at a UTF-8 boundary and gets "...". */
void jobspec__path_key(char *buf, size_t n, const char *parent, const char *key);
/* obj[key], with JSON null (and a NULL obj) read as absent. */
const json_t *jobspec__member(const json_t *obj, const char *key);
/* Records "unknown field" for each key of obj not in allowed. Returns how many. */
size_t jobspec__reject_unknown(struct jobspec__vctx *c, const json_t *obj, const char *parent,
                               const char *const *allowed, size_t n_allowed);

/* The typed readers below record one error for `path` and return false/NULL on a bad value. */

/* An integer: a JSON integer, or a real with no fractional part within ±2^53. */
bool jobspec__as_int(const json_t *v, int64_t *out);
/* An integer in [lo, hi] into *out. */
bool jobspec__get_int(struct jobspec__vctx *c, const json_t *v, const char *path, int64_t lo,
                      int64_t hi, int64_t *out);
/* Optional integer in [lo, hi]: absent gives def. Returns the normalized JSON integer or NULL. */
json_t *jobspec__norm_int(struct jobspec__vctx *c, const json_t *v, const char *path, int64_t lo,
                          int64_t hi, int64_t def);
/* A number with an integral value becomes a JSON integer, others a real. */
json_t *jobspec__number_json(struct jobspec__vctx *c, double d);
/* A resource amount in [0, max], its thousandths into *milli. Returns the normalized number or
 * NULL. */
json_t *jobspec__norm_amount(struct jobspec__vctx *c, const json_t *v, const char *path, double max,
                             int64_t *milli);
/* Optional string of at most max bytes: absent gives JSON null. */
json_t *jobspec__norm_opt_string(struct jobspec__vctx *c, const json_t *v, const char *path,
                                 size_t max, bool printable);
/* One of names (exact match); absent gives def. */
json_t *jobspec__norm_enum(struct jobspec__vctx *c, const json_t *v, const char *path,
                           const char *const *names, size_t n, const char *def);
/* Whether v is an object of at most max_entries members; records the error if not. */
bool jobspec__check_object(struct jobspec__vctx *c, const json_t *v, const char *path,
                           size_t max_entries);

/* ------------------------------------------------------------------------------------------ */
/* The nested objects (jobspec_config.c), for jobspec_validate                                  */
/* ------------------------------------------------------------------------------------------ */

/* scaling_config (v may be NULL: all defaults). Returns the normalized object, or NULL with the
 * errors recorded in c. */
json_t *jobspec__norm_scaling_config(struct jobspec__vctx *c, const json_t *v);
/* run_config (v may be NULL: all defaults), its checkpoint_config and failure_config. Returns
 * the normalized object, or NULL with the errors recorded in c. */
json_t *jobspec__norm_run_config(struct jobspec__vctx *c, const json_t *v);

#endif

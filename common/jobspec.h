/* Job-spec validation (DESIGN.md §2): a pure module, no I/O, no globals.
 *
 * jobspec_validate() checks a job submission, reports every offending field at once, and returns
 * the normalized spec (every section present, defaults filled in) that the server stores.
 * jobspec_from_json() turns a stored spec into the typed view the server's control loop hands the
 * scheduler (scaling, resources, strategy, priority, timeout); the agent reads none of it.
 *
 * Error entries are objects {"field": "scaling_config.resources_per_worker.GPU", "detail":
 * "must be an integer between 0 and 1024"}; "field" is the dotted path of the offending member
 * (array items as `entrypoint[2]`, the whole body as ""), at most one entry per path. */
#ifndef TY_JOBSPEC_H
#define TY_JOBSPEC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include <jansson.h>

#include "vocab.h"

/* Return codes of jobspec_validate() and jobspec_from_json(). */
#define JOBSPEC_OK 0
#define JOBSPEC_EINVAL (-1) /* the spec is invalid: the caller's fault (HTTP 400) */
#define JOBSPEC_ENOMEM (-2) /* out of memory: our fault (HTTP 500) */

/* Limits enforced by jobspec_validate(). */
#define JOBSPEC_NAME_MAX 128
#define JOBSPEC_PROJECT_MAX 64       /* project names (jobspec_project_name_check) */
#define JOBSPEC_ENTRYPOINT_MAX 65536 /* bytes of the string, or of each argv item */
#define JOBSPEC_ARGV_MAX 1024
#define JOBSPEC_PATH_MAX 4096              /* working_dir, run_config.storage_path */
#define JOBSPEC_PREEMPTION_GRACE_MAX 86400 /* run_config.failure_config.preemption_grace_s */
#define JOBSPEC_RESIZE_INTERVAL_MAX 86400  /* scaling_config.elastic_resize_interval_s */
#define JOBSPEC_RESIZE_INTERVAL_DEFAULT 60
#define JOBSPEC_ENV_MAX 1024 /* entries */
#define JOBSPEC_ENV_NAME_MAX 256
#define JOBSPEC_ENV_VALUE_MAX 65536
#define JOBSPEC_CONFIG_MAX 1048576 /* train_loop_config, serialized compactly */
#define JOBSPEC_WORKERS_MAX 100000
#define JOBSPEC_RESOURCES_MAX 64 /* entries of resources_per_worker */
#define JOBSPEC_RESOURCE_NAME_MAX 64
#define JOBSPEC_CPU_MAX 1000000
#define JOBSPEC_GPU_MAX 1024
#define JOBSPEC_MEMORY_MB_MAX INT64_C(1099511627776)
#define JOBSPEC_CUSTOM_MAX 1000000000
#define JOBSPEC_ACCELERATOR_MAX 64
#define JOBSPEC_PRIORITY_MIN (-1000)
#define JOBSPEC_PRIORITY_MAX 1000
#define JOBSPEC_TIMEOUT_MAX 315360000 /* seconds: 10 years of 365 days */
#define JOBSPEC_MAX_FAILURES_MAX 1000000
#define JOBSPEC_HANG_WARN_DEFAULT 300 /* seconds without progress before a hang is named */
#define JOBSPEC_NUM_TO_KEEP_MAX 1000000
#define JOBSPEC_SCORE_ATTR_MAX 256
#define JOBSPEC_METADATA_MAX 64 /* entries */
#define JOBSPEC_METADATA_KEY_MAX 128
#define JOBSPEC_METADATA_VALUE_MAX 4096
#define JOBSPEC_TAGS_MAX 32     /* tags of a job */
#define JOBSPEC_TAG_MAX 64      /* bytes of a tag */
#define JOBSPEC_NOTES_MAX 16384 /* bytes of a job's notes */

/* The spec's enumerations, from the X-macros of vocab.h: JOBSPEC_BACKEND_TORCH, ...,
 * JOBSPEC_STRATEGY_PACK, ..., JOBSPEC_SCORE_MAX, JOBSPEC_SCORE_MIN. */
enum jobspec_backend {
#define JOBSPEC_BACKEND_ENUM(name, text) JOBSPEC_BACKEND_##name,
    JOBSPEC_BACKEND_MAP(JOBSPEC_BACKEND_ENUM)
#undef JOBSPEC_BACKEND_ENUM
};

enum jobspec_strategy {
#define JOBSPEC_STRATEGY_ENUM(name) JOBSPEC_STRATEGY_##name,
    JOBSPEC_STRATEGY_MAP(JOBSPEC_STRATEGY_ENUM)
#undef JOBSPEC_STRATEGY_ENUM
};

enum jobspec_score_order {
#define JOBSPEC_SCORE_ORDER_ENUM(name, text) JOBSPEC_SCORE_##name,
    JOBSPEC_SCORE_ORDER_MAP(JOBSPEC_SCORE_ORDER_ENUM)
#undef JOBSPEC_SCORE_ORDER_ENUM
};

/* A custom resource request: `amount_milli` thousandths of one unit of `name`. */
struct jobspec_resource {
    char *name; /* owned */
    int64_t amount_milli;
};

/* An environment variable of the spec's env or secret_env. */
struct jobspec_env {
    char *name;  /* owned */
    char *value; /* owned */
};

/* Typed view of a valid spec. Strings and arrays are owned; free with jobspec_clear(). */
struct jobspec {
    char *name;
    char **argv; /* NULL-terminated; a string entrypoint becomes {"/bin/sh", "-c", s} */
    size_t argc;
    bool entrypoint_is_string; /* the entrypoint was that string s (argv[2]) */
    char *working_dir;         /* NULL: the agent's default */
    struct jobspec_env *env;   /* n_env variables, in spec order */
    size_t n_env;
    struct jobspec_env *secret_env; /* n_secret_env; only the workers see the values */
    size_t n_secret_env;
    json_t *train_loop_config; /* owned reference: any JSON, {} when the submission had none */
    char *code_package;        /* NULL: none */
    char *resume_from_package; /* NULL: none */
    enum jobspec_backend backend;
    int32_t num_workers_min; /* equal to max unless elastic */
    int32_t num_workers_max;
    bool use_gpu;
    int64_t cpu_milli;               /* per worker, thousandths of a CPU */
    int32_t gpu;                     /* per worker */
    int64_t memory_mb;               /* per worker */
    struct jobspec_resource *custom; /* per worker, only amounts > 0, in spec order */
    size_t n_custom;
    enum jobspec_strategy strategy;
    char *accelerator_type;           /* NULL: any GPU */
    char *storage_path;               /* NULL: the server's artifact store */
    int32_t num_to_keep;              /* 0: keep every checkpoint */
    char *checkpoint_score_attribute; /* NULL: retention by age */
    enum jobspec_score_order score_order;
    int32_t max_failures;           /* -1: unlimited */
    int64_t resume_from_checkpoint; /* 0: start fresh */
    int32_t priority;
    double timeout_s; /* 0: no limit */
};

/* Validates a job submission `in` (DESIGN.md §2; the rules are listed in jobspec.c).
 * Returns JOBSPEC_OK and sets *out to a NEW normalized object (caller json_decref()s it) and
 * *errors to NULL. Returns JOBSPEC_EINVAL with *out NULL and *errors a NEW non-empty array of
 * {"field", "detail"} objects, one per offending field, in a stable order. Returns JOBSPEC_ENOMEM
 * with both NULL. Does not modify or keep `in`; the result shares no values with it.
 * Normalizing is idempotent: validating a normalized spec returns an equal spec. */
int jobspec_validate(const json_t *in, json_t **out, json_t **errors);
/* Whether `name` is a valid project name (the spec's "project", POST /api/v1/projects): 1 to
 * JOBSPEC_PROJECT_MAX characters of a-z, 0-9, '.', '_' and '-', the first a letter or digit.
 * Returns NULL when it is, else a static text saying what is wrong ("must ..."). */
const char *jobspec_project_name_problem(const char *name);

/* Why `v` is no valid list of tags (spec.tags, PATCH /api/v1/jobs/{id}): an array of at most
 * JOBSPEC_TAGS_MAX strings of 1 to JOBSPEC_TAG_MAX bytes of letters, digits and `-_.:/=+@`;
 * NULL when it is one. Static text. */
const char *jobspec_tags_problem(const json_t *v);
/* Why `v` is no valid notes (spec.notes, PATCH): a string of at most JOBSPEC_NOTES_MAX bytes
 * without NUL; NULL when it is. Static text. */
const char *jobspec_notes_problem(const json_t *v);

/* Fills *spec from `json` (normally a normalized spec; any submission is accepted and validated
 * first). Returns JOBSPEC_OK; on failure returns JOBSPEC_EINVAL or JOBSPEC_ENOMEM, leaves *spec
 * zeroed and writes "field: detail" of the first problem to err (if errlen > 0).
 * The caller frees a filled spec with jobspec_clear(). */
int jobspec_from_json(const json_t *json, struct jobspec *spec, char *err, size_t errlen);

/* Frees what *spec owns and zeroes it. Safe on a zeroed spec. */
void jobspec_clear(struct jobspec *spec);

/* Wire names ("torch", "PACK", "max"); NULL for a value outside the enum. */
const char *jobspec_backend_name(enum jobspec_backend backend);
const char *jobspec_strategy_name(enum jobspec_strategy strategy);
const char *jobspec_score_order_name(enum jobspec_score_order order);

/* Parse a wire name (exact, case-sensitive). Return 0 and set *out, or -1 if unknown. */
int jobspec_backend_from_string(const char *s, enum jobspec_backend *out);
int jobspec_strategy_from_string(const char *s, enum jobspec_strategy *out);
int jobspec_score_order_from_string(const char *s, enum jobspec_score_order *out);

#endif

/* Shared by the files of the agent protocol module (agent_proto*.c) only. */
#ifndef TY_AGENT_PROTO_INTERNAL_H
#define TY_AGENT_PROTO_INTERNAL_H

#include "agent_proto.h"

/* Reads the `report` message text[0..len) into *r without building JSON objects (the hot path of
 * issue 27), when it is valid JSON and its fields are plainly written: each as the protocol has
 * it, written once, its name without an escape. Returns 0, or -1 (nothing held) for any other
 * text, which aproto__parse_report then reads or refuses with its reason. */
int aproto__scan_report(const char *text, size_t len, struct aproto_report *r);
/* Validates a `report` message (root: the whole message) into *r (its own copy: r->owned, freed
 * by the caller, also on failure). Returns 0, or -1 with the reason, naming the field, in err. */
int aproto__parse_report(json_t *root, struct aproto_report *r, char *err, size_t errlen);

/* Validates a `progress` message (root: the whole message) into *rows (malloc'd, *n entries,
 * strings borrowed from root; NULL when empty). 0, or -1 with err naming the field. */
int aproto__parse_progress(json_t *root, struct aproto_progress **rows, size_t *n, char *err,
                           size_t errlen);

/* Validates a `gpus` message (root: the whole message) into *rows (malloc'd, *n entries,
 * strings borrowed from root; NULL when empty). 0, or -1 with err naming the field. */
int aproto__parse_gpus(json_t *root, struct aproto_gpu_row **rows, size_t *n, char *err,
                       size_t errlen);

/* Builds one element of a message's array of rows from `row`; NULL when out of memory. */
typedef json_t *(*aproto__row_json_fn)(const void *row);
/* The text (malloc'd) of {"type": type, key: [fn(row) for each of the n rows of `size` bytes]}:
 * the one loop of the progress, gpus and usage messages. NULL when out of memory. */
char *aproto__msg_rows(const char *type, const char *key, const void *rows, size_t n, size_t size,
                       aproto__row_json_fn fn);
/* Reads a worker row's key, job_id, attempt and rank, of o (row i of `workers`) into the out
 * parameters (job_id borrowed). 0, or -1 with err naming the field. */
int aproto__parse_worker_key(const json_t *o, size_t i, const char **job_id, int64_t *attempt,
                             int64_t *rank, char *err, size_t errlen);

/* Parses one element of a message's array of rows (index i) into `row`. 0, or -1 with err naming
 * the field. */
typedef int (*aproto__row_fn)(const json_t *o, size_t i, void *row, char *err, size_t errlen);
/* Parses root[key], an array of at most max objects, into *rows (calloc'd: n elements of `size`
 * bytes, NULL when empty), each element by fn: the one loop of the progress, gpus and usage
 * messages. 0, or -1 with err naming the field (nothing allocated). */
int aproto__parse_rows(json_t *root, const char *key, size_t max, size_t size, aproto__row_fn fn,
                       void **rows, size_t *n, char *err, size_t errlen);

/* Validates a `usage` message (root: the whole message) into *rows (malloc'd, *n entries,
 * strings borrowed from root; NULL when empty). 0, or -1 with err naming the field. */
int aproto__parse_usage(json_t *root, struct aproto_usage **rows, size_t *n, char *err,
                        size_t errlen);

/* Validates an `artifact_store` message (root: the whole message) into *s (strings borrowed
 * from root). 0, or -1 with err naming the field. */
int aproto__parse_store_status(json_t *root, struct aproto_store_status *s, char *err,
                               size_t errlen);

/* Validates a `disk_full` message (root: the whole message) into *d (strings borrowed from
 * root). 0, or -1 with err naming the field. */
int aproto__parse_disk_full(json_t *root, struct aproto_disk_full *d, char *err, size_t errlen);

/* Reads registered.api_urls of root (absent or null: *urls NULL, *n 0) into *urls (malloc'd,
 * strings borrowed from root). 0, or -1 with err naming the field. */
int aproto__parse_api_urls(json_t *root, const char ***urls, size_t *n, char *err, size_t errlen);

#endif

/* Shared by the files of the agent protocol module (agent_proto*.c) only. */
#ifndef TY_AGENT_PROTO_INTERNAL_H
#define TY_AGENT_PROTO_INTERNAL_H

#include "agent_proto.h"

/* Validates a `report` message (root: the whole message) into *r, whose strings are borrowed
 * from root and whose `numbers` is a new object (freed by the caller, also on failure). Returns 0,
 * or -1 with the reason, naming the field, in err. */
int aproto__parse_report(json_t *root, struct aproto_report *r, char *err, size_t errlen);

/* Validates a `progress` message (root: the whole message) into *rows (malloc'd, *n entries,
 * strings borrowed from root; NULL when empty). 0, or -1 with err naming the field. */
int aproto__parse_progress(json_t *root, struct aproto_progress **rows, size_t *n, char *err,
                           size_t errlen);

/* Validates a `gpus` message (root: the whole message) into *rows (malloc'd, *n entries,
 * strings borrowed from root; NULL when empty). 0, or -1 with err naming the field. */
int aproto__parse_gpus(json_t *root, struct aproto_gpu_row **rows, size_t *n, char *err,
                       size_t errlen);

/* Validates a `usage` message (root: the whole message) into *rows (malloc'd, *n entries,
 * strings borrowed from root; NULL when empty). 0, or -1 with err naming the field. */
int aproto__parse_usage(json_t *root, struct aproto_usage **rows, size_t *n, char *err,
                        size_t errlen);

#endif

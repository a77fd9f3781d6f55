/*
 * follow_format.h - the lines the follow commands print for stream rows (docs/streams.md), as
 * pure functions of a parsed row: tests/unit/test_cli_stream.c checks them.
 */
#ifndef TY_CLI_FOLLOW_FORMAT_H
#define TY_CLI_FOLLOW_FORMAT_H

#include "stream_proto.h"
#include "strbuf.h"

#include <stdbool.h>

/*
 * `trainyard events`: appends one line (no newline) for an `event` (status change or warning),
 * `worker`, `checkpoint` or `log_dropped` row:
 *   2026-11-23T07:43:04Z status RUNNING (attempt 1): all workers running
 *   2026-11-23T07:43:05Z worker rank 1 EXITED (attempt 1) node_id n1 pid 4242 exit_code 0
 *   2026-11-23T07:43:05Z checkpoint 3 COMMITTED (attempt 1) step 200 loss=0.25
 * Returns false (nothing appended) for the other kinds (reports, logs).
 */
bool follow_format_event(struct strbuf *sb, const struct stream_msg *m);

/*
 * `trainyard metrics --follow`: appends "TIME rank R step S name=value ..." for a `report` row,
 * keeping only metric `name` when it is not NULL and only rank `rank` when it is >= 0. Returns
 * false (nothing appended) for other kinds, or when the filters leave nothing.
 */
bool follow_format_report(struct strbuf *sb, const struct stream_msg *m, const char *name,
                          long rank);

/* `--wait --follow`: appends "[report] step S name=value ..." for a rank-0 `report` row; false
 * for anything else. */
bool follow_format_rank0_report(struct strbuf *sb, const struct stream_msg *m);

/* The status of an `event` row, or NULL (another kind, or no status). */
const char *follow_event_status(const struct stream_msg *m);

/* Whether the row says the job reached a terminal status (SUCCEEDED, FAILED, STOPPED). */
bool follow_is_terminal(const struct stream_msg *m);

#endif

/* The names (keys of reports' values) the control thread knows its jobs' report_names hold
 * (migration 0043: what a chart's read looks names up by), so that a batch of reports sends only
 * the names not known yet (store_reports_send) and the reports' trigger does not expand every key
 * of every report again (issue 27: ~60 us of PostgreSQL per report of 100 numbers). Known means
 * committed: a name is noted only after the batch that carried it committed, from a report of a
 * worker the node runs. Forgetting is safe (the name is sent again; ON CONFLICT DO NOTHING), so
 * past REPORT_NAMES_MAX entries the set starts over. Not thread-safe: the control thread's. */
#ifndef TY_REPORT_NAMES_H
#define TY_REPORT_NAMES_H

#include "store.h"

#include <stddef.h>

struct report_names;

/* An empty set. NULL on OOM. */
struct report_names *report_names_new(void);
void report_names_free(struct report_names *s);

/* Lists in `out` (emptied first) the names of rows[0..n) their jobs' names known do not hold,
 * each once per series (job, attempt, rank, node: all of a series' reports are of a known worker
 * or none are) with the first of the series' reports that carries it; the names point into the
 * rows' values. 0, or -1 on OOM (out then lists nothing: the caller sends no names, and the
 * trigger finds them). */
int report_names_list(const struct report_names *s, const struct store_report *rows, size_t n,
                      struct store_report_names *out);

/* The batch that sent `listed` committed with outcomes outs[] (per row): the names of reports of
 * known workers are known from now on. */
void report_names_settle(struct report_names *s, const struct store_report *rows,
                         const struct store_report_names *listed,
                         const struct store_report_outcome *outs);

/* Frees out's arrays. */
void report_names_list_free(struct store_report_names *out);

#endif

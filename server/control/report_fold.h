/* The blocks of report_blocks (migration 0046: each series' reports summed up per name, 16
 * consecutive reports a block) summed up by the control thread as it sends a series' reports,
 * from the values it parsed anyway, and sent with the batch (store_report_blocks). The leader's
 * maintenance summed up every report again from its stored values, ~200 us of PostgreSQL per
 * report of 100 numbers, more than storing it (issue 27); it now has nothing to do for a series
 * whose reports the control thread saw whole.
 *
 * A series' block is sent once a report of a newer block of the series comes (as the maintenance
 * sums up only the blocks below the newest report's): the reports it saw in that block, in
 * strictly rising seq, every value a number. Whether the block is what the stored reports hold is
 * the batch's to check (every report of it in the batch stored now, as many stored as summed up:
 * store/sql/ty_report_ingest_batch.sql); the caller says which reports were not stored now
 * (report_fold_forget), and those blocks are then left to the maintenance, as is any block whose
 * reports this thread did not all see (a restart, a report written by SQL). Losing the state is
 * safe, so past REPORT_FOLD_MAX series it starts over. Not thread-safe: the control thread's. */
#ifndef TY_REPORT_FOLD_H
#define TY_REPORT_FOLD_H

#include "store.h"

struct report_fold;

/* An empty state. NULL on OOM. */
struct report_fold *report_fold_new(void);
void report_fold_free(struct report_fold *f);

/* Starts a batch: empties `out` (its rows point into its own text) and, past REPORT_FOLD_MAX
 * series, forgets every series. */
void report_fold_begin(struct report_fold *f, struct store_report_blocks *out);

/* Sums up `r`, the next report of the batch (in the order it is sent); when it is the first of a
 * newer block of its series, the block before, when summed up whole, goes to `out`. A report
 * out of order, a value that is not a number, or memory running out leaves its block to the
 * maintenance. */
void report_fold_add(struct report_fold *f, const struct store_report *r,
                     struct store_report_blocks *out);

/* `r`, added to a batch, was not stored by it (a resend, a worker the node does not run, past the
 * job's report bytes): the block it belongs to is not summed up here. */
void report_fold_forget(struct report_fold *f, const struct store_report *r);

/* Forgets every series (a batch that failed whole). */
void report_fold_clear(struct report_fold *f);

/* Frees out's arrays. */
void report_fold_blocks_free(struct store_report_blocks *out);

#endif

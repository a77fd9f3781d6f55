/* Naming hangs (issue 12): from the last known progress of every rank of an attempt, decide
 * whether the attempt is stuck and say where each rank is, e.g.
 *   "no progress for 45 s: rank 3 in allreduce #1842; ranks 0-2, 4-7 waiting in allreduce #1843"
 * Pure: no I/O, no clock (ages are given), no globals. Prefix hang_. */
#ifndef SRV_HANG_H
#define SRV_HANG_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* One rank's last heartbeat, as the server stored it. */
struct hang_rank {
    int64_t rank;
    bool known;             /* a heartbeat arrived (false: nothing is known of it) */
    const char *op;         /* the collective it is in or last left; NULL: none yet */
    int64_t coll_seq;       /* that collective's number; 0: none yet */
    bool in_collective;     /* inside collective coll_seq */
    int64_t report_seq;     /* reports it made */
    double progress_age_s;  /* since op, coll_seq, in_collective or report_seq last changed */
    double heartbeat_age_s; /* since its last heartbeat */
};

/* Writes ranks[0..n) as a compressed list of rank numbers into out ("0-2, 4, 6-7"; input in any
 * order, duplicates ignored). Truncated to outlen - 1 bytes. Returns the length it needed (like
 * snprintf). */
size_t hang_format_ranks(const int64_t *ranks, size_t n, char *out, size_t outlen);

/* Decides whether the attempt whose ranks are r[0..n) hangs after warn_s seconds: every rank is
 * known, none progressed for warn_s, and at least one waits in a collective, or the ranks are not
 * all at the same place (collective number, then report number), or one is silent: no heartbeat
 * for warn_s or 10 s, whichever is longer (heartbeats arrive about every 2 s). Ranks that are still
 * computing between the same collectives do not hang. When it hangs, returns true, sets *stalled_s
 * to the seconds since the last progress of any rank, and writes into out (truncated to outlen - 1
 * bytes with "...") the ranks grouped by where they are, the furthest behind first: "no progress
 * for 45 s: rank 3 in allreduce #1842; ranks 0-2, 4-7 waiting in allreduce #1843" A rank outside
 * collectives reads "after allreduce #12", one before any "before any collective"; report numbers
 * are added ("after report #5") when they differ between ranks or no rank entered a collective; a
 * silent rank gets "(no heartbeat for 40 s)". Returns false (out untouched) otherwise. r may be
 * reordered. */
bool hang_analyze(struct hang_rank *r, size_t n, double warn_s, double *stalled_s, char *out,
                  size_t outlen);

#endif

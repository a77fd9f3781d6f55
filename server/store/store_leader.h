/* The leadership connection (control/leader.c, docs/high-availability.md): a PostgreSQL session
 * of its own, outside the pool, that holds the leader's advisory lock and LISTENs for the
 * servers' notifications. PostgreSQL releases the lock with the session, so closing the handle,
 * or the connection breaking, gives the leadership up.
 *
 * Each function that talks to the database returns a db_qs (db.h): DB_SOFT_ERROR when the
 * connection broke (logged); the handle is then of no further use and the caller closes it. */
#ifndef SRV_STORE_LEADER_H
#define SRV_STORE_LEADER_H

#include "db.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct store_leader;

/* Connects to `conninfo` with short TCP keepalives both ways (a leader whose host vanishes loses
 * the lock in seconds) and LISTENs on the n `channels`. Returns the handle, or NULL with the
 * reason in err: a connection that failed (*listen_failed false) or a LISTEN that failed
 * (*listen_failed true). Close it with store_leader_close. */
struct store_leader *store_leader_open(const char *conninfo, const char *const *channels, size_t n,
                                       bool *listen_failed, char *err, size_t errlen);
/* pg_try_advisory_lock(key): 1 when this session holds the lock now, 0 when another does, or
 * DB_SOFT_ERROR. */
int store_leader_try_lock(struct store_leader *sl, int64_t key);
/* Checks the connection with a round trip: 0, or DB_SOFT_ERROR. */
int store_leader_ping(struct store_leader *sl);
/* Notification callback: the channel and its payload ("" for none), both borrowed for the call. */
typedef void (*store_leader_notify_fn)(void *arg, const char *channel, const char *payload);
/* Delivers the notifications already received, then waits up to `timeout_ms` for more and
 * delivers those; the wait also ends as soon as `wake_fd` (the caller's, -1 for none) is readable,
 * which it leaves unread. Returns how many were delivered, or DB_SOFT_ERROR (those received before
 * the connection broke have been delivered). */
int store_leader_wait(struct store_leader *sl, int wake_fd, int timeout_ms,
                      store_leader_notify_fn fn, void *arg);
/* Closes the session (releasing the lock). NULL is a no-op. */
void store_leader_close(struct store_leader *sl);

#endif

/* Leadership among the servers sharing one database, and the notifications between them
 * (docs/high-availability.md).
 *
 * A thread of its own holds a dedicated PostgreSQL connection (store_leader.h, not one of the
 * pool): it tries pg_try_advisory_lock(LEADER_LOCK_KEY) until it gets it, and from then on this
 * server is the leader until that session ends (the process dies, or the connection breaks:
 * PostgreSQL releases the lock with the session, and the thread checks its connection every
 * second). The same connection LISTENs on the channels below and hands each notification to a hook.
 */
#ifndef SRV_LEADER_H
#define SRV_LEADER_H

#include <stdbool.h>
#include <stdint.h>

/* The advisory lock the leader holds ("trainyar" in ASCII). */
#define LEADER_LOCK_KEY INT64_C(0x747261696e796172)
/* Payload "JOB ATTEMPT ORIGIN": attempt ATTEMPT of job JOB was placed by server ORIGIN; every
 * other server sends its launches to the agents connected to it. Sent by store_place. */
#define LEADER_CHANNEL_LAUNCH "trainyard_launch"
/* Sent by a follower when a scheduling pass may place something (a submit, a worker exit, a
 * node registered): the leader runs one. */
#define LEADER_CHANNEL_KICK "trainyard_kick"

/* Payload "JOB ORIGIN": job JOB was deleted through server ORIGIN; every other server tells its
 * agents (`forget`). Sent by the control thread of ORIGIN. */
#define LEADER_CHANNEL_FORGET "trainyard_forget"

struct leader_hooks {
    void *arg;
    /* Leadership was gained or lost (read it with leader_is_leader). */
    void (*changed)(void *arg);
    /* A notification on one of the channels above. */
    void (*notified)(void *arg, const char *channel, const char *payload);
    /* The connection was (re)made and LISTENs again: notifications sent while it was down are
     * lost, so the owner catches up on what they would have said. */
    void (*listening)(void *arg);
};

struct leader;

/* Starts the thread on `conninfo` (a PostgreSQL connection string). NULL on failure (logged). */
struct leader *leader_start(const char *conninfo, const struct leader_hooks *hooks);
/* Whether this server holds the lock now. Any thread; NULL: false. */
bool leader_is_leader(const struct leader *l);
/* Stops the thread and closes its connection (releasing the lock). NULL is a no-op. */
void leader_stop(struct leader *l);

#endif

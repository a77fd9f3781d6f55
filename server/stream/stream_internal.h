/* Shared by stream*.c only. Everything here is touched by the stream thread alone, except
 * `stopping`. */
#ifndef SRV_STREAM_INTERNAL_H
#define SRV_STREAM_INTERNAL_H

#include "hub.h"
#include "identity.h"
#include "stream.h"
#include "stream_proto.h"

#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#define STREAM_PAGE 1000         /* rows per read */
#define STREAM_PAGES_PER_TURN 16 /* live reads of one topic before the loop looks elsewhere */
#define STREAM_MAX_SUBS 64       /* subscriptions per connection */

struct stream_client;

/* One subscription: a client following a topic. */
struct stream_sub {
    struct stream_client *client;
    struct stream_topic *topic;
    int64_t sent; /* last seq queued to the client (at first: its `after`) */
    bool live;    /* sent >= topic->cursor: it gets the live rows; else it is catching up */
    bool batch;   /* batched delivery (hub_stream_send) */
};

/* A job's stream or the cluster's, as followed by its subscribers.
 *
 * Invariant: no row with seq <= cursor can still appear (every one is committed or never will
 * be), so reading (sent, cursor] from the table gives a catching-up subscriber exactly what the
 * live ones got. For a job that holds from the start (its seqs are taken under the job's row
 * lock). For the cluster (a sequence: commits may come out of order) the cursor only passes a
 * hole once the hole is known to stay empty (stream_deliverable), and a fresh cursor is `ready`
 * only after the transactions running when it was read have ended. */
struct stream_topic {
    struct stream_topic *next; /* job topics: the list in struct stream */
    int64_t job;               /* 0: the cluster */
    int64_t cursor;
    bool dirty; /* rows after the cursor may exist (a write committed, or a peer said so) */
    struct stream_sub **subs;
    size_t nsubs, cap;
    /* cluster only */
    bool ready;          /* the cursor holds the invariant */
    char *wait_snapshot; /* waiting for this snapshot's running transactions to end, or NULL */
    int64_t wait_limit;  /* ... after which holes up to here are final */
    int64_t settled;     /* holes at or below this are final */
    double next_wait_check;
};

struct stream_client {
    struct stream_client *next;
    uint64_t conn;
    bool authed;
    bool counted;            /* an accepted connection: counts toward the cap and the gauge */
    bool closing;            /* its last message is queued: waiting for HUB_CLOSED */
    bool waiting_drain;      /* catch-up paused until HUB_DRAINED */
    struct srv_identity who; /* once authed: whose jobs it may follow (store_job_visible) */
    struct stream_sub *subs[STREAM_MAX_SUBS];
    size_t nsubs;
};

struct stream {
    struct srv *srv;
    struct hub *hub;
    struct db_conn *db;
    pthread_t thread;
    int wake_fd; /* eventfd: the hub queued an event, or stop */
    atomic_bool stopping;
    size_t queue_max;
    size_t max_clients;
    size_t nclients; /* counted ones */
    struct stream_client *clients;
    struct stream_topic *topics; /* jobs with subscribers */
    struct stream_topic cluster;
    double next_connect;     /* monotonic seconds: next reconnection attempt */
    double backoff_until;    /* after a failed query: no reads before this */
    bool flush;              /* messages were queued since the last hub_flush */
    bool peers_pending;      /* writes committed here that the other servers were not told of */
    double next_peer_notify; /* monotonic seconds: the earliest next NOTIFY to them */
};

/* A query failed: reads pause for a moment (no busy loop on a broken database). */
void stream__db_failed(struct stream *st);

/* ---- stream_clients.c ---- */
void stream__on_event(struct stream *st, struct hub_event *ev);
/* Queues one message (text taken over) to a client; a full queue drops the client (slow). */
void stream__send(struct stream *st, struct stream_client *cl, char *text);
/* Sends `closing` with the client's resume points, forgets its subscriptions and closes it. */
void stream__drop(struct stream *st, struct stream_client *cl, const char *reason);
void stream__free_clients(struct stream *st);

/* ---- stream_topics.c ---- */
/* Subscribes cl to job `job` (0: the cluster) from `after`; answers `subscribed` or an error. */
void stream__subscribe(struct stream *st, struct stream_client *cl, int64_t job, int64_t after,
                       bool batch);
void stream__unsubscribe(struct stream *st, struct stream_client *cl, int64_t job);
/* Removes a subscription (sub freed); frees its topic when it was the last (not the cluster). */
void stream__sub_remove(struct stream *st, struct stream_sub *sub);
/* The topic of job `job` (0: the cluster), or NULL. */
struct stream_topic *stream__topic(struct stream *st, int64_t job);
/* Reads and fans out what is new on dirty topics. Returns true when work is left for now. */
bool stream__fan_out(struct stream *st);
/* One page of catch-up for each client that has room. Returns true when work is left for now. */
bool stream__catch_up(struct stream *st);
/* The cluster's pending wait: checks whether its transactions ended. */
void stream__cluster_wait(struct stream *st);
void stream__free_topics(struct stream *st);

#endif

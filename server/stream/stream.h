/* The stream thread: serves the subscribers of /stream (docs/streams.md).
 *
 * It owns one database connection that LISTENs on ty_stream and ty_cluster. When a job's stream
 * grows it reads the new rows once (one query per notified job, however many subscribers) and
 * queues each row's message to every subscriber of that job; the cluster stream likewise. A new
 * subscription first gets the rows after its `after` from the table (catch-up, paced by how fast
 * the subscriber reads), then the live rows: both are done by this one thread, in order, so a
 * subscriber sees each seq once and none is skipped. Subscribers' connections live in the hub
 * (hub.h); a subscriber that lets its bounded queue fill up is sent `closing` with its resume
 * points and closed, so neither agents nor other subscribers ever wait for it. */
#ifndef SRV_STREAM_H
#define SRV_STREAM_H

struct srv;
struct hub;
struct stream;

/* Starts the thread and attaches it to `hub` (subscribers are accepted from then on). Returns
 * NULL (logged) on failure. */
struct stream *stream_start(struct srv *srv, struct hub *hub);
/* Sends `closing` to every subscriber, detaches from the hub and joins the thread. Call it
 * before the hub stops. NULL is a no-op. */
void stream_stop(struct stream *st);

#endif

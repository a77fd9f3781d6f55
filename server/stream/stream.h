/* The stream thread: serves the subscribers of /stream (docs/streams.md).
 *
 * It owns one database connection that LISTENs on ty_stream. It learns that streams may have
 * grown from this server's own committed writes (db_writes_fd) and from the other servers of an
 * HA group (a coalesced NOTIFY ty_stream, which this thread sends for its own server's writes,
 * at most every 5 ms: none is sent inside a writing transaction, since PostgreSQL serialises the
 * commits of notifying transactions); then one query tells which followed jobs grew. For each
 * it reads the new rows once (one query per grown job, however many subscribers) and
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

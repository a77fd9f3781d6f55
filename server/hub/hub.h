/* The websocket hub: a libwebsockets server on --ws-port, served by its own thread.
 *
 * Two subprotocols share the port and never mix: agents (APROTO_SUBPROTOCOL, any path but
 * /stream) and live-stream subscribers (HUB_STREAM_SUBPROTOCOL on HUB_STREAM_PATH,
 * docs/streams.md). Each kind has its own event queue and its own consumer thread: agents' events
 * go to the control thread (control.c, hub_next_event), subscribers' to the stream thread
 * (stream.c, hub_next_stream_event) once it has attached.
 *
 * The lws thread never blocks and never touches the database. Consumers queue replies with
 * hub_send() / hub_stream_send(), which wake the lws thread with lws_cancel_service(); the lws
 * thread writes them in the WRITEABLE callback, one per callback (libwebsockets'
 * minimal-ws-server-threads pattern). Connections are named by an id that is never reused, so a
 * message for a connection that has closed is dropped rather than sent to a stranger.
 *
 * A subscriber's queue is bounded (hub_stream_attach's queue_max): hub_stream_send queues only
 * what fits and says so, and the stream thread decides what to do with a subscriber that falls
 * behind; nothing a subscriber does can make the lws thread, an agent or another subscriber
 * wait. */
#ifndef SRV_HUB_H
#define SRV_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define HUB_STREAM_SUBPROTOCOL "trainyard-stream.v1"
#define HUB_STREAM_PATH "/stream"
/* Largest message a subscriber may send (theirs are a few dozen bytes). */
#define HUB_STREAM_MAX_IN 65536
/* Seconds a subscriber being closed may take to read what was queued before the close. */
#define HUB_CLOSE_GRACE_S 60

struct hub;

/* Limits on peers that have not authenticated yet (an agent before its register is accepted, a
 * subscriber before its auth), and on connections in all. */
struct hub_limits {
    size_t preauth_max_bytes; /* largest message before authentication */
    int max_conns;            /* open websocket connections, at most */
    int max_preauth_per_ip;   /* unauthenticated connections from one address, at most */
    int auth_timeout_s;       /* an unauthenticated connection is closed after this long */
    size_t in_queue_max;      /* events waiting for a consumer; past it reading pauses */
    size_t out_queue_max;     /* messages waiting for one agent; past it the agent is closed */
};

enum hub_event_kind {
    HUB_CONNECTED,
    HUB_MESSAGE,
    HUB_CLOSED,
    HUB_DRAINED, /* subscribers only: the queue went down to the mark of hub_stream_watch() */
};

struct hub_event {
    enum hub_event_kind kind;
    uint64_t conn;
    char *text; /* HUB_MESSAGE: the message (malloc'd, NUL-terminated; the taker frees it) */
    size_t len;
    char peer[64]; /* HUB_CONNECTED: peer address */
};

/* Starts the hub on host:port in its own thread, serving wss:// with the PEM files tls_cert and
 * tls_key when tls_cert is not NULL. A peer silent for ping_s seconds is pinged, and closed when
 * nothing (not even a pong) came for 3 * ping_s. Returns NULL (logged) on failure. `wake` is
 * called (from the lws thread, under the hub's lock: it must not call the hub) after each queued
 * agent event. Subscribers are refused until hub_stream_attach(). */
struct hub *hub_start(const char *host, int port, const char *tls_cert, const char *tls_key,
                      int ping_s, void (*wake)(void *), void *wake_arg);
/* Stops the lws thread, closes every connection, frees queued messages. */
void hub_stop(struct hub *hub);
/* Replaces the limits (hub_start begins with the option table's defaults); they apply to
 * connections made afterwards and to messages received afterwards. */
void hub_set_limits(struct hub *hub, const struct hub_limits *limits);
/* Marks `conn` authenticated (a register accepted, a subscriber's auth): the pre-authentication
 * message limit and deadline no longer apply, and it no longer counts against its address. */
void hub_authenticated(struct hub *hub, uint64_t conn);
/* The Host header of connection conn's handshake (the name and port its peer dialled) into out
 * (n bytes). 0, or -1 when the connection is gone or sent none. Any thread. */
int hub_conn_host(struct hub *hub, uint64_t conn, char *out, size_t n);

/* ---- agents (the control thread) ---- */

/* Takes the oldest agent event into *ev; returns false when none is queued. */
bool hub_next_event(struct hub *hub, struct hub_event *ev);
/* Queues `text` (copied) for connection `conn` and wakes the lws thread. Past out_queue_max
 * waiting messages (an agent that does not read) the connection is closed instead (the agent
 * reconnects and resends what was not acked) and -1 returned. Returns -1 if
 * the connection is gone. */
int hub_send(struct hub *hub, uint64_t conn, const char *text, size_t len);
/* Closes the connection after its queued messages are written. */
void hub_close(struct hub *hub, uint64_t conn);

/* ---- subscribers of /stream (the stream thread) ---- */

/* A message text that can be queued to many connections without a copy per connection:
 * reference counted, freed by the last hub_msg_unref (any thread). */
struct hub_msg;
/* Copies text into a new message with one reference. NULL when out of memory. */
struct hub_msg *hub_msg_new(const char *text, size_t len);
/* Takes over `text` (malloc'd), frees it, and returns the message, or NULL (text freed) when
 * out of memory or text is NULL. */
struct hub_msg *hub_msg_steal(char *text);
void hub_msg_unref(struct hub_msg *m);

/* Starts accepting subscribers: their events go to hub_next_stream_event(), and `wake` is called
 * (as hub_start's) after each one is queued. Each subscriber may have at most queue_max
 * messages waiting to be written. */
void hub_stream_attach(struct hub *hub, void (*wake)(void *), void *wake_arg, size_t queue_max);
/* Refuses new subscribers and closes the open ones (after a grace for what they were sent).
 * Their HUB_CLOSED events are still queued; nothing wakes anyone any more. */
void hub_stream_detach(struct hub *hub);
/* Takes the oldest subscriber event into *ev; returns false when none is queued. */
bool hub_next_stream_event(struct hub *hub, struct hub_event *ev);
/* Queues msgs[0..n) to subscriber `conn`, in order, as far as its queue has room (each queued
 * message gains a reference; the caller keeps its own). `batch`: they are `event` messages of a
 * subscription that asked for batched delivery: consecutive ones written together share one
 * frame, {"type":"events","events":[...]} (a lone one goes out as it is); the bound still counts
 * messages. Does not wake the lws thread: call hub_flush() after a round of sends. Returns how
 * many were queued (fewer than n: the queue is full), or -1 when the connection is gone or
 * closing. *depth (when non-NULL) receives the queue's length afterwards. */
int hub_stream_send(struct hub *hub, uint64_t conn, struct hub_msg *const *msgs, size_t n,
                    bool batch, size_t *depth);
/* Queues `msg` after everything already queued, whatever the bound; once it is written the
 * connection's sending side is shut, and the connection closed when the peer closes it (or after
 * HUB_CLOSE_GRACE_S). Later sends to it are refused. Returns 0, or
 * -1 when the connection is gone. Does not wake: call hub_flush(). */
int hub_stream_send_last(struct hub *hub, uint64_t conn, struct hub_msg *msg);
/* Asks for one HUB_DRAINED event once subscriber `conn` has at most `mark` messages queued
 * (at once if it has no more already). */
void hub_stream_watch(struct hub *hub, uint64_t conn, size_t mark);
/* True when no subscriber has messages waiting to be written. */
bool hub_stream_idle(struct hub *hub);
/* Wakes the lws thread to write what hub_stream_send* queued. */
void hub_flush(struct hub *hub);

#endif

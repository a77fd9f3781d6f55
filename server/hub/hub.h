/* The websocket hub: a libwebsockets server on --ws-port, served by its own thread.
 *
 * The lws thread never blocks and never touches the database. Messages from peers are queued
 * for the control thread (control.c), which takes them with hub_next_event(); the control thread
 * queues replies with hub_send(), which wakes the lws thread with lws_cancel_service(); the lws
 * thread writes them in the WRITEABLE callback, one per callback (libwebsockets'
 * minimal-ws-server-threads pattern). Connections are named by an id that is never reused, so a
 * message for a connection that has closed is dropped rather than sent to a stranger. */
#ifndef SRV_HUB_H
#define SRV_HUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct hub;

enum hub_event_kind { HUB_CONNECTED, HUB_MESSAGE, HUB_CLOSED };

struct hub_event {
    enum hub_event_kind kind;
    uint64_t conn;
    char *text; /* HUB_MESSAGE: the message (malloc'd, NUL-terminated; the taker frees it) */
    size_t len;
    char peer[64]; /* HUB_CONNECTED: peer address */
};

/* Starts the hub on host:port in its own thread. Returns NULL (logged) on failure. `wake` is
 * called (from the lws thread) after each queued event. */
struct hub *hub_start(const char *host, int port, void (*wake)(void *), void *wake_arg);
/* Stops the lws thread, closes every connection, frees queued messages. */
void hub_stop(struct hub *hub);

/* Takes the oldest event into *ev; returns false when none is queued. */
bool hub_next_event(struct hub *hub, struct hub_event *ev);
/* Queues `text` (copied) for connection `conn`. Returns -1 if the connection is gone. */
int hub_send(struct hub *hub, uint64_t conn, const char *text, size_t len);
/* Closes the connection after its queued messages are written. */
void hub_close(struct hub *hub, uint64_t conn);

#endif

/* The request-head deadline: a request's line and headers must arrive within
 * --http-head-timeout-s of the connection's start (or of the end of the request before it on a
 * kept-alive connection), however steadily they trickle in. libmicrohttpd has only an idle
 * timeout that every byte resets; a watcher thread shuts down the sockets of connections past
 * the deadline, and libmicrohttpd then closes them as closed by the client. */
#ifndef SRV_HEADS_H
#define SRV_HEADS_H

#include <microhttpd.h>

struct srv_heads;

/* Starts the watcher: heads must arrive within head_s seconds; a kept-alive connection's next
 * head within max(head_s, idle_s) of the end of the request before. NULL when out of memory or
 * the thread cannot start (logged). */
struct srv_heads *srv_heads_start(double head_s, double idle_s);
/* Stops the watcher and frees it (after the daemon stopped: every connection closed). */
void srv_heads_stop(struct srv_heads *h);
/* The daemon's MHD_OPTION_NOTIFY_CONNECTION callback (cls: the srv_heads). */
void srv_heads_notify(void *cls, struct MHD_Connection *conn, void **socket_context,
                      enum MHD_ConnectionNotificationCode code);
/* The head of conn's current request arrived: no deadline until the request ends. */
void srv_heads_arrived(struct MHD_Connection *conn);
/* conn's request ended; the connection may carry another, whose head has its deadline. */
void srv_heads_rearm(struct MHD_Connection *conn);

#endif

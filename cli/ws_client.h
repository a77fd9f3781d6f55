/*
 * ws_client.h - a small blocking websocket client over one TCP socket (RFC 6455, ws:// and wss://),
 * enough for /stream: text messages in both directions, pings answered, close handled. The
 * framing is ws_frame.c; this file does the socket I/O.
 */
#ifndef TY_CLI_WS_CLIENT_H
#define TY_CLI_WS_CLIENT_H

#include <stddef.h>
#include <stdint.h>

struct ws_conn;

/* Largest message accepted from the server. */
#define WS_CLIENT_MAX_MESSAGE ((size_t)64 << 20)

/*
 * Connects to url (ws://... or wss://..., whose server certificate must be vouched for by ca_file,
 * or by the system's CAs when ca_file is NULL, and name the URL's host), asks for subprotocol
 * `protocol` and completes the handshake, all within timeout_ms. Returns the connection (free with
 * ws_conn_close), or NULL with the reason in err; *refused is set when a server answered but
 * refused the upgrade (an HTTP reply that is not 101, or a wrong one), as opposed to no server
 * being reachable.
 */
struct ws_conn *ws_conn_open(const char *url, const char *protocol, const char *ca_file,
                             long timeout_ms, int *refused, char *err, size_t errlen);

/* Sends one text message. Returns 0, or -1 with the reason in err (the connection is broken). */
int ws_conn_send_text(struct ws_conn *c, const char *text, size_t len, char *err, size_t errlen);

/* Sends a ping (to find out whether a quiet connection is still there). Returns 0 or -1. */
int ws_conn_ping(struct ws_conn *c);

enum ws_recv_result {
    WS_RECV_MESSAGE = 1, /* *text holds a NUL-terminated text message (borrowed until next call) */
    WS_RECV_TIMEOUT = 0, /* nothing within timeout_ms */
    WS_RECV_CLOSED = -1  /* the connection is over (close frame, EOF, error): reason in err */
};

/*
 * Waits up to timeout_ms for the next text message, answering pings and skipping pongs and
 * binary messages on the way. On WS_RECV_CLOSED, err says why (the server's close code and
 * reason, EOF, or the protocol error this side closed for).
 */
enum ws_recv_result ws_conn_recv(struct ws_conn *c, long timeout_ms, const char **text, size_t *len,
                                 char *err, size_t errlen);

/* Milliseconds since anything arrived on the connection. */
long long ws_conn_idle_ms(const struct ws_conn *c);

/* Sends a close frame with code (when the connection is still up), closes the socket, frees c.
 * NULL is fine. */
void ws_conn_close(struct ws_conn *c, uint16_t code);

#endif

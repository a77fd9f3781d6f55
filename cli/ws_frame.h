/*
 * ws_frame.h - the pure part of the CLI's websocket client (RFC 6455): URLs, the opening
 * handshake's key and reply check, client frames (always masked), and a reader that turns the
 * server's bytes into whole messages (fragments joined, control frames handed out between them).
 * No sockets here: ws_client.c does the I/O, and tests/unit/test_cli_ws.c tests this file alone.
 */
#ifndef TY_CLI_WS_FRAME_H
#define TY_CLI_WS_FRAME_H

#include "strbuf.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

enum ws_opcode {
    WS_OP_CONT = 0x0,
    WS_OP_TEXT = 0x1,
    WS_OP_BINARY = 0x2,
    WS_OP_CLOSE = 0x8,
    WS_OP_PING = 0x9,
    WS_OP_PONG = 0xA,
};

/* Close codes this client sends or reads (RFC 6455 section 7.4.1). */
#define WS_CLOSE_NORMAL 1000
#define WS_CLOSE_PROTOCOL 1002
#define WS_CLOSE_TOO_BIG 1009
#define WS_CLOSE_NO_STATUS 1005

/* Largest control frame payload (RFC 6455 section 5.5). */
#define WS_CONTROL_MAX 125

/* A ws:// URL split into parts; host is bare (no brackets for IPv6). */
struct ws_url {
    char host[256];
    char port[8];
    char path[512]; /* starts with '/'; query string kept */
    bool tls;       /* wss:// */
};

/*
 * Parses "ws://host[:port][/path]" or "wss://..." (port defaults to 80 or 443, path to "/";
 * "[v6]" hosts accepted). Returns 0, or -1 with the reason in err.
 */
int ws_url_parse(const char *url, struct ws_url *out, char *err, size_t errlen);

/* Base64 of 16 random-looking bytes, for Sec-WebSocket-Key (24 characters + NUL). */
void ws_client_key(const uint8_t nonce[16], char key[25]);

/* The Sec-WebSocket-Accept value a server must answer to `key` (28 characters + NUL). */
void ws_accept_for(const char *key, char accept[29]);

/*
 * Appends the opening handshake request for url with the given key and subprotocol (NULL: none)
 * to out.
 */
void ws_handshake_request(struct strbuf *out, const struct ws_url *url, const char *key,
                          const char *protocol);

/*
 * Checks the server's handshake reply `head` (the status line and headers, up to and including
 * the blank line): status 101, Upgrade: websocket, Connection: upgrade, the right
 * Sec-WebSocket-Accept for key, and the subprotocol when one was asked for. Returns 0, or -1
 * with the reason in err (the status line when it is not 101).
 */
int ws_handshake_check(const char *head, size_t len, const char *key, const char *protocol,
                       char *err, size_t errlen);

/*
 * Appends one client frame to out: FIN set, opcode, the payload masked with mask (a client must
 * mask every frame). Control frames (close, ping, pong) must carry at most WS_CONTROL_MAX bytes.
 */
void ws_frame_encode(struct strbuf *out, enum ws_opcode op, const void *payload, size_t len,
                     const uint8_t mask[4]);

/* Appends a close frame carrying `code` and reason (truncated to fit a control frame). */
void ws_close_encode(struct strbuf *out, uint16_t code, const char *reason, const uint8_t mask[4]);

/*
 * Reads a close frame's payload: *code is its status (WS_CLOSE_NO_STATUS when empty), reason
 * copied (cleaned to printable text) into reason. Returns 0, or -1 when the payload is 1 byte.
 */
int ws_close_parse(const uint8_t *payload, size_t len, uint16_t *code, char *reason,
                   size_t reason_len);

/* ----- reading frames ---------------------------------------------------------------------- */

enum ws_read_result {
    WS_READ_MORE = 0,  /* no whole message buffered yet: feed more bytes */
    WS_READ_MESSAGE,   /* a whole text or binary message (fragments joined) */
    WS_READ_CONTROL,   /* a ping, pong or close frame */
    WS_READ_ERROR = -1 /* the server broke the protocol: close with err_code */
};

/*
 * Incremental reader of server frames. Bytes go in with ws_reader_feed; ws_reader_next hands out
 * one message or control frame at a time. The returned payload stays valid until the next call
 * of ws_reader_next or ws_reader_feed.
 */
struct ws_reader {
    struct strbuf in;  /* bytes received, not yet consumed */
    size_t pos;        /* consumed prefix of `in` */
    struct strbuf msg; /* fragments of the message being assembled */
    int msg_op;        /* opcode of the first fragment, or -1 when none is open */
    uint8_t control[WS_CONTROL_MAX + 1];
    size_t max_message; /* larger messages are an error (WS_CLOSE_TOO_BIG) */
    uint16_t err_code;  /* close code to send after WS_READ_ERROR */
    char err[128];      /* why, after WS_READ_ERROR */
};

/* Starts an empty reader that refuses messages above max_message bytes. */
void ws_reader_init(struct ws_reader *r, size_t max_message);

void ws_reader_free(struct ws_reader *r);

/* Appends len received bytes. */
void ws_reader_feed(struct ws_reader *r, const void *data, size_t len);

/*
 * Takes the next message or control frame out of what was fed. On WS_READ_MESSAGE and
 * WS_READ_CONTROL, *op, *payload and *len describe it (a message's payload is NUL-terminated).
 * Refuses masked frames, reserved bits, unknown opcodes, fragmented or oversized control frames,
 * a continuation without a start, a new message inside a fragmented one, and messages above
 * max_message.
 */
enum ws_read_result ws_reader_next(struct ws_reader *r, enum ws_opcode *op, const uint8_t **payload,
                                   size_t *len);

#endif

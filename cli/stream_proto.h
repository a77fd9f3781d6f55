/*
 * stream_proto.h - the pure part of following a job over /stream (docs/streams.md): the messages
 * the client sends, reading the server's messages, where to connect, the resume bookkeeping
 * (never print a seq twice, resume after the last one printed) and the reconnect backoff.
 * No I/O: stream.c drives it; tests/unit/test_cli_stream.c tests it.
 */
#ifndef TY_CLI_STREAM_PROTO_H
#define TY_CLI_STREAM_PROTO_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

/* The subprotocol of /stream. */
#define STREAM_PROTOCOL "trainyard-stream.v1"

/* Reconnect backoff: first wait and ceiling, in milliseconds. */
#define STREAM_BACKOFF_FIRST_MS 200
#define STREAM_BACKOFF_MAX_MS 5000

enum stream_msg_type {
    STREAM_MSG_OTHER = 0, /* a type this client does not know (a newer server's): ignored */
    STREAM_MSG_WELCOME,
    STREAM_MSG_SUBSCRIBED,
    STREAM_MSG_EVENT,
    STREAM_MSG_ERROR,
    STREAM_MSG_CLOSING,
    STREAM_MSG_EVENTS,  /* batched delivery: `data` is the array of event messages */
    STREAM_MSG_BAD = -1 /* not an object with a string "type", or an event without its fields */
};

/* One server message, read; strings and data are borrowed from the parsed JSON. */
struct stream_msg {
    enum stream_msg_type type;
    long long job;      /* subscribed / event: the job id; 0 for the cluster stream */
    long long seq;      /* event: its seq; subscribed: the head */
    const char *kind;   /* event: "event", "worker", "report", "log", ... */
    long long attempt;  /* event: attempt, or 0 when null */
    long long rank;     /* event: rank, or -1 when null */
    const json_t *at;   /* event: commit time (an RFC 3339 string), or NULL */
    const json_t *data; /* event: its data object (may be NULL) */
    const char *text;   /* error: code; closing: reason (NULL when absent) */
    const char *detail; /* error: detail (NULL when absent) */
};

/*
 * Reads one message of the server. Returns its type (also in out->type); STREAM_MSG_BAD for a
 * message that breaks docs/streams.md (events need an integer seq and a string kind).
 */
enum stream_msg_type stream_msg_parse(const json_t *msg, struct stream_msg *out);

/*
 * Whether an `error` code says "not now" rather than "no" (docs/streams.md): `unavailable` (the
 * server's database is out of reach) and `too_many_clients`; the follower reconnects after them.
 */
bool stream_error_is_transient(const char *code);

/* The auth message for token, as JSON text (free() it). */
char *stream_auth_message(const char *token);

/* The subscribe message for job `job` resuming after seq `after`, asking for batched delivery
 * (several events in one `events` message), as JSON text (free() it). */
char *stream_subscribe_message(long long job, long long after);

/*
 * The websocket URL of /stream for a server: the host of server_base (http://host[:port]... or
 * https://, which gives wss://: the server's websocket port speaks TLS when its HTTP port does),
 * with the port and path of the "stream" object of GET /api/v1/version's reply. Returns 0, or -1
 * with the reason in err (no "stream" field: the server has no /stream).
 */
int stream_url_from_version(const char *server_base, const json_t *version, char *out,
                            size_t outlen, char *err, size_t errlen);

/* What the follower has printed of one job's stream. */
struct stream_cursor {
    long long job;
    long long last_seq; /* newest seq handed on; the resume point */
    long long head;     /* newest seq when the current subscription began; -1 before */
};

/* A cursor for job that has printed nothing (after = 0). */
void stream_cursor_init(struct stream_cursor *c, long long job);

/*
 * Takes an event of the cursor's job with sequence number seq: returns true (and moves the
 * cursor) when it is new, false for one already handed on (a resend after a reconnect) or for
 * another job's event. Gaps are allowed (log chunks removed by the log cap).
 */
bool stream_cursor_take(struct stream_cursor *c, long long job, long long seq);

/* Records a `subscribed` reply: the head of the stream at that moment. */
void stream_cursor_subscribed(struct stream_cursor *c, long long head);

/* Whether everything up to the head of the last subscription has been handed on. */
bool stream_cursor_caught_up(const struct stream_cursor *c);

/* The wait before the next reconnect, given the previous one (0 for the first). */
long stream_backoff_next(long prev_ms);

#endif

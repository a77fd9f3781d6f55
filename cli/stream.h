/*
 * stream.h - following one job's stream over /stream (docs/streams.md) for the commands of
 * cmd_follow.c: finds the URL, connects, authenticates, subscribes after the last seq handed on,
 * and on a dropped connection (server restart, `closing` for a slow reader, a dead peer)
 * reconnects with backoff and resumes, so every row is handed on once, in order.
 */
#ifndef TY_CLI_STREAM_H
#define TY_CLI_STREAM_H

#include "cli.h"
#include "stream_proto.h"

/* What an event handler wants next. */
enum stream_verdict {
    STREAM_GO_ON = 0, /* keep following */
    STREAM_STOP,      /* done now */
    STREAM_DRAIN,     /* the job ended: take what is still in flight (rows committed just after,
                         such as the last log chunks) until the stream is quiet, then stop */
};

/* The handler for each new row of the job's stream; raw is the whole message as received. */
typedef enum stream_verdict (*stream_event_fn)(void *ud, const struct stream_msg *ev,
                                               const json_t *raw);

enum stream_outcome {
    STREAM_DONE = 0,    /* the handler stopped (or, with until_head, the head was reached) */
    STREAM_TIMED_OUT,   /* the deadline passed (nothing printed about it) */
    STREAM_UNREACHABLE, /* no connection for --reconnect-timeout seconds (reported on stderr) */
    STREAM_REFUSED,     /* the server refused (bad token, unknown job, no /stream): reported */
    STREAM_BAD_URL,     /* --stream-url is not a ws:// URL: reported */
};

struct stream_follow_opts {
    long long job;
    bool until_head;    /* stop once the rows that existed at subscribe time are handed on */
    long long deadline; /* CLOCK_MONOTONIC milliseconds (util_mono_ms), or 0 for none */
    stream_event_fn on_event;
    void *ud;
};

/*
 * Follows the job until the handler stops, the deadline passes, or the server is refused or out
 * of reach for longer than the configured reconnect timeout. Warnings about lost connections go
 * to stderr; so does the reason of STREAM_UNREACHABLE and STREAM_REFUSED.
 */
enum stream_outcome stream_follow(struct cli_ctx *ctx, const struct stream_follow_opts *o);

#endif

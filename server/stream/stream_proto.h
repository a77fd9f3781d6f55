/* The /stream protocol (docs/streams.md) without I/O: parsing what a subscriber sends, building
 * what the server sends, and the ordering rule of the cluster stream. Pure; unit-tested in
 * tests/unit/test_stream_proto.c. Built messages are malloc'd, NUL-terminated JSON text (NULL
 * when out of memory). */
#ifndef SRV_STREAM_PROTO_H
#define SRV_STREAM_PROTO_H

#include "store_stream.h"

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define STREAM_TOKEN_MAX 256

enum stream_req_type { STREAM_REQ_AUTH, STREAM_REQ_SUBSCRIBE, STREAM_REQ_UNSUBSCRIBE };

/* A subscriber's request. job 0 with cluster true: the cluster stream. */
struct stream_req {
    enum stream_req_type type;
    char token[STREAM_TOKEN_MAX]; /* auth */
    bool cluster;                 /* subscribe, unsubscribe */
    int64_t job;                  /* subscribe, unsubscribe: > 0 unless cluster */
    int64_t after;                /* subscribe: >= 0 (default 0) */
    bool batch;                   /* subscribe: batched delivery asked for (default false) */
};

/* Error codes of `error` messages. */
#define STREAM_E_BAD_JSON "bad_json"
#define STREAM_E_BAD_REQUEST "bad_request"
#define STREAM_E_UNKNOWN_TYPE "unknown_type"
#define STREAM_E_NOT_AUTHENTICATED "not_authenticated"
#define STREAM_E_BAD_TOKEN "bad_token"
#define STREAM_E_UNKNOWN_JOB "unknown_job"
#define STREAM_E_ALREADY_SUBSCRIBED "already_subscribed"
#define STREAM_E_NOT_SUBSCRIBED "not_subscribed"
#define STREAM_E_TOO_MANY_SUBSCRIPTIONS "too_many_subscriptions"
#define STREAM_E_TOO_MANY_CLIENTS "too_many_clients"
#define STREAM_E_UNAVAILABLE "unavailable"

/* Parses one message of a subscriber into *req. Returns 0, or -1 with *code set to one of the
 * STREAM_E_* codes above (bad_json, bad_request, unknown_type) and `detail` naming the problem
 * (the field at fault). */
int stream_req_parse(const char *text, size_t len, struct stream_req *req, const char **code,
                     char *detail, size_t detail_len);

/* {"type":"welcome","role":ROLE} */
char *stream_msg_welcome(const char *role);
/* {"type":"subscribed","job":JOB,"head":HEAD}, or "cluster":true when job is 0 */
char *stream_msg_subscribed(int64_t job, int64_t head);
/* {"type":"error","code":CODE,"detail":DETAIL} */
char *stream_msg_error(const char *code, const char *detail);

/* The last seq sent of one subscription (job 0: the cluster). */
struct stream_resume {
    int64_t job;
    int64_t seq;
};
/* {"type":"closing","reason":REASON,"resume":{"job":{"7":41,...},"cluster":8}}; "cluster" only
 * when one of the n entries is the cluster's. */
char *stream_msg_closing(const char *reason, const struct stream_resume *resume, size_t n);

/* One row of job `job`'s stream as an `event` message (attempt and rank null when the row has
 * none); job 0: a row of the cluster stream ("cluster":true, no attempt nor rank). The row's
 * body is inserted as it is (it is JSON text from the database). */
char *stream_msg_event(int64_t job, const struct store_stream_row *row);

/* The cluster stream's ordering rule. seqs[0..n) are the seqs of rows read after `cursor`, in
 * ascending order. Returns how many leading rows may be delivered now: rows are taken while each
 * is cursor+1 (the next one), or while the gap before it lies wholly below `settled` (holes
 * below `settled` are known to stay empty: their transactions ended without a row). A gap at or
 * above `settled` may still be filled by a transaction in progress, so delivery stops there. */
size_t stream_deliverable(int64_t cursor, int64_t settled, const int64_t *seqs, size_t n);

#endif

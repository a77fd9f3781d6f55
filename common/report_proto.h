/*
 * report_proto.h — the report protocol between a worker (libtrainyard, trainyard.py) and its
 * local agent: framing codec plus message builders and validators, both directions. See
 * docs/report-protocol.md.
 *
 * Library target `tyreport` (common/CMakeLists.txt: static, position independent, jansson only).
 * The agent links it for its side (worker/agent/report.c, progress.c); libtrainyard compiles its
 * objects in, hidden, for the worker's side (worker/sdk/report.c, progress.c). Errors are the
 * SDK's TY_E* codes (trainyard.h), which ty_report() and friends hand to their callers.
 *
 * Prefix rproto_ (the report protocol); RPROTO_ for its constants.
 *
 * Frame: 4-byte big-endian unsigned payload length, then that many bytes of UTF-8 JSON holding
 * one object. Payload length 1 .. RPROTO_MAX_FRAME.
 */
#ifndef TY_REPORT_PROTO_H
#define TY_REPORT_PROTO_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <jansson.h>

#include "trainyard.h" /* TY_E* codes, ty_strerror() */

#define RPROTO_HEADER_LEN 4
#define RPROTO_MAX_FRAME (1024 * 1024) /* max payload bytes (header excluded) */

/* ---- framing ---- */

/* Encode msg (must be an object) as one frame into a malloc'd buffer (*out, *outlen; caller
 * frees). TY_EINVAL when msg is not an object, TY_ERANGE when the payload exceeds
 * RPROTO_MAX_FRAME, TY_ENOMEM. */
int rproto_encode(const json_t *msg, char **out, size_t *outlen);

/* Decode the first frame of buf[0..len). Returns 1 and sets *msg (new reference, caller
 * json_decref's) and *consumed when a whole frame is there; 0 when more bytes are needed;
 * TY_ERANGE for a declared length of 0 or above RPROTO_MAX_FRAME (known from the header alone,
 * so an oversized frame is rejected before its payload arrives); TY_EPROTO for a payload that
 * is not a JSON object. err (may be NULL) receives a message on failure. After an error the
 * stream cannot be resynchronized: close the connection. */
int rproto_decode(const void *buf, size_t len, json_t **msg, size_t *consumed, char *err,
                  size_t errlen);

/* Incremental decoder for event loops: feed bytes as they arrive, then call next until it
 * returns 0. */
typedef struct rproto_decoder {
    unsigned char *buf;
    size_t len, cap;
} rproto_decoder;

void rproto_decoder_init(rproto_decoder *d);
/* Frees the buffer; the decoder may be reinitialized afterwards. */
void rproto_decoder_free(rproto_decoder *d);
/* Append n bytes. TY_ENOMEM, or TY_ERANGE if more than one maximal frame is buffered. */
int rproto_decoder_feed(rproto_decoder *d, const void *data, size_t n);
/* Same results as rproto_decode, consuming the frame from the decoder. */
int rproto_decoder_next(rproto_decoder *d, json_t **msg, char *err, size_t errlen);

/* Blocking helpers (fd may be blocking or not; poll() bounds the wait; timeout_ms < 0 waits
 * forever). write: 0, TY_EPEER, TY_ETIMEDOUT, TY_EIO, or an encode error. read: 0 with *msg
 * set, TY_EPEER on EOF (also mid-frame), TY_ETIMEDOUT, or a decode error. MSG_NOSIGNAL is used
 * on sockets, so a dead peer never raises SIGPIPE. */
int rproto_write(int fd, const json_t *msg, int timeout_ms);
int rproto_read(int fd, json_t **msg, int timeout_ms, char *err, size_t errlen);

/* ---- messages ---- */

typedef enum {
    RPROTO_UNKNOWN = 0,
    RPROTO_HELLO,    /* worker -> agent, first frame */
    RPROTO_REPORT,   /* worker -> agent */
    RPROTO_ACK,      /* agent -> worker */
    RPROTO_ERROR,    /* agent -> worker: report refused */
    RPROTO_PROGRESS, /* worker -> agent: heartbeat and collective progress (no reply) */
} rproto_type;

/* The "type" field of msg, RPROTO_UNKNOWN when missing or unknown. */
rproto_type rproto_type_of(const json_t *msg);

/* Builders return a new object or NULL (out of memory / invalid arguments). */
/* secret: the worker's TRAINYARD_REPORT_SECRET, or NULL (left out). */
json_t *rproto_hello_new(const char *job_id, int attempt, int rank, long pid, const char *secret);
/* metrics: copied, except a "step" key (pass it as has_step/step). checkpoint_dir: absolute
 * path or NULL. */
json_t *rproto_report_new(int64_t seq, const json_t *metrics, bool has_step, int64_t step,
                          const char *checkpoint_dir);
json_t *rproto_ack_new(int64_t seq);
json_t *rproto_error_new(int64_t seq, const char *message);

/* Validators: 0 and filled *out (strings and objects borrowed from msg), or TY_EPROTO with a
 * message naming the faulty field in err. */
struct rproto_hello {
    const char *job_id;
    int attempt;
    int rank;
    long pid;
    const char *secret; /* NULL when absent */
};
int rproto_parse_hello(const json_t *msg, struct rproto_hello *out, char *err, size_t errlen);

struct rproto_report {
    int64_t seq;
    const json_t *metrics; /* object of JSON values, never NULL after success */
    bool has_step;
    int64_t step;
    const char *checkpoint_dir; /* absolute path or NULL */
};
int rproto_parse_report(const json_t *msg, struct rproto_report *out, char *err, size_t errlen);
int rproto_parse_ack(const json_t *msg, int64_t *seq, char *err, size_t errlen);
int rproto_parse_error(const json_t *msg, int64_t *seq, const char **message, char *err,
                       size_t errlen);

/* Metrics rule shared by both sides: a JSON object whose keys are non-empty; its values are any
 * JSON values (numbers are charted; strings, booleans, null, arrays and objects are stored and
 * returned as they are), except a "step" key, which if present must be a non-negative integer.
 * 0 or TY_EINVAL. */
int rproto_check_metrics(const json_t *metrics, char *err, size_t errlen);

/* ---- progress (report_proto_progress.c) ---- */

/* Longest collective name a progress message may carry. */
#define RPROTO_MAX_OP 32

/* A worker's progress: the collective it is in (in_collective) or last left, numbered from 1 in
 * the order the rank entered them (coll_seq; 0 and op NULL before its first), how many reports
 * it made (report_seq), and optionally the milliseconds since one of those last changed. */
struct rproto_progress {
    const char *op; /* "allreduce", ...; NULL: none yet. Parsed: borrowed from the message */
    int64_t coll_seq;
    bool in_collective;
    int64_t report_seq;
    int64_t progress_age_ms; /* -1: left out (the agent measures it) */
};
/* The collective names of the SDK by number (1 allreduce, 2 broadcast, 3 allgather); NULL for
 * any other number. */
const char *rproto_op_name(int op);
/* A progress message, or NULL (out of memory, negative counts, in_collective without op). */
json_t *rproto_progress_new(const struct rproto_progress *p);
/* Validates a progress message: op null or 1..RPROTO_MAX_OP bytes of [a-z0-9_], required when
 * in_collective; counts non-negative integers; progress_age_ms absent (-1) or non-negative. 0 or
 * TY_EPROTO naming the field in err. */
int rproto_parse_progress(const json_t *msg, struct rproto_progress *out, char *err, size_t errlen);

/* ---- shared-memory segment names (libtrainyard creates them, the agent removes leftovers) ---- */

/* Writes "/trainyard-<job>-<attempt>-" into buf (at least RPROTO_SHM_PREFIX_MAX bytes): the
 * prefix of every segment an attempt of a job creates on a node (the job id reduced to at most
 * 20 characters of [A-Za-z0-9_], others replaced by '_'). A segment's full name appends 16 hex
 * digits; the agent unlinks /dev/shm/<prefix>* once the attempt's last worker on the node exited,
 * so a rank 0 killed between creating and unlinking its segment leaks nothing. */
#define RPROTO_SHM_PREFIX_MAX 48
void rproto_shm_prefix(const char *job_id, int64_t attempt, char *buf, size_t len);

#endif

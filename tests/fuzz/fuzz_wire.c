/* libFuzzer: the report protocol (common/report_proto.c): the byte stream a local process writes to
 * the agent's report socket (framing, then hello/report as the agent's report.c parses them)
 * and the acks and errors the SDK reads back. The first input byte picks the size of the
 * pieces the stream is fed in, as reads of a socket would cut it. */
#include "report_proto.h"

#include <stddef.h>
#include <stdint.h>

static void parse_message(const json_t *m)
{
    char err[256];
    switch (rproto_type_of(m)) {
    case RPROTO_HELLO: {
        struct rproto_hello h;
        (void)rproto_parse_hello(m, &h, err, sizeof(err));
        break;
    }
    case RPROTO_REPORT: {
        struct rproto_report r;
        if (rproto_parse_report(m, &r, err, sizeof(err)) == 0)
            (void)rproto_check_metrics(r.metrics, err, sizeof(err));
        break;
    }
    case RPROTO_ACK: {
        int64_t seq;
        (void)rproto_parse_ack(m, &seq, err, sizeof(err));
        break;
    }
    case RPROTO_ERROR: {
        int64_t seq;
        const char *message;
        (void)rproto_parse_error(m, &seq, &message, err, sizeof(err));
        break;
    }
    case RPROTO_PROGRESS: {
        struct rproto_progress p;
        if (rproto_parse_progress(m, &p, err, sizeof(err)) == 0) {
            json_t *again = rproto_progress_new(&p);
            json_decref(again);
        }
        break;
    }
    default:
        break;
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (size < 1)
        return 0;
    size_t piece = (size_t)data[0] + 1;
    data++;
    size--;
    rproto_decoder d;
    rproto_decoder_init(&d);
    char err[256];
    for (size_t off = 0; off < size; off += piece) {
        size_t n = size - off < piece ? size - off : piece;
        if (rproto_decoder_feed(&d, data + off, n) != 0)
            break;
        json_t *m;
        int rc;
        while ((rc = rproto_decoder_next(&d, &m, err, sizeof(err))) == 1) {
            parse_message(m);
            json_decref(m);
        }
        if (rc < 0)
            break;
    }
    rproto_decoder_free(&d);
    return 0;
}

/* Report protocol codec (common/report_proto.c): framing, limits, incremental decoding, messages,
 * frame I/O. */
#include "ty_test.h"

#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "report_proto.h"

static json_t *sample(void)
{
    return json_pack("{s:s, s:I, s:{s:f, s:i}}", "type", "report", "seq", (json_int_t)7, "metrics",
                     "loss", 0.25, "acc", 3);
}

static void wire_round_trip_preserves_message(void **state)
{
    (void)state;
    json_t *m = sample();
    char *f;
    size_t n;
    assert_int_equal(rproto_encode(m, &f, &n), 0);
    assert_true(n > 4);
    size_t payload = ((size_t)(unsigned char)f[0] << 24) | ((size_t)(unsigned char)f[1] << 16) |
                     ((size_t)(unsigned char)f[2] << 8) | (unsigned char)f[3];
    assert_int_equal(payload, n - 4);
    json_t *out = NULL;
    size_t used = 0;
    assert_int_equal(rproto_decode(f, n, &out, &used, NULL, 0), 1);
    assert_int_equal(used, n);
    assert_true(json_equal(m, out));
    json_decref(out);
    json_decref(m);
    free(f);
}

static void wire_truncated_frame_needs_more_bytes(void **state)
{
    (void)state;
    json_t *m = sample();
    char *f;
    size_t n;
    assert_int_equal(rproto_encode(m, &f, &n), 0);
    for (size_t k = 0; k < n; k++) {
        json_t *out = NULL;
        assert_int_equal(rproto_decode(f, k, &out, NULL, NULL, 0), 0);
        assert_null(out);
    }
    json_decref(m);
    free(f);
}

static void wire_oversized_frame_rejected_from_header(void **state)
{
    (void)state;
    unsigned char h[4] = {0x00, 0x10, 0x00, 0x01}; /* 1 MiB + 1 */
    json_t *out = NULL;
    char err[128] = "";
    assert_int_equal(rproto_decode(h, 4, &out, NULL, err, sizeof err), TY_ERANGE);
    assert_non_null(strstr(err, "frame length"));
    unsigned char z[4] = {0, 0, 0, 0};
    assert_int_equal(rproto_decode(z, 4, &out, NULL, NULL, 0), TY_ERANGE);
    /* exactly the maximum is fine from the header's point of view */
    unsigned char mx[4] = {0x00, 0x10, 0x00, 0x00};
    assert_int_equal(rproto_decode(mx, 4, &out, NULL, NULL, 0), 0);
}

static void wire_oversized_message_not_encoded(void **state)
{
    (void)state;
    char *big = malloc(RPROTO_MAX_FRAME + 1);
    memset(big, 'x', RPROTO_MAX_FRAME);
    big[RPROTO_MAX_FRAME] = '\0';
    json_t *m = json_pack("{s:s}", "blob", big);
    char *f = NULL;
    size_t n = 0;
    assert_int_equal(rproto_encode(m, &f, &n), TY_ERANGE);
    assert_null(f);
    json_t *arr = json_array();
    assert_int_equal(rproto_encode(arr, &f, &n), TY_EINVAL);
    json_decref(arr);
    json_decref(m);
    free(big);
}

static void wire_bad_json_is_protocol_error(void **state)
{
    (void)state;
    const char *bodies[] = {"{\"a\":", "[1,2]", "42", "{\"a\":1}{", "{\"a\":1,\"a\":2}"};
    for (size_t i = 0; i < sizeof bodies / sizeof bodies[0]; i++) {
        size_t len = strlen(bodies[i]);
        unsigned char f[64] = {0, 0, 0, (unsigned char)len};
        memcpy(f + 4, bodies[i], len);
        json_t *out = NULL;
        char err[128] = "";
        assert_int_equal(rproto_decode(f, 4 + len, &out, NULL, err, sizeof err), TY_EPROTO);
        assert_true(err[0] != '\0');
        assert_null(out);
    }
}

static void wire_decoder_splits_byte_stream(void **state)
{
    (void)state;
    rproto_decoder d;
    rproto_decoder_init(&d);
    json_t *a = rproto_ack_new(1), *b = rproto_ack_new(2);
    char *fa, *fb;
    size_t na, nb;
    assert_int_equal(rproto_encode(a, &fa, &na), 0);
    assert_int_equal(rproto_encode(b, &fb, &nb), 0);
    char *all = malloc(na + nb);
    memcpy(all, fa, na);
    memcpy(all + na, fb, nb);
    int got = 0;
    for (size_t i = 0; i < na + nb; i++) {
        assert_int_equal(rproto_decoder_feed(&d, all + i, 1), 0);
        json_t *m;
        while (rproto_decoder_next(&d, &m, NULL, 0) == 1) {
            int64_t seq;
            assert_int_equal(rproto_parse_ack(m, &seq, NULL, 0), 0);
            assert_int_equal(seq, ++got);
            json_decref(m);
        }
    }
    assert_int_equal(got, 2);
    assert_int_equal(d.len, 0);
    rproto_decoder_free(&d);
    free(all);
    free(fa);
    free(fb);
    json_decref(a);
    json_decref(b);
}

static void wire_messages_build_and_validate(void **state)
{
    (void)state;
    char err[128];
    json_t *h = rproto_hello_new("job-9", 2, 5, 1234, NULL);
    struct rproto_hello hv;
    assert_int_equal(rproto_parse_hello(h, &hv, err, sizeof err), 0);
    assert_string_equal(hv.job_id, "job-9");
    assert_int_equal(hv.attempt, 2);
    assert_int_equal(hv.rank, 5);
    assert_int_equal(hv.pid, 1234);
    assert_null(hv.secret);
    assert_int_equal(rproto_type_of(h), RPROTO_HELLO);
    json_decref(h);
    h = rproto_hello_new("job-9", 2, 5, 1234, "s3cret");
    assert_int_equal(rproto_parse_hello(h, &hv, err, sizeof err), 0);
    assert_string_equal(hv.secret, "s3cret");
    json_object_set_new(h, "secret", json_integer(7));
    assert_int_equal(rproto_parse_hello(h, &hv, err, sizeof err), TY_EPROTO);
    json_decref(h);

    json_t *metrics = json_pack("{s:f, s:i}", "loss", 0.5, "step", 10);
    json_t *r = rproto_report_new(3, metrics, true, 10, "/tmp/ck");
    struct rproto_report rv;
    assert_int_equal(rproto_parse_report(r, &rv, err, sizeof err), 0);
    assert_int_equal(rv.seq, 3);
    assert_true(rv.has_step);
    assert_int_equal(rv.step, 10);
    assert_string_equal(rv.checkpoint_dir, "/tmp/ck");
    assert_null(json_object_get(rv.metrics, "step"));
    assert_true(json_real_value(json_object_get(rv.metrics, "loss")) == 0.5);
    json_decref(r);
    assert_null(rproto_report_new(1, metrics, false, 0, "relative/dir"));
    assert_null(rproto_report_new(0, metrics, false, 0, NULL));
    json_decref(metrics);

    json_t *e = rproto_error_new(4, "disk full");
    int64_t seq;
    const char *text;
    assert_int_equal(rproto_parse_error(e, &seq, &text, NULL, 0), 0);
    assert_int_equal(seq, 4);
    assert_string_equal(text, "disk full");
    json_decref(e);
}

static void wire_validators_name_the_bad_field(void **state)
{
    (void)state;
    char err[128];
    struct rproto_report rv;
    struct rproto_hello hv;
    const char *cases[][2] = {
        {"{\"type\":\"report\",\"metrics\":{}}", "seq"},
        {"{\"type\":\"report\",\"seq\":0,\"metrics\":{}}", "seq"},
        {"{\"type\":\"report\",\"seq\":1,\"metrics\":{\"\":1}}", "metrics"},
        {"{\"type\":\"report\",\"seq\":1,\"metrics\":{},\"step\":-1}", "step"},
        {"{\"type\":\"report\",\"seq\":1,\"metrics\":{},\"checkpoint_dir\":\"rel\"}",
         "checkpoint_dir"},
        {"{\"type\":\"ack\",\"seq\":1}", "type"},
    };
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        json_t *m = json_loads(cases[i][0], 0, NULL);
        assert_non_null(m);
        err[0] = '\0';
        assert_int_equal(rproto_parse_report(m, &rv, err, sizeof err), TY_EPROTO);
        assert_non_null(strstr(err, cases[i][1]));
        json_decref(m);
    }
    json_t *h = json_loads("{\"type\":\"hello\",\"job_id\":\"j\",\"attempt\":0,\"rank\":-1,"
                           "\"pid\":3}",
                           0, NULL);
    assert_int_equal(rproto_parse_hello(h, &hv, err, sizeof err), TY_EPROTO);
    assert_non_null(strstr(err, "rank"));
    json_decref(h);
    json_t *bad = json_pack("{s:s}", "step", "x");
    assert_int_equal(rproto_check_metrics(bad, err, sizeof err), TY_EINVAL);
    json_decref(bad);
    json_t *any = json_pack("{s:b, s:s, s:[i], s:n}", "ok", 1, "phase", "probe", "l", 1, "z");
    assert_int_equal(rproto_check_metrics(any, err, sizeof err), 0);
    json_decref(any);
}

static void wire_read_write_over_socketpair(void **state)
{
    (void)state;
    int sv[2];
    assert_int_equal(socketpair(AF_UNIX, SOCK_STREAM, 0, sv), 0);
    json_t *m = rproto_ack_new(9), *out = NULL;
    assert_int_equal(rproto_write(sv[0], m, 1000), 0);
    assert_int_equal(rproto_read(sv[1], &out, 1000, NULL, 0), 0);
    assert_true(json_equal(m, out));
    json_decref(out);
    /* nothing to read: timeout */
    assert_int_equal(rproto_read(sv[1], &out, 50, NULL, 0), TY_ETIMEDOUT);
    /* half a frame then EOF: peer error */
    unsigned char half[6] = {0, 0, 0, 10, '{', '"'};
    assert_int_equal(write(sv[0], half, sizeof half), (ssize_t)sizeof half);
    close(sv[0]);
    assert_int_equal(rproto_read(sv[1], &out, 1000, NULL, 0), TY_EPEER);
    /* writing to a closed peer: TY_EPEER, no SIGPIPE */
    assert_int_equal(rproto_write(sv[1], m, 1000), TY_EPEER);
    close(sv[1]);
    json_decref(m);
}

static void wire_strerror_covers_every_code(void **state)
{
    (void)state;
    assert_string_equal(ty_strerror(0), "success");
    assert_string_equal(ty_strerror(-9999), "unknown error");
#define CHECK(name, value, msg) assert_string_equal(ty_strerror(TY_##name), msg);
    TY_ERRNO_MAP(CHECK)
#undef CHECK
}

/* Shared-memory segment prefixes: the SDK and the agent must build the same one, safe as a
 * file name in /dev/shm whatever the job id holds. */
static void wire_shm_prefix_is_a_safe_file_name(void **state)
{
    (void)state;
    char buf[RPROTO_SHM_PREFIX_MAX];
    rproto_shm_prefix("42", 3, buf, sizeof buf);
    assert_string_equal(buf, "/trainyard-42-3-");
    rproto_shm_prefix("../etc/x y", 1, buf, sizeof buf);
    assert_string_equal(buf, "/trainyard-___etc_x_y-1-");
    rproto_shm_prefix("a-very-long-job-id-that-goes-on-and-on", 2147483647, buf, sizeof buf);
    assert_string_equal(buf, "/trainyard-a_very_long_job_id_t-2147483647-");
    assert_true(strlen(buf) + 16 < 64); /* room for the 16 hex digits of a segment name */
    rproto_shm_prefix(NULL, 0, buf, sizeof buf);
    assert_string_equal(buf, "/trainyard--0-");
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(wire_round_trip_preserves_message),
    cmocka_unit_test(wire_truncated_frame_needs_more_bytes),
    cmocka_unit_test(wire_oversized_frame_rejected_from_header),
    cmocka_unit_test(wire_oversized_message_not_encoded),
    cmocka_unit_test(wire_bad_json_is_protocol_error),
    cmocka_unit_test(wire_decoder_splits_byte_stream),
    cmocka_unit_test(wire_messages_build_and_validate),
    cmocka_unit_test(wire_validators_name_the_bad_field),
    cmocka_unit_test(wire_read_write_over_socketpair),
    cmocka_unit_test(wire_strerror_covers_every_code),
    cmocka_unit_test(wire_shm_prefix_is_a_safe_file_name),
};
TY_TEST_MAIN(tests)

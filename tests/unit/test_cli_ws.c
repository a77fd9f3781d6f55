/* cli/ws_frame.c: ws:// URLs, the handshake's key and reply check (RFC 6455 section 4), client
 * frames masked as section 5.3 says, and the reader: lengths in all three forms, fragments
 * joined around control frames, bytes fed one at a time, and every protocol breach refused. */
#include "ty_test.h"

#include <string.h>

#include "ws_frame.h"

static const uint8_t rfc_mask[4] = {0x37, 0xfa, 0x21, 0x3d};

/* ----- URLs --------------------------------------------------------------------------------- */

static void url_with_port_and_path_is_split(void **state)
{
    (void)state;
    struct ws_url u;
    char err[256];
    assert_int_equal(ws_url_parse("ws://example.org:8081/stream?x=1", &u, err, sizeof err), 0);
    assert_string_equal(u.host, "example.org");
    assert_string_equal(u.port, "8081");
    assert_string_equal(u.path, "/stream?x=1");
}

static void url_defaults_to_port_80_and_root_path(void **state)
{
    (void)state;
    struct ws_url u;
    char err[256];
    assert_int_equal(ws_url_parse("ws://h", &u, err, sizeof err), 0);
    assert_string_equal(u.host, "h");
    assert_string_equal(u.port, "80");
    assert_string_equal(u.path, "/");
}

static void url_with_ipv6_host_drops_brackets(void **state)
{
    (void)state;
    struct ws_url u;
    char err[256];
    assert_int_equal(ws_url_parse("ws://[::1]:9000/stream", &u, err, sizeof err), 0);
    assert_string_equal(u.host, "::1");
    assert_string_equal(u.port, "9000");
    assert_string_equal(u.path, "/stream");
}

static void url_wss_speaks_tls_on_port_443_by_default(void **state)
{
    (void)state;
    struct ws_url u;
    char err[256];
    assert_int_equal(ws_url_parse("wss://h/stream", &u, err, sizeof err), 0);
    assert_true(u.tls);
    assert_string_equal(u.host, "h");
    assert_string_equal(u.port, "443");
    assert_int_equal(ws_url_parse("WSS://h:8443/s", &u, err, sizeof err), 0);
    assert_true(u.tls);
    assert_string_equal(u.port, "8443");
    assert_int_equal(ws_url_parse("ws://h/s", &u, err, sizeof err), 0);
    assert_false(u.tls);
}

static void url_that_is_not_ws_is_refused(void **state)
{
    (void)state;
    struct ws_url u;
    char err[256];
    assert_int_equal(ws_url_parse("http://h/stream", &u, err, sizeof err), -1);
    assert_non_null(strstr(err, "not a ws:// or wss:// URL"));
    assert_int_equal(ws_url_parse("wss:/h", &u, err, sizeof err), -1);
    assert_int_equal(ws_url_parse("ws://h:0/", &u, err, sizeof err), -1);
    assert_int_equal(ws_url_parse("ws://h:65536/", &u, err, sizeof err), -1);
    assert_int_equal(ws_url_parse("ws://:80/", &u, err, sizeof err), -1);
    assert_int_equal(ws_url_parse("ws://h:80x/", &u, err, sizeof err), -1);
}

/* ----- handshake ---------------------------------------------------------------------------- */

static void client_key_is_base64_of_the_nonce(void **state)
{
    (void)state;
    char key[25];
    ws_client_key((const uint8_t *)"the sample nonce", key);
    assert_string_equal(key, "dGhlIHNhbXBsZSBub25jZQ==");
}

static void accept_value_matches_the_rfc_example(void **state)
{
    (void)state;
    char accept[29];
    ws_accept_for("dGhlIHNhbXBsZSBub25jZQ==", accept);
    assert_string_equal(accept, "s3pPLMBiTxaQ9kYGzzhZRbK+xOo=");
}

static void handshake_request_names_path_host_key_and_subprotocol(void **state)
{
    (void)state;
    struct ws_url u;
    char err[256];
    assert_int_equal(ws_url_parse("ws://127.0.0.1:8081/stream", &u, err, sizeof err), 0);
    struct strbuf sb = STRBUF_INIT;
    ws_handshake_request(&sb, &u, "KEY", "trainyard-stream.v1");
    const char *s = sb_str(&sb);
    assert_true(strncmp(s, "GET /stream HTTP/1.1\r\n", 22) == 0);
    assert_non_null(strstr(s, "\r\nHost: 127.0.0.1:8081\r\n"));
    assert_non_null(strstr(s, "\r\nUpgrade: websocket\r\n"));
    assert_non_null(strstr(s, "\r\nSec-WebSocket-Key: KEY\r\n"));
    assert_non_null(strstr(s, "\r\nSec-WebSocket-Version: 13\r\n"));
    assert_non_null(strstr(s, "\r\nSec-WebSocket-Protocol: trainyard-stream.v1\r\n"));
    assert_true(sb.len >= 4 && strcmp(s + sb.len - 4, "\r\n\r\n") == 0);
    assert_null(strstr(s, "token"));
    sb_free(&sb);
}

static const char good_reply[] = "HTTP/1.1 101 Switching Protocols\r\n"
                                 "upgrade: WebSocket\r\n"
                                 "Connection: keep-alive, Upgrade\r\n"
                                 "Sec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                                 "Sec-WebSocket-Protocol: trainyard-stream.v1\r\n\r\n";

static void handshake_reply_that_is_right_passes(void **state)
{
    (void)state;
    char err[256] = "";
    assert_int_equal(ws_handshake_check(good_reply, strlen(good_reply), "dGhlIHNhbXBsZSBub25jZQ==",
                                        "trainyard-stream.v1", err, sizeof err),
                     0);
}

static void handshake_reply_with_wrong_accept_is_refused(void **state)
{
    (void)state;
    char err[256];
    assert_int_equal(ws_handshake_check(good_reply, strlen(good_reply),
                                        "b3RoZXIga2V5IGhlcmU=", NULL, err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "Accept"));
}

static void handshake_reply_that_is_not_101_names_the_status(void **state)
{
    (void)state;
    const char *r = "HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n";
    char err[256];
    assert_int_equal(ws_handshake_check(r, strlen(r), "k", NULL, err, sizeof err), -1);
    assert_non_null(strstr(err, "404 Not Found"));
}

static void handshake_reply_without_the_subprotocol_is_refused(void **state)
{
    (void)state;
    const char *r = "HTTP/1.1 101 Switching Protocols\r\nUpgrade: websocket\r\n"
                    "Connection: Upgrade\r\nSec-WebSocket-Accept: s3pPLMBiTxaQ9kYGzzhZRbK+xOo=\r\n"
                    "\r\n";
    char err[256];
    assert_int_equal(
        ws_handshake_check(r, strlen(r), "dGhlIHNhbXBsZSBub25jZQ==", NULL, err, sizeof err), 0);
    assert_int_equal(ws_handshake_check(r, strlen(r), "dGhlIHNhbXBsZSBub25jZQ==",
                                        "trainyard-stream.v1", err, sizeof err),
                     -1);
    assert_non_null(strstr(err, "subprotocol"));
}

/* ----- writing frames ----------------------------------------------------------------------- */

static void short_text_frame_is_masked_as_in_the_rfc(void **state)
{
    (void)state;
    struct strbuf sb = STRBUF_INIT;
    ws_frame_encode(&sb, WS_OP_TEXT, "Hello", 5, rfc_mask);
    const uint8_t want[] = {0x81, 0x85, 0x37, 0xfa, 0x21, 0x3d, 0x7f, 0x9f, 0x4d, 0x51, 0x58};
    assert_int_equal(sb.len, sizeof want);
    assert_memory_equal(sb.buf, want, sizeof want);
    sb_free(&sb);
}

/* Unmasks a client frame's payload in place; returns its length and sets *body. */
static size_t unmask(struct strbuf *sb, uint8_t **body)
{
    uint8_t *b = (uint8_t *)sb->buf;
    assert_true(b[1] & 0x80);
    size_t len = b[1] & 0x7f, h = 2;
    if (len == 126) {
        len = (size_t)b[2] << 8 | b[3];
        h = 4;
    } else if (len == 127) {
        len = 0;
        for (int i = 0; i < 8; i++)
            len = len << 8 | b[2 + i];
        h = 10;
    }
    uint8_t *mask = b + h;
    *body = b + h + 4;
    assert_int_equal(sb->len, h + 4 + len);
    for (size_t i = 0; i < len; i++)
        (*body)[i] ^= mask[i & 3];
    return len;
}

static void medium_and_long_frames_use_16_and_64_bit_lengths(void **state)
{
    (void)state;
    static char payload[70000];
    for (size_t i = 0; i < sizeof payload; i++)
        payload[i] = (char)('a' + i % 26);
    size_t sizes[] = {125, 126, 65535, 65536, sizeof payload};
    for (size_t k = 0; k < sizeof sizes / sizeof sizes[0]; k++) {
        struct strbuf sb = STRBUF_INIT;
        ws_frame_encode(&sb, WS_OP_BINARY, payload, sizes[k], rfc_mask);
        uint8_t lenbyte = (uint8_t)sb.buf[1] & 0x7f;
        assert_int_equal(lenbyte, sizes[k] < 126 ? sizes[k] : sizes[k] <= 65535 ? 126 : 127);
        uint8_t *body;
        assert_int_equal(unmask(&sb, &body), sizes[k]);
        assert_memory_equal(body, payload, sizes[k]);
        sb_free(&sb);
    }
}

static void close_frame_carries_code_and_reason(void **state)
{
    (void)state;
    struct strbuf sb = STRBUF_INIT;
    ws_close_encode(&sb, WS_CLOSE_NORMAL, "bye", rfc_mask);
    assert_int_equal((uint8_t)sb.buf[0], 0x88);
    uint8_t *body;
    size_t len = unmask(&sb, &body);
    uint16_t code;
    char reason[16];
    assert_int_equal(ws_close_parse(body, len, &code, reason, sizeof reason), 0);
    assert_int_equal(code, 1000);
    assert_string_equal(reason, "bye");
    sb_free(&sb);
}

static void close_reason_is_cut_to_fit_a_control_frame(void **state)
{
    (void)state;
    char lengthy[300];
    memset(lengthy, 'x', sizeof lengthy - 1);
    lengthy[sizeof lengthy - 1] = '\0';
    struct strbuf sb = STRBUF_INIT;
    ws_close_encode(&sb, 1001, lengthy, rfc_mask);
    assert_int_equal((uint8_t)sb.buf[1] & 0x7f, WS_CONTROL_MAX);
    sb_free(&sb);
}

static void close_payload_empty_or_one_byte(void **state)
{
    (void)state;
    uint16_t code = 0;
    char reason[8];
    assert_int_equal(ws_close_parse(NULL, 0, &code, reason, sizeof reason), 0);
    assert_int_equal(code, WS_CLOSE_NO_STATUS);
    const uint8_t one[] = {0x03};
    assert_int_equal(ws_close_parse(one, 1, &code, reason, sizeof reason), -1);
}

/* ----- reading frames ----------------------------------------------------------------------- */

static void single_frame_text_message_is_handed_out(void **state)
{
    (void)state;
    struct ws_reader r;
    ws_reader_init(&r, 1024);
    const uint8_t f[] = {0x81, 0x05, 'H', 'e', 'l', 'l', 'o'};
    ws_reader_feed(&r, f, sizeof f);
    enum ws_opcode op;
    const uint8_t *p;
    size_t n;
    assert_int_equal(ws_reader_next(&r, &op, &p, &n), WS_READ_MESSAGE);
    assert_int_equal(op, WS_OP_TEXT);
    assert_int_equal(n, 5);
    assert_string_equal((const char *)p, "Hello");
    assert_int_equal(ws_reader_next(&r, &op, &p, &n), WS_READ_MORE);
    ws_reader_free(&r);
}

static void fragments_are_joined_around_a_ping(void **state)
{
    (void)state;
    struct ws_reader r;
    ws_reader_init(&r, 1024);
    const uint8_t f[] = {0x01, 0x03, 'H',  'e', 'l',  0x89, 0x02, 'p',
                         'q',  0x00, 0x01, 'l', 0x80, 0x01, 'o'};
    ws_reader_feed(&r, f, sizeof f);
    enum ws_opcode op;
    const uint8_t *p;
    size_t n;
    assert_int_equal(ws_reader_next(&r, &op, &p, &n), WS_READ_CONTROL);
    assert_int_equal(op, WS_OP_PING);
    assert_int_equal(n, 2);
    assert_memory_equal(p, "pq", 2);
    assert_int_equal(ws_reader_next(&r, &op, &p, &n), WS_READ_MESSAGE);
    assert_int_equal(op, WS_OP_TEXT);
    assert_string_equal((const char *)p, "Hello");
    ws_reader_free(&r);
}

static void bytes_fed_one_at_a_time_give_the_same_messages(void **state)
{
    (void)state;
    struct strbuf wire = STRBUF_INIT;
    /* Server frames: unmasked, so build them by hand: 300 bytes (16-bit length) then "ok". */
    uint8_t head[] = {0x81, 126, 0x01, 0x2c};
    sb_append(&wire, (const char *)head, sizeof head);
    for (int i = 0; i < 300; i++)
        sb_append(&wire, i % 2 ? "b" : "a", 1);
    const uint8_t ok[] = {0x81, 0x02, 'o', 'k'};
    sb_append(&wire, (const char *)ok, sizeof ok);

    struct ws_reader r;
    ws_reader_init(&r, 1024);
    enum ws_opcode op;
    const uint8_t *p;
    size_t n;
    int got = 0;
    for (size_t i = 0; i < wire.len; i++) {
        ws_reader_feed(&r, wire.buf + i, 1);
        enum ws_read_result res;
        while ((res = ws_reader_next(&r, &op, &p, &n)) == WS_READ_MESSAGE) {
            if (got == 0) {
                assert_int_equal(n, 300);
                assert_int_equal(p[0], 'a');
                assert_int_equal(p[299], 'b');
            } else {
                assert_string_equal((const char *)p, "ok");
            }
            got++;
        }
        assert_int_equal(res, WS_READ_MORE);
    }
    assert_int_equal(got, 2);
    ws_reader_free(&r);
    sb_free(&wire);
}

static void sixty_four_bit_length_is_read(void **state)
{
    (void)state;
    struct strbuf wire = STRBUF_INIT;
    const uint8_t head[] = {0x82, 127, 0, 0, 0, 0, 0, 1, 0, 0};
    sb_append(&wire, (const char *)head, sizeof head);
    for (int i = 0; i < 65536; i++)
        sb_append(&wire, "z", 1);
    struct ws_reader r;
    ws_reader_init(&r, 1 << 20);
    ws_reader_feed(&r, wire.buf, wire.len);
    enum ws_opcode op;
    const uint8_t *p;
    size_t n;
    assert_int_equal(ws_reader_next(&r, &op, &p, &n), WS_READ_MESSAGE);
    assert_int_equal(op, WS_OP_BINARY);
    assert_int_equal(n, 65536);
    ws_reader_free(&r);
    sb_free(&wire);
}

static void close_frame_is_a_control_frame(void **state)
{
    (void)state;
    struct ws_reader r;
    ws_reader_init(&r, 64);
    const uint8_t f[] = {0x88, 0x06, 0x03, 0xe9, 's', 'l', 'o', 'w'};
    ws_reader_feed(&r, f, sizeof f);
    enum ws_opcode op;
    const uint8_t *p;
    size_t n;
    assert_int_equal(ws_reader_next(&r, &op, &p, &n), WS_READ_CONTROL);
    assert_int_equal(op, WS_OP_CLOSE);
    uint16_t code;
    char reason[16];
    assert_int_equal(ws_close_parse(p, n, &code, reason, sizeof reason), 0);
    assert_int_equal(code, 1001);
    assert_string_equal(reason, "slow");
    ws_reader_free(&r);
}

/* Feeds bytes and expects the reader to refuse them with close code `code`. */
static void expect_refused(const uint8_t *bytes, size_t len, size_t max, uint16_t code)
{
    struct ws_reader r;
    ws_reader_init(&r, max);
    ws_reader_feed(&r, bytes, len);
    enum ws_opcode op;
    const uint8_t *p;
    size_t n;
    enum ws_read_result res;
    while ((res = ws_reader_next(&r, &op, &p, &n)) == WS_READ_MESSAGE || res == WS_READ_CONTROL)
        ;
    assert_int_equal(res, WS_READ_ERROR);
    assert_int_equal(r.err_code, code);
    assert_true(r.err[0] != '\0');
    ws_reader_free(&r);
}

static void masked_server_frame_is_refused(void **state)
{
    (void)state;
    const uint8_t f[] = {0x81, 0x81, 1, 2, 3, 4, 'x'};
    expect_refused(f, sizeof f, 64, WS_CLOSE_PROTOCOL);
}

static void reserved_bits_are_refused(void **state)
{
    (void)state;
    const uint8_t f[] = {0xc1, 0x01, 'x'};
    expect_refused(f, sizeof f, 64, WS_CLOSE_PROTOCOL);
}

static void continuation_without_a_start_is_refused(void **state)
{
    (void)state;
    const uint8_t f[] = {0x80, 0x01, 'x'};
    expect_refused(f, sizeof f, 64, WS_CLOSE_PROTOCOL);
}

static void new_message_inside_a_fragmented_one_is_refused(void **state)
{
    (void)state;
    const uint8_t f[] = {0x01, 0x01, 'a', 0x81, 0x01, 'b'};
    expect_refused(f, sizeof f, 64, WS_CLOSE_PROTOCOL);
}

static void fragmented_or_long_control_frames_are_refused(void **state)
{
    (void)state;
    const uint8_t fragmented_ping[] = {0x09, 0x00};
    expect_refused(fragmented_ping, sizeof fragmented_ping, 64, WS_CLOSE_PROTOCOL);
    const uint8_t long_ping[] = {0x89, 126, 0x00, 0x7e};
    expect_refused(long_ping, sizeof long_ping, 64, WS_CLOSE_PROTOCOL);
}

static void unknown_opcodes_are_refused(void **state)
{
    (void)state;
    const uint8_t data[] = {0x83, 0x00};
    expect_refused(data, sizeof data, 64, WS_CLOSE_PROTOCOL);
    const uint8_t control[] = {0x8b, 0x00};
    expect_refused(control, sizeof control, 64, WS_CLOSE_PROTOCOL);
}

static void message_over_the_limit_is_refused_even_in_fragments(void **state)
{
    (void)state;
    const uint8_t one[] = {0x81, 0x0b, 'h', 'e', 'l', 'l', 'o', ' ', 'w', 'o', 'r', 'l', 'd'};
    expect_refused(one, sizeof one, 10, WS_CLOSE_TOO_BIG);
    const uint8_t parts[] = {0x01, 0x06, 'h', 'e', 'l', 'l', 'o', ' ',
                             0x80, 0x05, 'w', 'o', 'r', 'l', 'd'};
    expect_refused(parts, sizeof parts, 10, WS_CLOSE_TOO_BIG);
}

static const struct CMUnitTest tests[] = {
    cmocka_unit_test(url_with_port_and_path_is_split),
    cmocka_unit_test(url_defaults_to_port_80_and_root_path),
    cmocka_unit_test(url_with_ipv6_host_drops_brackets),
    cmocka_unit_test(url_wss_speaks_tls_on_port_443_by_default),
    cmocka_unit_test(url_that_is_not_ws_is_refused),
    cmocka_unit_test(client_key_is_base64_of_the_nonce),
    cmocka_unit_test(accept_value_matches_the_rfc_example),
    cmocka_unit_test(handshake_request_names_path_host_key_and_subprotocol),
    cmocka_unit_test(handshake_reply_that_is_right_passes),
    cmocka_unit_test(handshake_reply_with_wrong_accept_is_refused),
    cmocka_unit_test(handshake_reply_that_is_not_101_names_the_status),
    cmocka_unit_test(handshake_reply_without_the_subprotocol_is_refused),
    cmocka_unit_test(short_text_frame_is_masked_as_in_the_rfc),
    cmocka_unit_test(medium_and_long_frames_use_16_and_64_bit_lengths),
    cmocka_unit_test(close_frame_carries_code_and_reason),
    cmocka_unit_test(close_reason_is_cut_to_fit_a_control_frame),
    cmocka_unit_test(close_payload_empty_or_one_byte),
    cmocka_unit_test(single_frame_text_message_is_handed_out),
    cmocka_unit_test(fragments_are_joined_around_a_ping),
    cmocka_unit_test(bytes_fed_one_at_a_time_give_the_same_messages),
    cmocka_unit_test(sixty_four_bit_length_is_read),
    cmocka_unit_test(close_frame_is_a_control_frame),
    cmocka_unit_test(masked_server_frame_is_refused),
    cmocka_unit_test(reserved_bits_are_refused),
    cmocka_unit_test(continuation_without_a_start_is_refused),
    cmocka_unit_test(new_message_inside_a_fragmented_one_is_refused),
    cmocka_unit_test(fragmented_or_long_control_frames_are_refused),
    cmocka_unit_test(unknown_opcodes_are_refused),
    cmocka_unit_test(message_over_the_limit_is_refused_even_in_fragments),
};
TY_TEST_MAIN(tests)

/*
 * ws_client.c - socket I/O of the CLI's websocket client: connect with a deadline, TLS for
 * wss:// (OpenSSL, the server's certificate checked against --ca-file or the system's CAs and
 * the URL's host name), handshake, send masked frames, read messages through a ws_reader.
 */
#include "ws_client.h"

#include "strbuf.h"
#include "ws_frame.h"
#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <netdb.h>
#include <openssl/err.h>
#include <openssl/rand.h>
#include <openssl/ssl.h>
#include <openssl/x509v3.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

struct ws_conn {
    int fd;
    SSL_CTX *tls_ctx; /* wss:// only, else NULL */
    SSL *tls;
    bool open; /* no close frame sent or received yet */
    struct ws_reader reader;
    long long last_rx_ms;
};

/* Room for the handshake reply's head; a longer one is refused. */
#define WS_HEAD_MAX 16384

static void random_bytes(uint8_t *out, size_t n)
{
    if (RAND_bytes(out, (int)n) != 1) {
        /* Masking keys only defeat proxy cache poisoning; a weak key is no local risk. */
        for (size_t i = 0; i < n; i++)
            out[i] = (uint8_t)(rand() & 0xff);
    }
}

/* Waits until fd is ready for `events` or the deadline passes. Returns 1 ready, 0 timeout, -1. */
static int wait_fd(int fd, short events, long long deadline)
{
    for (;;) {
        long long left = deadline - util_mono_ms();
        if (left < 0)
            left = 0;
        struct pollfd p = {fd, events, 0};
        int n = poll(&p, 1, left > 0x7fffffff ? 0x7fffffff : (int)left);
        if (n >= 0)
            return n > 0 ? 1 : 0;
        if (errno != EINTR)
            return -1;
    }
}

/* The reason of the last OpenSSL error, for messages. */
static const char *tls_reason(void)
{
    unsigned long e = ERR_peek_last_error();
    const char *r = e ? ERR_reason_error_string(e) : NULL;
    return r ? r : "TLS error";
}

/*
 * Waits as OpenSSL asks after a call on c->tls returned rc: 1 to retry, 0 on timeout, -1 when
 * the connection is over (TLS error or EOF). Fills err unless it returns 1.
 */
static int tls_wait(struct ws_conn *c, int rc, long long deadline, char *err, size_t errlen)
{
    int why = SSL_get_error(c->tls, rc);
    short events = why == SSL_ERROR_WANT_READ ? POLLIN : why == SSL_ERROR_WANT_WRITE ? POLLOUT : 0;
    if (events == 0) {
        if (why == SSL_ERROR_ZERO_RETURN || (why == SSL_ERROR_SYSCALL && errno == 0))
            snprintf(err, errlen, "the stream connection was closed");
        else
            snprintf(err, errlen, "TLS: %s", tls_reason());
        return -1;
    }
    int ready = wait_fd(c->fd, events, deadline);
    if (ready == 1)
        return 1;
    snprintf(err, errlen, ready == 0 ? "timed out on the stream" : "polling the stream: %s",
             strerror(errno));
    return ready;
}

/* Writes all of buf before the deadline. Returns 0, or -1 with err filled. */
static int write_all(struct ws_conn *c, const char *buf, size_t len, long long deadline, char *err,
                     size_t errlen)
{
    int fd = c->fd;
    while (len > 0 && c->tls) {
        ERR_clear_error();
        int n = SSL_write(c->tls, buf, len > INT32_MAX ? INT32_MAX : (int)len);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
        } else if (tls_wait(c, n, deadline, err, errlen) != 1) {
            return -1;
        }
    }
    while (len > 0) {
        ssize_t n = send(fd, buf, len, MSG_NOSIGNAL);
        if (n > 0) {
            buf += n;
            len -= (size_t)n;
            continue;
        }
        if (n < 0 && errno == EINTR)
            continue;
        if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
            if (wait_fd(fd, POLLOUT, deadline) == 1)
                continue;
            snprintf(err, errlen, "timed out sending to the stream");
            return -1;
        }
        snprintf(err, errlen, "sending to the stream: %s", strerror(errno));
        return -1;
    }
    return 0;
}

/* Opens a non-blocking TCP connection to host:port before the deadline; -1 with err. */
static int tcp_connect(const char *host, const char *port, long long deadline, char *err,
                       size_t errlen)
{
    struct addrinfo hints = {0}, *res = NULL;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    int gai = getaddrinfo(host, port, &hints, &res);
    if (gai != 0) {
        snprintf(err, errlen, "cannot resolve %s: %s", host, gai_strerror(gai));
        return -1;
    }
    int fd = -1, last_errno = 0;
    for (struct addrinfo *ai = res; ai && fd < 0; ai = ai->ai_next) {
        fd = socket(ai->ai_family, ai->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, ai->ai_protocol);
        if (fd < 0) {
            last_errno = errno;
            continue;
        }
        if (connect(fd, ai->ai_addr, ai->ai_addrlen) != 0 && errno != EINPROGRESS) {
            last_errno = errno;
        } else {
            int ready = wait_fd(fd, POLLOUT, deadline);
            socklen_t sl = sizeof last_errno;
            if (ready == 1 && getsockopt(fd, SOL_SOCKET, SO_ERROR, &last_errno, &sl) == 0 &&
                last_errno == 0)
                break;
            if (ready == 0)
                last_errno = ETIMEDOUT;
        }
        close(fd);
        fd = -1;
    }
    freeaddrinfo(res);
    if (fd < 0)
        snprintf(err, errlen, "cannot connect to %s:%s: %s", host, port, strerror(last_errno));
    return fd;
}

/*
 * Reads what arrives on c into buf before the deadline: the byte count, 0 on timeout, or -1 when
 * the connection is over (err filled: EOF, or the error).
 */
static ssize_t conn_read(struct ws_conn *c, char *buf, size_t len, long long deadline, char *err,
                         size_t errlen)
{
    for (;;) {
        if (c->tls) {
            ERR_clear_error();
            int n = SSL_read(c->tls, buf, (int)len);
            if (n > 0)
                return n;
            int w = tls_wait(c, n, deadline, err, errlen);
            if (w != 1)
                return w;
            continue;
        }
        int ready = wait_fd(c->fd, POLLIN, deadline);
        if (ready == 0)
            return 0;
        ssize_t n = ready == 1 ? recv(c->fd, buf, len, 0) : -1;
        if (n > 0)
            return n;
        if (n < 0 && (errno == EINTR || errno == EAGAIN))
            continue;
        if (n == 0)
            snprintf(err, errlen, "the stream connection was closed");
        else
            snprintf(err, errlen, "the stream connection broke: %s", strerror(errno));
        return -1;
    }
}

/*
 * Starts TLS on c->fd for host before the deadline: SNI, the server's certificate checked
 * against ca_file (NULL: the system's CAs) and host. Returns 0, -2 when the certificate was
 * refused (retrying cannot help), or -1 with err filled.
 */
static int tls_start(struct ws_conn *c, const char *host, const char *ca_file, long long deadline,
                     char *err, size_t errlen)
{
    c->tls_ctx = SSL_CTX_new(TLS_client_method());
    if (!c->tls_ctx) {
        snprintf(err, errlen, "TLS: %s", tls_reason());
        return -1;
    }
    SSL_CTX_set_min_proto_version(c->tls_ctx, TLS1_2_VERSION);
    SSL_CTX_set_verify(c->tls_ctx, SSL_VERIFY_PEER, NULL);
    int loaded = ca_file ? SSL_CTX_load_verify_locations(c->tls_ctx, ca_file, NULL)
                         : SSL_CTX_set_default_verify_paths(c->tls_ctx);
    if (loaded != 1) {
        snprintf(err, errlen, "cannot load CA certificates%s%s: %s", ca_file ? " from " : "",
                 ca_file ? ca_file : "", tls_reason());
        return -1;
    }
    bool ip = strchr(host, ':') != NULL || strspn(host, "0123456789.") == strlen(host);
    c->tls = SSL_new(c->tls_ctx);
    if (!c->tls || SSL_set_fd(c->tls, c->fd) != 1 ||
        (ip ? X509_VERIFY_PARAM_set1_ip_asc(SSL_get0_param(c->tls), host)
            : SSL_set1_host(c->tls, host) && SSL_set_tlsext_host_name(c->tls, host)) != 1) {
        snprintf(err, errlen, "TLS: %s", tls_reason());
        return -1;
    }
    for (;;) {
        ERR_clear_error();
        int rc = SSL_connect(c->tls);
        if (rc == 1)
            return 0;
        if (SSL_get_error(c->tls, rc) == SSL_ERROR_SSL &&
            SSL_get_verify_result(c->tls) != X509_V_OK) {
            snprintf(err, errlen, "the stream server's certificate was refused: %s",
                     X509_verify_cert_error_string(SSL_get_verify_result(c->tls)));
            return -2;
        }
        if (tls_wait(c, rc, deadline, err, errlen) != 1)
            return -1;
    }
}

/*
 * Reads the handshake reply's head into head (up to the blank line); bytes after it (the first
 * frames) go to the reader. Returns 0, or -1 with err filled.
 */
static int read_head(struct ws_conn *c, struct strbuf *head, long long deadline, char *err,
                     size_t errlen)
{
    char buf[4096];
    for (;;) {
        const char *end = head->len ? strstr(sb_str(head), "\r\n\r\n") : NULL;
        if (end) {
            size_t used = (size_t)(end - sb_str(head)) + 4;
            ws_reader_feed(&c->reader, head->buf + used, head->len - used);
            head->len = used;
            head->buf[used] = '\0';
            return 0;
        }
        if (head->len > WS_HEAD_MAX) {
            snprintf(err, errlen, "websocket handshake reply too long");
            return -1;
        }
        char why[200];
        ssize_t n = conn_read(c, buf, sizeof buf, deadline, why, sizeof why);
        if (n <= 0) {
            snprintf(err, errlen, "no websocket handshake reply: %s", n == 0 ? "timed out" : why);
            return -1;
        }
        sb_append(head, buf, (size_t)n);
    }
}

struct ws_conn *ws_conn_open(const char *url, const char *protocol, const char *ca_file,
                             long timeout_ms, int *refused, char *err, size_t errlen)
{
    struct ws_url u;
    *refused = 0;
    if (ws_url_parse(url, &u, err, errlen) != 0) {
        *refused = 1;
        return NULL;
    }
    long long deadline = util_mono_ms() + timeout_ms;
    int fd = tcp_connect(u.host, u.port, deadline, err, errlen);
    if (fd < 0)
        return NULL;
    struct ws_conn *c = xmalloc(sizeof *c);
    c->fd = fd;
    c->tls_ctx = NULL;
    c->tls = NULL;
    c->open = true;
    ws_reader_init(&c->reader, WS_CLIENT_MAX_MESSAGE);
    int tls_rc = u.tls ? tls_start(c, u.host, ca_file, deadline, err, errlen) : 0;
    if (tls_rc != 0) {
        *refused = tls_rc == -2;
        c->open = false;
        ws_conn_close(c, 0);
        return NULL;
    }

    uint8_t nonce[16];
    char key[25];
    random_bytes(nonce, sizeof nonce);
    ws_client_key(nonce, key);
    struct strbuf req = STRBUF_INIT, head = STRBUF_INIT;
    ws_handshake_request(&req, &u, key, protocol);
    int rc = write_all(c, req.buf, req.len, deadline, err, errlen);
    if (rc == 0)
        rc = read_head(c, &head, deadline, err, errlen);
    if (rc == 0 && ws_handshake_check(sb_str(&head), head.len, key, protocol, err, errlen) != 0) {
        *refused = 1;
        rc = -1;
    }
    sb_free(&req);
    sb_free(&head);
    if (rc != 0) {
        c->open = false;
        ws_conn_close(c, 0);
        return NULL;
    }
    c->last_rx_ms = util_mono_ms();
    return c;
}

/* Sends one frame with a fresh mask; -1 with err on a broken connection. */
static int send_frame(struct ws_conn *c, enum ws_opcode op, const void *payload, size_t len,
                      char *err, size_t errlen)
{
    uint8_t mask[4];
    random_bytes(mask, sizeof mask);
    struct strbuf f = STRBUF_INIT;
    ws_frame_encode(&f, op, payload, len, mask);
    int rc = write_all(c, f.buf, f.len, util_mono_ms() + 10000, err, errlen);
    sb_free(&f);
    return rc;
}

int ws_conn_send_text(struct ws_conn *c, const char *text, size_t len, char *err, size_t errlen)
{
    return send_frame(c, WS_OP_TEXT, text, len, err, errlen);
}

int ws_conn_ping(struct ws_conn *c)
{
    char err[128];
    return send_frame(c, WS_OP_PING, "tyc", 3, err, sizeof err);
}

long long ws_conn_idle_ms(const struct ws_conn *c)
{
    return util_mono_ms() - c->last_rx_ms;
}

/* Handles a control frame. Returns 0 to go on, or -1 when the connection is over (err set). */
static int on_control(struct ws_conn *c, enum ws_opcode op, const uint8_t *payload, size_t len,
                      char *err, size_t errlen)
{
    if (op == WS_OP_PING)
        return send_frame(c, WS_OP_PONG, payload, len, err, errlen);
    if (op != WS_OP_CLOSE)
        return 0;
    uint16_t code = WS_CLOSE_PROTOCOL;
    char reason[WS_CONTROL_MAX + 1];
    if (ws_close_parse(payload, len, &code, reason, sizeof reason) != 0)
        snprintf(reason, sizeof reason, "malformed close frame");
    snprintf(err, errlen, "the server closed the stream (%u%s%s)", code, reason[0] ? ": " : "",
             reason);
    char ignored[64];
    uint8_t echo[2] = {(uint8_t)(code >> 8), (uint8_t)code};
    send_frame(c, WS_OP_CLOSE, echo, code == WS_CLOSE_NO_STATUS ? 0 : 2, ignored, sizeof ignored);
    c->open = false;
    return -1;
}

enum ws_recv_result ws_conn_recv(struct ws_conn *c, long timeout_ms, const char **text, size_t *len,
                                 char *err, size_t errlen)
{
    long long deadline = util_mono_ms() + timeout_ms;
    char buf[65536];
    for (;;) {
        enum ws_opcode op;
        const uint8_t *payload;
        size_t plen;
        enum ws_read_result r = ws_reader_next(&c->reader, &op, &payload, &plen);
        if (r == WS_READ_ERROR) {
            snprintf(err, errlen, "bad frame from the stream server: %s", c->reader.err);
            char ignored[64];
            uint8_t body[2] = {(uint8_t)(c->reader.err_code >> 8), (uint8_t)c->reader.err_code};
            send_frame(c, WS_OP_CLOSE, body, sizeof body, ignored, sizeof ignored);
            c->open = false;
            return WS_RECV_CLOSED;
        }
        if (r == WS_READ_CONTROL) {
            if (on_control(c, op, payload, plen, err, errlen) != 0)
                return WS_RECV_CLOSED;
            continue;
        }
        if (r == WS_READ_MESSAGE) {
            if (op != WS_OP_TEXT)
                continue;
            *text = (const char *)payload;
            *len = plen;
            return WS_RECV_MESSAGE;
        }
        ssize_t n = conn_read(c, buf, sizeof buf, deadline, err, errlen);
        if (n == 0)
            return WS_RECV_TIMEOUT;
        if (n < 0) {
            c->open = false;
            return WS_RECV_CLOSED;
        }
        c->last_rx_ms = util_mono_ms();
        ws_reader_feed(&c->reader, buf, (size_t)n);
    }
}

void ws_conn_close(struct ws_conn *c, uint16_t code)
{
    if (!c)
        return;
    if (c->open && code) {
        char ignored[64];
        uint8_t mask[4];
        struct strbuf f = STRBUF_INIT;
        random_bytes(mask, sizeof mask);
        ws_close_encode(&f, code, NULL, mask);
        write_all(c, f.buf, f.len, util_mono_ms() + 1000, ignored, sizeof ignored);
        sb_free(&f);
    }
    if (c->tls) {
        if (c->open)
            SSL_shutdown(c->tls);
        SSL_free(c->tls);
    }
    SSL_CTX_free(c->tls_ctx);
    close(c->fd);
    ws_reader_free(&c->reader);
    free(c);
}

/*
 * ws_frame.c - RFC 6455 framing and handshake text for the CLI's websocket client; no I/O.
 */
#include "ws_frame.h"

#include <ctype.h>
#include <openssl/evp.h>
#include <openssl/sha.h>
#include <stdio.h>
#include <string.h>
#include <strings.h>

#define WS_GUID "258EAFA5-E914-47DA-95CA-C5AB0DC85B11"

/* ---------------------------------------------------------------------------------------------
 * URL and handshake
 * ------------------------------------------------------------------------------------------- */

int ws_url_parse(const char *url, struct ws_url *out, char *err, size_t errlen)
{
    memset(out, 0, sizeof *out);
    out->tls = strncasecmp(url, "wss://", 6) == 0;
    if (!out->tls && strncasecmp(url, "ws://", 5) != 0) {
        snprintf(err, errlen, "'%s' is not a ws:// or wss:// URL", url);
        return -1;
    }
    const char *p = url + (out->tls ? 6 : 5), *host_end, *next;
    if (*p == '[') {
        host_end = strchr(p, ']');
        if (!host_end) {
            snprintf(err, errlen, "'%s': unterminated [IPv6] host", url);
            return -1;
        }
        p++;
        next = host_end + 1;
    } else {
        host_end = p + strcspn(p, ":/?");
        next = host_end;
    }
    size_t hlen = (size_t)(host_end - p);
    if (hlen == 0 || hlen >= sizeof out->host) {
        snprintf(err, errlen, "'%s': missing or overlong host", url);
        return -1;
    }
    memcpy(out->host, p, hlen);
    snprintf(out->port, sizeof out->port, "%s", out->tls ? "443" : "80");
    if (*next == ':') {
        next++;
        size_t plen = strspn(next, "0123456789");
        long port = 0;
        for (size_t i = 0; i < plen && port <= 65535; i++)
            port = port * 10 + (next[i] - '0');
        if (plen == 0 || port < 1 || port > 65535) {
            snprintf(err, errlen, "'%s': bad port", url);
            return -1;
        }
        snprintf(out->port, sizeof out->port, "%ld", port);
        next += plen;
    }
    if (*next && *next != '/' && *next != '?') {
        snprintf(err, errlen, "'%s': unexpected text after the host", url);
        return -1;
    }
    if (strlen(next) + 2 > sizeof out->path) {
        snprintf(err, errlen, "'%s': path too long", url);
        return -1;
    }
    snprintf(out->path, sizeof out->path, "%s%s", *next == '/' ? "" : "/", next);
    return 0;
}

void ws_client_key(const uint8_t nonce[16], char key[25])
{
    EVP_EncodeBlock((unsigned char *)key, nonce, 16);
}

void ws_accept_for(const char *key, char accept[29])
{
    unsigned char digest[SHA_DIGEST_LENGTH];
    char joined[128];
    int n = snprintf(joined, sizeof joined, "%s%s", key, WS_GUID);
    SHA1((const unsigned char *)joined, n > 0 && (size_t)n < sizeof joined ? (size_t)n : 0, digest);
    EVP_EncodeBlock((unsigned char *)accept, digest, SHA_DIGEST_LENGTH);
}

void ws_handshake_request(struct strbuf *out, const struct ws_url *url, const char *key,
                          const char *protocol)
{
    bool v6 = strchr(url->host, ':') != NULL;
    sb_printf(out,
              "GET %s HTTP/1.1\r\nHost: %s%s%s:%s\r\nUpgrade: websocket\r\n"
              "Connection: Upgrade\r\nSec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n",
              url->path, v6 ? "[" : "", url->host, v6 ? "]" : "", url->port, key);
    if (protocol)
        sb_printf(out, "Sec-WebSocket-Protocol: %s\r\n", protocol);
    sb_puts(out, "\r\n");
}

/*
 * Finds header `name` in the reply head; copies its value (trimmed) into val. Returns whether it
 * was there.
 */
static bool header_value(const char *head, size_t len, const char *name, char *val, size_t vlen)
{
    size_t nlen = strlen(name);
    const char *end = head + len;
    const char *line = memchr(head, '\n', len);
    while (line && ++line < end) {
        const char *eol = memchr(line, '\n', (size_t)(end - line));
        if (!eol)
            eol = end;
        if ((size_t)(eol - line) > nlen && strncasecmp(line, name, nlen) == 0 &&
            line[nlen] == ':') {
            const char *v = line + nlen + 1;
            while (v < eol && (*v == ' ' || *v == '\t'))
                v++;
            const char *ve = eol;
            while (ve > v && isspace((unsigned char)ve[-1]))
                ve--;
            size_t n = (size_t)(ve - v) < vlen - 1 ? (size_t)(ve - v) : vlen - 1;
            memcpy(val, v, n);
            val[n] = '\0';
            return true;
        }
        line = eol;
    }
    return false;
}

/* Whether the comma-separated list `list` holds `token` (case-insensitive). */
static bool has_token(const char *list, const char *token)
{
    size_t tlen = strlen(token);
    const char *p = list;
    while (*p) {
        while (*p == ' ' || *p == ',' || *p == '\t')
            p++;
        size_t n = strcspn(p, ", \t");
        if (n == tlen && strncasecmp(p, token, n) == 0)
            return true;
        p += n;
    }
    return false;
}

int ws_handshake_check(const char *head, size_t len, const char *key, const char *protocol,
                       char *err, size_t errlen)
{
    size_t line_len = strcspn(head, "\r\n");
    if (line_len > len)
        line_len = len;
    int status = 0;
    if (sscanf(head, "HTTP/1.%*[01] %3d", &status) != 1 || status != 101) {
        snprintf(err, errlen, "the server refused the websocket upgrade: %.*s", (int)line_len,
                 head);
        return -1;
    }
    char val[256], want[29];
    if (!header_value(head, len, "Upgrade", val, sizeof val) || strcasecmp(val, "websocket")) {
        snprintf(err, errlen, "bad websocket handshake reply: no 'Upgrade: websocket'");
        return -1;
    }
    if (!header_value(head, len, "Connection", val, sizeof val) || !has_token(val, "upgrade")) {
        snprintf(err, errlen, "bad websocket handshake reply: no 'Connection: upgrade'");
        return -1;
    }
    ws_accept_for(key, want);
    if (!header_value(head, len, "Sec-WebSocket-Accept", val, sizeof val) || strcmp(val, want)) {
        snprintf(err, errlen, "bad websocket handshake reply: wrong Sec-WebSocket-Accept");
        return -1;
    }
    if (protocol && (!header_value(head, len, "Sec-WebSocket-Protocol", val, sizeof val) ||
                     strcmp(val, protocol) != 0)) {
        snprintf(err, errlen, "the server did not accept the websocket subprotocol %s", protocol);
        return -1;
    }
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Writing frames
 * ------------------------------------------------------------------------------------------- */

void ws_frame_encode(struct strbuf *out, enum ws_opcode op, const void *payload, size_t len,
                     const uint8_t mask[4])
{
    uint8_t head[14];
    size_t n = 0;
    head[n++] = (uint8_t)(0x80 | (op & 0x0f));
    if (len < 126) {
        head[n++] = (uint8_t)(0x80 | len);
    } else if (len <= 0xffff) {
        head[n++] = 0x80 | 126;
        head[n++] = (uint8_t)(len >> 8);
        head[n++] = (uint8_t)len;
    } else {
        head[n++] = 0x80 | 127;
        for (int i = 7; i >= 0; i--)
            head[n++] = (uint8_t)((uint64_t)len >> (8 * i));
    }
    memcpy(head + n, mask, 4);
    n += 4;
    sb_append(out, (const char *)head, n);
    const uint8_t *p = payload;
    char chunk[4096];
    for (size_t done = 0; done < len;) {
        size_t k = len - done < sizeof chunk ? len - done : sizeof chunk;
        for (size_t i = 0; i < k; i++)
            chunk[i] = (char)(p[done + i] ^ mask[(done + i) & 3]);
        sb_append(out, chunk, k);
        done += k;
    }
}

void ws_close_encode(struct strbuf *out, uint16_t code, const char *reason, const uint8_t mask[4])
{
    uint8_t body[WS_CONTROL_MAX];
    size_t rlen = reason ? strlen(reason) : 0;
    if (rlen > WS_CONTROL_MAX - 2)
        rlen = WS_CONTROL_MAX - 2;
    body[0] = (uint8_t)(code >> 8);
    body[1] = (uint8_t)code;
    if (rlen)
        memcpy(body + 2, reason, rlen);
    ws_frame_encode(out, WS_OP_CLOSE, body, rlen + 2, mask);
}

int ws_close_parse(const uint8_t *payload, size_t len, uint16_t *code, char *reason,
                   size_t reason_len)
{
    if (reason_len)
        reason[0] = '\0';
    if (len == 0) {
        *code = WS_CLOSE_NO_STATUS;
        return 0;
    }
    if (len == 1)
        return -1;
    *code = (uint16_t)(payload[0] << 8 | payload[1]);
    size_t n = 0;
    for (size_t i = 2; i < len && n + 1 < reason_len; i++)
        reason[n++] = (payload[i] < 0x20 || payload[i] == 0x7f) ? ' ' : (char)payload[i];
    if (reason_len)
        reason[n] = '\0';
    return 0;
}

/* ---------------------------------------------------------------------------------------------
 * Reading frames
 * ------------------------------------------------------------------------------------------- */

void ws_reader_init(struct ws_reader *r, size_t max_message)
{
    memset(r, 0, sizeof *r);
    r->msg_op = -1;
    r->max_message = max_message;
}

void ws_reader_free(struct ws_reader *r)
{
    sb_free(&r->in);
    sb_free(&r->msg);
    r->pos = 0;
    r->msg_op = -1;
}

void ws_reader_feed(struct ws_reader *r, const void *data, size_t len)
{
    if (r->pos > 0 && r->pos == r->in.len) {
        r->in.len = 0;
        r->pos = 0;
    } else if (r->pos > 65536 && r->pos * 2 > r->in.len) {
        memmove(r->in.buf, r->in.buf + r->pos, r->in.len - r->pos);
        r->in.len -= r->pos;
        r->pos = 0;
    }
    sb_append(&r->in, data, len);
}

static enum ws_read_result fail(struct ws_reader *r, uint16_t code, const char *why)
{
    r->err_code = code;
    snprintf(r->err, sizeof r->err, "%s", why);
    return WS_READ_ERROR;
}

enum ws_read_result ws_reader_next(struct ws_reader *r, enum ws_opcode *op, const uint8_t **payload,
                                   size_t *len)
{
    if (r->msg_op == -2) { /* the last call handed out a whole message */
        r->msg.len = 0;
        r->msg_op = -1;
    }
    for (;;) {
        const uint8_t *b = (const uint8_t *)r->in.buf + r->pos;
        size_t avail = r->in.len - r->pos;
        if (avail < 2)
            return WS_READ_MORE;
        bool fin = b[0] & 0x80;
        int opcode = b[0] & 0x0f;
        if (b[0] & 0x70)
            return fail(r, WS_CLOSE_PROTOCOL, "reserved bits set in a frame");
        if (b[1] & 0x80)
            return fail(r, WS_CLOSE_PROTOCOL, "masked frame from the server");
        uint64_t plen = b[1] & 0x7f;
        size_t hlen = 2;
        if (plen == 126) {
            if (avail < 4)
                return WS_READ_MORE;
            plen = (uint64_t)b[2] << 8 | b[3];
            hlen = 4;
        } else if (plen == 127) {
            if (avail < 10)
                return WS_READ_MORE;
            plen = 0;
            for (int i = 0; i < 8; i++)
                plen = plen << 8 | b[2 + i];
            hlen = 10;
            if (plen >> 63)
                return fail(r, WS_CLOSE_PROTOCOL, "frame length with the top bit set");
        }
        bool control = opcode & 0x08;
        if (control) {
            if (opcode != WS_OP_CLOSE && opcode != WS_OP_PING && opcode != WS_OP_PONG)
                return fail(r, WS_CLOSE_PROTOCOL, "unknown control opcode");
            if (!fin)
                return fail(r, WS_CLOSE_PROTOCOL, "fragmented control frame");
            if (plen > WS_CONTROL_MAX)
                return fail(r, WS_CLOSE_PROTOCOL, "control frame longer than 125 bytes");
        } else if (opcode == WS_OP_CONT) {
            if (r->msg_op < 0)
                return fail(r, WS_CLOSE_PROTOCOL, "continuation frame with no message open");
        } else if (opcode == WS_OP_TEXT || opcode == WS_OP_BINARY) {
            if (r->msg_op >= 0)
                return fail(r, WS_CLOSE_PROTOCOL, "new message inside a fragmented one");
        } else {
            return fail(r, WS_CLOSE_PROTOCOL, "unknown data opcode");
        }
        if (!control && plen > r->max_message - r->msg.len)
            return fail(r, WS_CLOSE_TOO_BIG, "message larger than this client accepts");
        if (avail - hlen < plen)
            return WS_READ_MORE;

        const uint8_t *body = b + hlen;
        r->pos += hlen + (size_t)plen;
        if (control) {
            memcpy(r->control, body, (size_t)plen);
            *op = (enum ws_opcode)opcode;
            *payload = r->control;
            *len = (size_t)plen;
            return WS_READ_CONTROL;
        }
        if (opcode != WS_OP_CONT)
            r->msg_op = opcode;
        sb_append(&r->msg, (const char *)body, (size_t)plen);
        if (fin) {
            *op = (enum ws_opcode)r->msg_op;
            *payload = (const uint8_t *)sb_str(&r->msg);
            *len = r->msg.len;
            r->msg_op = -2;
            return WS_READ_MESSAGE;
        }
    }
}

/*
 * api.c - REST calls with uniform error reporting.
 */
#include "api.h"

#include "output.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int api_send(struct cli_ctx *ctx, const char *method, const char *path, const char *body,
             size_t body_len, bool quiet_unreachable, struct http_response *resp, char *err,
             size_t errlen)
{
    char why[HTTP_ERROR_MAX];
    if (http_request(ctx->http, method, path, body, body_len, resp, why, sizeof why) != 0) {
        if (err)
            snprintf(err, errlen, "%s", why);
        if (!quiet_unreachable)
            fprintf(stderr, "error: cannot reach the server at %s (%s %s): %s\n",
                    http_client_base(ctx->http), method, path, why);
        return CLI_EXIT_UNREACHABLE;
    }
    if (resp->status >= 200 && resp->status < 300)
        return CLI_EXIT_OK;
    if (resp->status >= 400)
        out_problem(resp);
    else
        out_odd_reply(resp, "not a success");
    http_response_free(resp);
    return CLI_EXIT_FAILED;
}

int api_json(struct cli_ctx *ctx, const char *method, const char *path, const char *body,
             size_t body_len, json_t **out)
{
    struct http_response resp;
    if (out)
        *out = NULL;
    int rc = api_send(ctx, method, path, body, body_len, false, &resp, NULL, 0);
    if (rc != CLI_EXIT_OK)
        return rc;
    if (out && !(resp.status == 204 && resp.len == 0)) { /* 204: *out stays NULL */
        json_error_t jerr;
        *out = resp.len ? json_loadb(resp.body, resp.len, JSON_DECODE_ANY, &jerr) : NULL;
        if (!*out) {
            out_odd_reply(&resp, resp.len ? "body is not JSON" : "empty body");
            rc = CLI_EXIT_FAILED;
        }
    }
    http_response_free(&resp);
    return rc;
}

int api_json_idempotent(struct cli_ctx *ctx, const char *path, const char *body, size_t body_len,
                        json_t **out)
{
    unsigned char raw[16];
    char header[64];
    int fd = open("/dev/urandom", O_RDONLY | O_CLOEXEC);
    bool random = fd >= 0 && read(fd, raw, sizeof raw) == (ssize_t)sizeof raw;
    if (fd >= 0)
        close(fd);
    if (!random) /* no key: one plain request, as before */
        return api_json(ctx, "POST", path, body, body_len, out);
    int n = snprintf(header, sizeof header, "Idempotency-Key: ");
    for (size_t i = 0; i < sizeof raw; i++)
        n += snprintf(header + n, sizeof header - (size_t)n, "%02x", raw[i]);
    if (http_client_set_header(ctx->http, header) != 0)
        return api_json(ctx, "POST", path, body, body_len, out);
    int rc = CLI_EXIT_UNREACHABLE;
    for (int attempt = 1; attempt <= API_SUBMIT_TRIES && rc == CLI_EXIT_UNREACHABLE; attempt++) {
        struct http_response resp;
        char why[HTTP_ERROR_MAX];
        bool last = attempt == API_SUBMIT_TRIES;
        rc = api_send(ctx, "POST", path, body, body_len, !last, &resp, why, sizeof why);
        if (rc == CLI_EXIT_UNREACHABLE && !last) {
            fprintf(stderr, "warning: %s: %s; retrying with the same Idempotency-Key\n", path, why);
            sleep(1);
            continue;
        }
        if (rc == CLI_EXIT_OK) {
            json_error_t jerr;
            *out = resp.len ? json_loadb(resp.body, resp.len, JSON_DECODE_ANY, &jerr) : NULL;
            if (!*out) {
                out_odd_reply(&resp, resp.len ? "body is not JSON" : "empty body");
                rc = CLI_EXIT_FAILED;
            }
            http_response_free(&resp);
        }
    }
    http_client_set_header(ctx->http, NULL);
    return rc;
}

void api_path_escaped(struct cli_ctx *ctx, struct strbuf *path, const char *text)
{
    char *e = http_escape(ctx->http, text);
    sb_puts(path, e);
    free(e);
}

void api_query(struct cli_ctx *ctx, struct strbuf *path, const char *name, const char *value)
{
    if (!value)
        return;
    sb_puts(path, strchr(sb_str(path), '?') ? "&" : "?");
    sb_puts(path, name);
    sb_puts(path, "=");
    api_path_escaped(ctx, path, value);
}

void api_print_json(const json_t *v)
{
    out_json(stdout, v);
}

int api_get_list(struct cli_ctx *ctx, const char *path, const char *key, json_t **reply,
                 const json_t **list)
{
    *reply = NULL;
    int rc = api_json(ctx, "GET", path, NULL, 0, reply);
    if (rc != CLI_EXIT_OK)
        return rc;
    *list = json_object_get(*reply, key);
    if (!json_is_array(*list)) {
        fprintf(stderr, "error: unexpected reply from the server: no \"%s\" array\n", key);
        json_decref(*reply);
        *reply = NULL;
        return CLI_EXIT_FAILED;
    }
    return CLI_EXIT_OK;
}

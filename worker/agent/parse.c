/* Pure parsers for the agent's options: server URL, port range, GPU list, labels, custom
 * resources, and the accelerator type of an NVML device name. No I/O. */
#include "agent.h"

#include "util.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define ERR(...) (snprintf(err, errlen, __VA_ARGS__), -1)

int agent_parse_server_url(const char *url, char **host, int *port, char **path, bool *tls,
                           char *err, size_t errlen)
{
    *host = NULL;
    *path = NULL;
    if (!url || !*url)
        return ERR("empty URL");
    const char *p;
    if (strncmp(url, "ws://", 5) == 0) {
        *tls = false;
        p = url + 5;
    } else if (strncmp(url, "wss://", 6) == 0) {
        *tls = true;
        p = url + 6;
    } else {
        return ERR("'%s' does not start with ws:// or wss://", url);
    }
    const char *slash = strchr(p, '/');
    const char *end = slash ? slash : p + strlen(p);
    const char *hs = p, *he;
    const char *colon;
    if (*p == '[') { /* [v6]:port */
        const char *rb = memchr(p, ']', (size_t)(end - p));
        if (!rb)
            return ERR("'%s': unterminated [ in the host", url);
        hs = p + 1;
        he = rb;
        colon = (rb + 1 < end && rb[1] == ':') ? rb + 1 : NULL;
        if (rb + 1 < end && !colon)
            return ERR("'%s': junk after ]", url);
    } else {
        colon = memchr(p, ':', (size_t)(end - p));
        he = colon ? colon : end;
    }
    if (he == hs)
        return ERR("'%s' has no host", url);
    int64_t portv = *tls ? 443 : 80;
    if (colon) {
        char buf[16];
        size_t n = (size_t)(end - colon - 1);
        if (n == 0 || n >= sizeof(buf))
            return ERR("'%s': bad port", url);
        memcpy(buf, colon + 1, n);
        buf[n] = '\0';
        if (util_parse_int64(buf, 1, 65535, &portv) != 0)
            return ERR("'%s': port '%s' is not in 1-65535", url, buf);
    }
    *host = strndup(hs, (size_t)(he - hs));
    *path = strdup(slash && strcmp(slash, "/") != 0 ? slash : "/agent");
    if (!*host || !*path) {
        UTIL_FREE(*host);
        UTIL_FREE(*path);
        return ERR("out of memory");
    }
    *port = (int)portv;
    return 0;
}

void agent_server_urls_free(struct agent_server_url *urls, size_t n)
{
    for (size_t i = 0; urls && i < n; i++) {
        free(urls[i].url);
        free(urls[i].host);
        free(urls[i].path);
    }
    free(urls);
}

/* Parses one trimmed entry of the list into urls[*n]. 0 or -1 with err set. */
static int server_list_entry(const char *start, size_t len, struct agent_server_url *urls,
                             size_t *n, bool *tls, char *err, size_t errlen)
{
    while (len > 0 && (*start == ' ' || *start == '\t'))
        start++, len--;
    while (len > 0 && (start[len - 1] == ' ' || start[len - 1] == '\t'))
        len--;
    char *url = strndup(start, len);
    if (url == NULL)
        return ERR("out of memory");
    struct agent_server_url *u = &urls[*n];
    bool this_tls = false;
    if (agent_parse_server_url(url, &u->host, &u->port, &u->path, &this_tls, err, errlen) != 0) {
        free(url);
        return -1;
    }
    u->url = url;
    (*n)++;
    if (*n > 1 && this_tls != *tls)
        return ERR("'%s': every server of the list must use the same scheme (ws:// or wss://)",
                   url);
    *tls = this_tls;
    for (size_t i = 0; i + 1 < *n; i++)
        if (strcmp(urls[i].host, u->host) == 0 && urls[i].port == u->port &&
            strcmp(urls[i].path, u->path) == 0)
            return ERR("'%s' is listed twice", url);
    return 0;
}

int agent_parse_server_list(const char *list, struct agent_server_url **out, size_t *n, bool *tls,
                            char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (!list || !*list)
        return ERR("empty URL");
    size_t cap = 1;
    for (const char *p = list; *p; p++)
        cap += *p == ',';
    struct agent_server_url *urls = calloc(cap, sizeof(*urls));
    if (urls == NULL)
        return ERR("out of memory");
    size_t count = 0;
    const char *start = list;
    for (;;) {
        const char *comma = strchr(start, ',');
        size_t len = comma ? (size_t)(comma - start) : strlen(start);
        if (server_list_entry(start, len, urls, &count, tls, err, errlen) != 0) {
            agent_server_urls_free(urls, count);
            return -1;
        }
        if (comma == NULL)
            break;
        start = comma + 1;
    }
    *out = urls;
    *n = count;
    return 0;
}

static int hex_value(char c)
{
    if (c >= '0' && c <= '9')
        return c - '0';
    c = (char)tolower((unsigned char)c);
    return c >= 'a' && c <= 'f' ? c - 'a' + 10 : -1;
}

int agent_parse_fingerprint(const char *text, unsigned char out[32], char *err, size_t errlen)
{
    if (!text)
        return ERR("empty fingerprint");
    const char *p;
    if (strncasecmp(text, "sha256:", 7) == 0)
        p = text + 7;
    else if (strncasecmp(text, "sha256 fingerprint=", 19) == 0)
        p = text + 19;
    else
        return ERR("'%s' does not start with sha256:", text);
    size_t n = 0;
    while (*p) {
        if (*p == ':' && n > 0 && p[1] != '\0') {
            p++;
            continue;
        }
        int hi = hex_value(p[0]);
        int lo = hi < 0 ? -1 : hex_value(p[1]);
        if (hi < 0 || lo < 0)
            return ERR("'%s' is not hexadecimal", text);
        if (n == 32)
            return ERR("'%s' is longer than a SHA-256 digest (64 hex digits)", text);
        out[n++] = (unsigned char)(hi * 16 + lo);
        p += 2;
    }
    if (n != 32)
        return ERR("'%s' is shorter than a SHA-256 digest (64 hex digits)", text);
    return 0;
}

int agent_parse_port_range(const char *s, int *lo, int *hi, char *err, size_t errlen)
{
    if (!s)
        return ERR("missing");
    const char *dash = strchr(s, '-');
    if (!dash)
        return ERR("'%s' is not LO-HI", s);
    char a[16], b[16];
    size_t na = (size_t)(dash - s), nb = strlen(dash + 1);
    if (na == 0 || na >= sizeof(a) || nb == 0 || nb >= sizeof(b))
        return ERR("'%s' is not LO-HI", s);
    memcpy(a, s, na);
    a[na] = '\0';
    memcpy(b, dash + 1, nb + 1);
    int64_t l, h;
    if (!isdigit((unsigned char)a[0]) || !isdigit((unsigned char)b[0]) ||
        util_parse_int64(a, 1, 65535, &l) != 0 || util_parse_int64(b, 1, 65535, &h) != 0)
        return ERR("'%s': ports must be integers in 1-65535", s);
    if (l > h)
        return ERR("'%s': the low port is above the high port", s);
    *lo = (int)l;
    *hi = (int)h;
    return 0;
}

static int cmp_int(const void *x, const void *y)
{
    int a = *(const int *)x, b = *(const int *)y;
    return (a > b) - (a < b);
}

int agent_parse_gpu_list(const char *s, int **out, size_t *n, char *err, size_t errlen)
{
    *out = NULL;
    *n = 0;
    if (!s || !*s || strcmp(s, "none") == 0)
        return 0;
    size_t cap = 1;
    for (const char *p = s; *p; p++)
        cap += *p == ',';
    if (cap > APROTO_MAX_GPUS)
        return ERR("more than %d GPUs", APROTO_MAX_GPUS);
    int *v = calloc(cap, sizeof(*v));
    if (!v)
        return ERR("out of memory");
    size_t k = 0;
    const char *p = s;
    for (;;) {
        const char *comma = strchr(p, ',');
        size_t len = comma ? (size_t)(comma - p) : strlen(p);
        char buf[16];
        while (len > 0 && *p == ' ') {
            p++;
            len--;
        }
        while (len > 0 && p[len - 1] == ' ')
            len--;
        int64_t idx;
        if (len == 0 || len >= sizeof(buf)) {
            free(v);
            return ERR("'%s': empty or overlong GPU index", s);
        }
        memcpy(buf, p, len);
        buf[len] = '\0';
        if (util_parse_int64(buf, 0, APROTO_MAX_GPUS - 1, &idx) != 0) {
            free(v);
            return ERR("'%s': GPU index '%s' is not an integer in 0-%d", s, buf,
                       APROTO_MAX_GPUS - 1);
        }
        v[k++] = (int)idx;
        if (!comma)
            break;
        p = comma + 1;
    }
    qsort(v, k, sizeof(*v), cmp_int);
    for (size_t i = 1; i < k; i++) {
        if (v[i] == v[i - 1]) {
            int dup = v[i];
            free(v);
            return ERR("'%s': GPU %d listed twice", s, dup);
        }
    }
    *out = v;
    *n = k;
    return 0;
}

/* Parses s as a JSON object without duplicate keys into *o (new reference). 0 or -1 with err. */
static int load_object(const char *s, json_t **o, char *err, size_t errlen)
{
    json_error_t je;
    *o = json_loads(s, JSON_REJECT_DUPLICATES, &je);
    if (!*o)
        return ERR("invalid JSON: %s", je.text);
    if (!json_is_object(*o)) {
        json_decref(*o);
        *o = NULL;
        return ERR("not a JSON object");
    }
    return 0;
}

int agent_parse_labels(const char *s, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    json_t *o = NULL;
    if (s && s[0] == '{') {
        if (load_object(s, &o, err, errlen) != 0)
            return -1;
        const char *k;
        json_t *v;
        json_object_foreach(o, k, v)
        {
            if (!*k || !json_is_string(v)) {
                snprintf(err, errlen, "label '%s' must have a non-empty name and a string value",
                         k);
                json_decref(o);
                return -1;
            }
        }
        *out = o;
        return 0;
    }
    o = json_object();
    if (!o)
        return ERR("out of memory");
    if (!s || !*s) {
        *out = o;
        return 0;
    }
    char *copy = strdup(s);
    if (!copy) {
        json_decref(o);
        return ERR("out of memory");
    }
    char *save = NULL;
    for (char *item = strtok_r(copy, ",", &save); item; item = strtok_r(NULL, ",", &save)) {
        char *eq = strchr(item, '=');
        if (!eq || eq == item) {
            snprintf(err, errlen, "'%s' is not name=value", item);
            free(copy);
            json_decref(o);
            return -1;
        }
        *eq = '\0';
        json_object_set_new(o, item, json_string(eq + 1));
    }
    free(copy);
    *out = o;
    return 0;
}

int agent_parse_resources(const char *s, json_t **out, char *err, size_t errlen)
{
    *out = NULL;
    if (!s || !*s) {
        *out = json_object();
        return *out ? 0 : ERR("out of memory");
    }
    json_t *o;
    if (load_object(s, &o, err, errlen) != 0)
        return -1;
    const char *k;
    json_t *v;
    json_object_foreach(o, k, v)
    {
        if (!*k || strcmp(k, "CPU") == 0 || strcmp(k, "GPU") == 0 || strcmp(k, "memory_mb") == 0) {
            snprintf(err, errlen,
                     "'%s' is not a custom resource name (use --cpus, --gpus, "
                     "--memory-mb)",
                     k);
            json_decref(o);
            return -1;
        }
        if (!json_is_number(v) || json_number_value(v) < 0) {
            snprintf(err, errlen, "resource '%s' must be a non-negative number", k);
            json_decref(o);
            return -1;
        }
    }
    *out = o;
    return 0;
}

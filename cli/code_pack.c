/*
 * code_pack.c - packing and uploading a working directory (code_pack.h).
 */
#include "code_pack.h"

#include "api.h"
#include "strbuf.h"
#include "util.h"

#include <errno.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

extern char **environ;

/* Bytes per PUT: under the server's default --max-body-bytes (1 MiB). */
#define CODE_CHUNK ((size_t)512 << 10)

/* At most this many patterns are read from DIR's top-level ignore files. */
#define CODE_MAX_PATTERNS 256

/*
 * Appends "--exclude=PATTERN" to argv (at *n, below max) for each pattern of DIR/name: blank
 * lines, comments and negations ('!') are skipped, a trailing '/' and a leading '/' dropped (tar
 * matches the rest at any depth). The strings are malloc'd: the caller frees argv[first..*n).
 */
static void add_ignore_file(const char *dir, const char *name, char **argv, size_t *n, size_t max)
{
    char path[4200];
    snprintf(path, sizeof path, "%s/%s", dir, name);
    FILE *f = fopen(path, "r");
    if (f == NULL)
        return;
    char line[1024];
    while (*n < max && fgets(line, sizeof line, f)) {
        size_t len = strcspn(line, "\r\n");
        line[len] = '\0';
        while (len > 0 && line[len - 1] == '/')
            line[--len] = '\0';
        const char *p = line;
        while (*p == '/')
            p++;
        if (*p == '\0' || *p == '#' || *p == '!')
            continue;
        size_t sz = strlen(p) + sizeof "--exclude=";
        char *arg = malloc(sz);
        if (arg == NULL)
            break;
        snprintf(arg, sz, "--exclude=%s", p);
        argv[(*n)++] = arg;
    }
    fclose(f);
}

/*
 * Runs GNU tar over dir into the file `out`. Returns 0, or -1 after printing why.
 */
static int pack(const char *dir, const char *out)
{
    char file_arg[4200], dir_arg[4200];
    snprintf(file_arg, sizeof file_arg, "--file=%s", out);
    snprintf(dir_arg, sizeof dir_arg, "--directory=%s", dir);
    char *fixed[] = {"tar",
                     "--create",
                     "--use-compress-program=gzip -n",
                     file_arg,
                     dir_arg,
                     "--sort=name",
                     "--mtime=@0",
                     "--owner=0",
                     "--group=0",
                     "--numeric-owner",
                     "--exclude-vcs",
                     "--exclude-vcs-ignores",
                     "--exclude-ignore=.trainyardignore",
                     "--exclude=__pycache__"};
    size_t nfixed = sizeof fixed / sizeof fixed[0];
    char *argv[sizeof fixed / sizeof fixed[0] + 2 * CODE_MAX_PATTERNS + 2];
    memcpy(argv, fixed, sizeof fixed);
    size_t n = nfixed;
    add_ignore_file(dir, ".gitignore", argv, &n, nfixed + CODE_MAX_PATTERNS);
    add_ignore_file(dir, ".trainyardignore", argv, &n, nfixed + 2 * CODE_MAX_PATTERNS);
    argv[n] = ".";
    argv[n + 1] = NULL;
    pid_t pid;
    int err = posix_spawnp(&pid, "tar", NULL, NULL, argv, environ);
    for (size_t i = nfixed; i < n; i++)
        free(argv[i]);
    if (err != 0) {
        fprintf(stderr, "error: cannot run tar to pack %s: %s\n", dir, strerror(err));
        return -1;
    }
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    if (!WIFEXITED(st) || WEXITSTATUS(st) != 0) {
        fprintf(stderr, "error: tar could not pack %s (see its message above)\n", dir);
        return -1;
    }
    return 0;
}

/* Reads the package into *data (malloc'd). 0, or -1 after printing why (too large included). */
static int read_package(const char *dir, const char *path, long long max_bytes, char **data,
                        size_t *len)
{
    struct stat sb;
    if (stat(path, &sb) != 0) {
        fprintf(stderr, "error: cannot read the package of %s: %s\n", dir, strerror(errno));
        return -1;
    }
    if (sb.st_size > max_bytes) {
        fprintf(stderr,
                "error: --working-dir %s packs to %lld bytes, over the cap of %lld bytes "
                "(--max-package-mb); leave large files out with a .trainyardignore\n",
                dir, (long long)sb.st_size, max_bytes);
        return -1;
    }
    *data = util_read_file(path, len);
    if (*data == NULL) {
        fprintf(stderr, "error: cannot read the package of %s: %s\n", dir, strerror(errno));
        return -1;
    }
    return 0;
}

/* Asks the server about package sha256: *complete (stored and this user's: only a package's
 * uploaders may name it in a job), *offset (bytes it holds). An exit code. */
static int ask(struct cli_ctx *ctx, const char *sha256, bool *complete, long long *offset)
{
    char path[120];
    snprintf(path, sizeof path, "/api/v1/code/%s", sha256);
    json_t *o = NULL;
    int rc = api_json(ctx, "GET", path, NULL, 0, &o);
    if (rc != CLI_EXIT_OK)
        return rc;
    const char *state = json_string_value(json_object_get(o, "state"));
    json_t *owned = json_object_get(o, "owned");
    *complete = state && strcmp(state, "complete") == 0 && (owned == NULL || json_is_true(owned));
    *offset = json_integer_value(json_object_get(o, "offset"));
    json_decref(o);
    return CLI_EXIT_OK;
}

/* PUTs data[offset..] in chunks, then asks the server to verify it. An exit code. */
static int upload(struct cli_ctx *ctx, const char *sha256, const char *data, size_t len,
                  long long offset)
{
    char path[160], header[100], csha[65];
    int rc = CLI_EXIT_OK;
    if (offset < 0 || (size_t)offset > len)
        offset = 0;
    while (rc == CLI_EXIT_OK && (size_t)offset < len) {
        size_t n = len - (size_t)offset < CODE_CHUNK ? len - (size_t)offset : CODE_CHUNK;
        util_sha256_hex(data + offset, n, csha);
        snprintf(header, sizeof header, "X-Content-SHA256: %s", csha);
        snprintf(path, sizeof path, "/api/v1/code/%s?offset=%lld", sha256, offset);
        json_t *o = NULL;
        if (http_client_set_header(ctx->http, header) != 0)
            return CLI_EXIT_FAILED;
        rc = api_json(ctx, "PUT", path, data + offset, n, &o);
        http_client_set_header(ctx->http, NULL);
        if (rc == CLI_EXIT_OK) {
            long long got = json_integer_value(json_object_get(o, "offset"));
            const char *state = json_string_value(json_object_get(o, "state"));
            json_t *owned = json_object_get(o, "owned");
            if (state && strcmp(state, "complete") == 0 && (owned == NULL || json_is_true(owned))) {
                json_decref(o);
                return CLI_EXIT_OK;
            }
            offset = got > offset ? got : offset + (long long)n;
        }
        json_decref(o);
    }
    if (rc != CLI_EXIT_OK)
        return rc;
    snprintf(path, sizeof path, "/api/v1/code/%s/complete", sha256);
    json_t *o = NULL;
    rc = api_json(ctx, "POST", path, "{}", 2, &o);
    json_decref(o);
    return rc;
}

int code_pack_upload(struct cli_ctx *ctx, const char *dir, long long max_bytes, char sha256[65])
{
    struct stat sb;
    if (stat(dir, &sb) != 0 || !S_ISDIR(sb.st_mode))
        return cli_input_error("--working-dir %s is not a directory", dir);
    char tmpl[] = "/tmp/trainyard-pack-XXXXXX";
    int fd = mkstemp(tmpl);
    if (fd < 0)
        return cli_input_error("cannot create a temporary file: %s", strerror(errno));
    close(fd);
    char *data = NULL;
    size_t len = 0;
    int rc = pack(dir, tmpl) == 0 && read_package(dir, tmpl, max_bytes, &data, &len) == 0
                 ? CLI_EXIT_OK
                 : CLI_EXIT_USAGE;
    unlink(tmpl);
    if (rc != CLI_EXIT_OK)
        return rc;
    util_sha256_hex(data, len, sha256);
    bool complete = false;
    long long offset = 0;
    rc = ask(ctx, sha256, &complete, &offset);
    if (rc == CLI_EXIT_OK && !complete) {
        rc = upload(ctx, sha256, data, len, offset);
        if (rc == CLI_EXIT_OK)
            fprintf(stderr, "uploaded %s (%zu bytes) as code package %.12s\n", dir, len, sha256);
    } else if (rc == CLI_EXIT_OK) {
        fprintf(stderr, "code package %.12s: unchanged, already on the server\n", sha256);
    }
    free(data);
    return rc;
}

/*
 * cmd_checkpoints.c - a job's checkpoints, and downloading one (issue 11, docs/artifacts.md).
 */
#include "api.h"
#include "cli.h"
#include "output.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <spawn.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

int cmd_checkpoints(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    int rc;
    if ((rc = cli_parse_id(ctx, args->pos[0], "job id", &id)) != 0)
        return rc;
    char path[64];
    snprintf(path, sizeof path, "/api/v1/jobs/%ld/checkpoints", id);
    json_t *reply;
    const json_t *items;
    if ((rc = api_get_list(ctx, path, "checkpoints", &reply, &items)) != CLI_EXIT_OK)
        return rc;
    if (ctx->cfg.output == CLI_OUTPUT_JSON) {
        api_print_json(reply);
        json_decref(reply);
        return CLI_EXIT_OK;
    }
    static const char *const headers[] = {"ID",   "ATTEMPT", "INDEX",   "STEP",
                                          "SIZE", "STORED",  "METRICS", "TIME"};
    struct out_table t;
    size_t i;
    json_t *c;
    table_init(&t, headers, sizeof headers / sizeof headers[0]);
    json_array_foreach(items, i, c)
    {
        table_cell_json(&t, json_object_get(c, "id"));
        table_cell_json(&t, json_object_get(c, "attempt"));
        table_cell_json(&t, json_object_get(c, "index"));
        table_cell_json(&t, json_object_get(c, "step"));
        table_cell_json(&t, json_object_get(c, "size_bytes"));
        const char *st =
            json_string_value(json_object_get(json_object_get(c, "artifact"), "state"));
        table_cell(&t, st ? st : "-");
        table_cell_json(&t, json_object_get(c, "metrics"));
        table_cell_time(&t, json_object_get(c, "created_at"));
    }
    table_print(&t, stdout);
    table_free(&t);
    json_decref(reply);
    return CLI_EXIT_OK;
}

/* Runs tar -xf tarfile -C dir. 0 or -1. */
static int untar(const char *tarfile, const char *dir)
{
    char *argv[] = {"tar", "-xf", (char *)tarfile, "-C", (char *)dir, NULL};
    extern char **environ;
    pid_t pid;
    if (posix_spawnp(&pid, "tar", NULL, NULL, argv, environ) != 0)
        return -1;
    int st = 0;
    while (waitpid(pid, &st, 0) < 0 && errno == EINTR)
        ;
    return WIFEXITED(st) && WEXITSTATUS(st) == 0 ? 0 : -1;
}

/* Times a cut download is resumed (each resume must have made progress). */
#define DOWNLOAD_RESUMES 5

/*
 * Downloads checkpoint id's archive into the open file fd, resuming with Range after a cut
 * transfer that made progress. Returns CLI_EXIT_OK or the exit code (reported on stderr).
 */
static int download_archive(struct cli_ctx *ctx, long id, int fd)
{
    char path[80], err[HTTP_ERROR_MAX];
    snprintf(path, sizeof path, "/api/v1/checkpoints/%ld/archive", id);
    long long written = 0;
    for (int resumes = 0;; resumes++) {
        long long before = written;
        struct http_response resp;
        if (http_download(ctx->http, path, fd, &written, &resp, err, sizeof err) != 0) {
            if (written > before && resumes < DOWNLOAD_RESUMES) {
                fprintf(stderr, "warning: download cut at %lld bytes (%s); resuming\n", written,
                        err);
                continue;
            }
            fprintf(stderr, "error: downloading checkpoint %ld from %s: %s\n", id,
                    http_client_base(ctx->http), err);
            return CLI_EXIT_UNREACHABLE;
        }
        long status = resp.status;
        if (status < 200 || status >= 300) {
            if (status >= 400)
                out_problem(&resp);
            else
                out_odd_reply(&resp, "not a success");
        }
        http_response_free(&resp);
        return status >= 200 && status < 300 ? CLI_EXIT_OK : CLI_EXIT_FAILED;
    }
}

int cmd_checkpoint_download(struct cli_ctx *ctx, const struct cli_args *args)
{
    long id;
    int rc;
    if ((rc = cli_parse_id(ctx, args->pos[0], "checkpoint id", &id)) != 0)
        return rc;
    const char *dir = args->pos[1];
    if (mkdir(dir, 0700) != 0 && errno != EEXIST)
        return cli_input_error("cannot create %s: %s", dir, strerror(errno));
    char tarfile[PATH_MAX];
    snprintf(tarfile, sizeof tarfile, "%s/.trainyard-checkpoint-%ld.tar.XXXXXX", dir, id);
    int fd = mkstemp(tarfile);
    if (fd < 0)
        return cli_input_error("cannot write into %s: %s", dir, strerror(errno));
    rc = download_archive(ctx, id, fd);
    bool closed = close(fd) == 0;
    if (rc == CLI_EXIT_OK && !(closed && untar(tarfile, dir) == 0))
        rc = cli_input_error("cannot unpack checkpoint %ld into %s", id, dir);
    unlink(tarfile);
    if (rc == CLI_EXIT_OK)
        printf("%s\n", dir);
    return rc;
}

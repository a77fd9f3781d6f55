/*
 * main.c - trainyard, the command line client: parse the line, resolve the configuration, run
 * the command, clean up. Commands live in cmd_*.c, the command table in commands.c.
 */
#include "cli.h"
#include "commands.h"
#include "http.h"

#include <curl/curl.h>
#include <stdio.h>
#include <string.h>

#ifndef TY_VERSION
#define TY_VERSION "0.0.0"
#endif

/* Prints help for whatever the line named; exit status 0. */
static int print_help(const struct cli_args *args)
{
    if (args->cmd)
        commands_print_command(stdout, args->cmd);
    else if (args->group)
        commands_print_group(stdout, args->group);
    else
        commands_print_overview(stdout);
    return CLI_EXIT_OK;
}

int main(int argc, char **argv)
{
    struct cli_args args;
    char err[512];

    if (argc < 2) {
        commands_print_overview(stderr);
        return CLI_EXIT_USAGE;
    }
    int parsed = args_parse(argc, argv, &args, err, sizeof err);
    if (args.help)
        return print_help(&args);
    if (args.version) {
        printf("trainyard %s\n", TY_VERSION);
        return CLI_EXIT_OK;
    }
    struct cli_ctx ctx = {.cmd = args.cmd};
    if (parsed != 0) {
        if (!args.cmd && args.group)
            fprintf(stderr, "error: %s\nRun 'trainyard %s --help' for usage.\n", err, args.group);
        else
            cli_usage_error(&ctx, "%s", err);
        return CLI_EXIT_USAGE;
    }
    if (config_resolve(&ctx.cfg, args.global, err, sizeof err) != 0) {
        config_free(&ctx.cfg);
        return cli_usage_error(NULL, "%s", err);
    }

    int rc;
    if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) {
        fputs("error: cannot initialise libcurl\n", stderr);
        config_free(&ctx.cfg);
        return CLI_EXIT_UNREACHABLE;
    }
    ctx.http = http_client_create(ctx.cfg.server, ctx.cfg.token, ctx.cfg.connect_timeout_s,
                                  ctx.cfg.request_timeout_s, err, sizeof err);
    if (ctx.http && http_client_set_ca_file(ctx.http, ctx.cfg.ca_file) != 0) {
        http_client_free(ctx.http);
        ctx.http = NULL;
        snprintf(err, sizeof err, "out of memory");
    }
    if (!ctx.http) {
        fprintf(stderr, "error: %s\n", err);
        rc = CLI_EXIT_UNREACHABLE;
    } else {
        rc = args.cmd->run(&ctx, &args);
    }
    http_client_free(ctx.http);
    curl_global_cleanup();
    config_free(&ctx.cfg);
    if (fflush(stdout) != 0 && rc == CLI_EXIT_OK) {
        perror("error: writing output");
        rc = CLI_EXIT_FAILED;
    }
    return rc;
}

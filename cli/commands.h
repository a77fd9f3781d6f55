/*
 * commands.h - the command table (commands.c) and the help printed from it. Adding a command is
 * one row in that table plus its handler.
 */
#ifndef TY_CLI_COMMANDS_H
#define TY_CLI_COMMANDS_H

#include "args.h"

#include <stdbool.h>
#include <stdio.h>

/* The command `name` in `group` (NULL for top level), or NULL. */
const struct cli_command *commands_find(const char *group, const char *name);

/* Whether `name` is a group of subcommands ("token"). */
bool commands_is_group(const char *name);

/* Prints the overview: usage, every command, global options, exit codes. */
void commands_print_overview(FILE *f);

/* Prints the help of a group: its subcommands. */
void commands_print_group(FILE *f, const char *group);

/* Prints the help of one command: usage, description, flags, global options. */
void commands_print_command(FILE *f, const struct cli_command *cmd);

#endif

/*
 * code_pack.h - `submit --working-dir DIR`: pack a directory into a tar.gz that hashes the same
 * whenever its files do, and upload it to the server's artifact store unless it is already
 * there (issue 15, docs/python-api.md).
 */
#ifndef TY_CLI_CODE_PACK_H
#define TY_CLI_CODE_PACK_H

#include "cli.h"

/* Default size cap of a packed working directory (--max-package-mb). */
#define CODE_PACK_DEFAULT_MAX_MB 100

/*
 * Packs `dir` (GNU tar: sorted names, zero mtimes and owners, no VCS directories, the patterns
 * of .gitignore files and of .trainyardignore files left out, __pycache__ too), refuses a
 * package over max_bytes with a message naming the size and the cap, and uploads it when the
 * server does not hold it complete yet (resuming at the server's offset). On success writes its
 * SHA-256 into sha256 and returns CLI_EXIT_OK; otherwise prints why and returns an exit code.
 */
int code_pack_upload(struct cli_ctx *ctx, const char *dir, long long max_bytes, char sha256[65]);

#endif

/* Checkpoints on shared storage (run_config.storage_path, issue 11, docs/artifacts.md): a
 * directory every node and the server mount. The agents copy each node's merged checkpoint
 * directory to
 *     <storage_path>/job-<job>/attempt-<attempt>/checkpoint-<index>/node-<node>/
 * and register it; the server verifies it by its manifest (dir_manifest.h), records the part
 * with that directory as its location, packs it for downloads and removes it for retention.
 * Trust boundary: a job names storage_path, so the server only accepts paths under the prefixes
 * of --storage-path-allow (none: storage_path refused), and reaches a part's directory from the
 * allowed prefix one component at a time without following a symbolic link (shared_open_dir),
 * then reads or deletes through the descriptor it got: the job's workers own the layout's
 * directories and could otherwise swap one for a link between a check of the path and its use. */
#ifndef SRV_SHARED_H
#define SRV_SHARED_H

#include <stddef.h>
#include <stdint.h>

/* Whether `path` may be a job's storage_path under `allow` (--storage-path-allow: absolute
 * prefixes separated by ':'; NULL or "" allows none): absolute, normalised (no empty, "." or
 * ".." component, no trailing '/'), and equal to or under one prefix. 0, or -1 with the reason
 * in detail (for a 400 naming run_config.storage_path). */
int shared_path_check(const char *allow, const char *path, char *detail, size_t len);

/* out = the directory of node `node`'s part of checkpoint (job, attempt, index) under
 * storage_path `sp` (the layout above). 0, or -1 when it does not fit in len. */
int shared_part_dir(const char *sp, int64_t job, int64_t attempt, int64_t index, const char *node,
                    char *out, size_t len);

/* Opens existing directory `path` under a prefix of `allow` (as written, or its real path): the
 * prefix is opened as is (the administrator's, links resolved), every component below it with
 * O_NOFOLLOW from the previous one. An O_DIRECTORY descriptor (the caller closes it), or -1: not
 * under a prefix, missing, not a directory, or a symbolic link below the prefix. */
int shared_open_dir(const char *allow, const char *path);

/* Packs directory `dir` (names relative to it, sorted) as a tar into an unlinked temporary file:
 * its descriptor at offset 0, or -1 (not allowed, missing, tar failed). */
int shared_open_tar(const char *allow, const char *dir);

/* Removes directory `dir` and what it holds (never following a link), then its parents up to the
 * job's directory when they are left empty. 0 (also when already gone), or -1. */
int shared_remove(const char *allow, const char *dir);

#endif

/* The manifest of a checkpoint directory on shared storage (run_config.storage_path, issue 11):
 * what an agent wrote there and what the server finds there are compared by this one digest.
 * The manifest is one line per entry, sorted by name (bytewise):
 *   f <sha256 of the content> <size> <name>\n   a regular file
 *   l <target> <name>\n                          a symbolic link (never followed)
 * names relative to the directory; subdirectories appear only through their entries. Its
 * SHA-256 is the part's sha256. Any other kind of entry (device, socket, fifo) is an error. */
#ifndef TY_DIR_MANIFEST_H
#define TY_DIR_MANIFEST_H

#include <stdint.h>

/* Walks `dir` without following links: sha = the manifest's SHA-256 (hex), *bytes = the sum of
 * the regular files' sizes, *files = their number. 0, or -1 (unreadable, an entry of another
 * kind, out of memory; errno set where a call failed). */
int dir_manifest(const char *dir, char sha[65], int64_t *bytes, int64_t *files);

#endif

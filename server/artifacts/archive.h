/* One tar stream out of a checkpoint's parts (each a tar of one node's merged directory): every
 * part's members in order, each part's end-of-archive blocks left out, one end at the end. Read
 * at any offset, so GET .../archive can serve Range requests. */
#ifndef SRV_ARCHIVE_H
#define SRV_ARCHIVE_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct artifact_store;
struct artifact_archive;

/* Where the members of the tar open on `fd` end (the offset of its end-of-archive block, or of
 * the end of the file when it has none), from its headers alone. 0, or -1 for a malformed tar or
 * a read error. */
int artifact_tar_data_len(int fd, int64_t *len);

/* Opens the n objects `locations` of `st` as one archive: NULL when one is missing or not a tar.
 * *total = the archive's size. Free with artifact_archive_free. */
struct artifact_archive *artifact_archive_open(struct artifact_store *st,
                                               const char *const *locations, size_t n,
                                               int64_t *total);
/* Copies up to max bytes of the archive from `pos` into buf: the count (0 at the end), or -1. */
ssize_t artifact_archive_read(struct artifact_archive *ar, int64_t pos, char *buf, size_t max);
void artifact_archive_free(struct artifact_archive *ar);

#endif

/* The artifact store: where checkpoint parts live on the server (issue 11). One interface, one
 * backend today (content-addressed files under --artifact-dir, artifact_local.c); an
 * S3-compatible backend would be a second `struct artifact_backend` (docs/decisions.md).
 *
 * An upload is staged under a key the caller chooses ([A-Za-z0-9._-], at most 200 bytes), grown
 * by appends at its current end only (so a resumed upload asks for the staged size first), and
 * committed under its SHA-256: the backend hashes what it holds and refuses a mismatch. Committed
 * objects are addressed by a location string the backend returns. Thread-safe: concurrent calls
 * on one key are serialised by the backend. */
#ifndef SRV_ARTIFACT_H
#define SRV_ARTIFACT_H

#include <stddef.h>
#include <stdint.h>

#define ARTIFACT_LOCATION_MAX 256

/* Error codes (negative returns). */
enum {
    ARTIFACT_EIO = -1,       /* the backend failed (disk full, permissions): retry later */
    ARTIFACT_EOFFSET = -2,   /* an append not at the staged end */
    ARTIFACT_ECORRUPT = -3,  /* the staged bytes do not hash to the SHA-256 given: discarded */
    ARTIFACT_ENOTFOUND = -4, /* no such staged upload or object */
    ARTIFACT_EINVAL = -5,    /* a malformed key, hash or location */
    ARTIFACT_EBUSY = -6      /* another request is writing this upload: retry shortly */
};

/* One append in progress (append_begin .. append_end), owned by the backend. */
struct artifact_append;

struct artifact_backend {
    const char *name;
    /* *size = bytes staged under `key` (0 when none). */
    int (*staged_size)(void *be, const char *key, int64_t *size);
    /* Appends bytes at `offset` as they arrive: begin (offset must equal the staged size:
     * ARTIFACT_EOFFSET and *size = the staged size otherwise), data any number of times, then
     * end, exactly once after a successful begin. end with keep != 0 makes the bytes part of the
     * staging (*size = the new staged size); keep == 0 drops them all, leaving the staging as
     * it was before begin (a chunk that failed its checksum, a request cut mid-body). The
     * staging is locked from begin to end: a second begin, staged_size or commit on the key
     * meanwhile gets ARTIFACT_EBUSY rather than waiting, since both may be served by one
     * thread. Not synced: durable across a server restart, and on the disk once committed. */
    int (*append_begin)(void *be, const char *key, int64_t offset, struct artifact_append **ap,
                        int64_t *size);
    int (*append_data)(struct artifact_append *ap, const void *data, size_t len);
    int (*append_end)(struct artifact_append *ap, int keep, int64_t *size);
    /* Hashes the staged bytes (the local backend keeps the hash running across appends): equal to
     * `sha256` (hex), they become the object `location` (written, NUL-terminated,
     * ARTIFACT_LOCATION_MAX bytes) and the staging is gone (synced to disk first); otherwise the
     * staging is discarded and ARTIFACT_ECORRUPT returned. *size = the object's size. */
    int (*commit)(void *be, const char *key, const char *sha256, char *location, int64_t *size);
    /* Opens object `location` for reading: a file descriptor (the caller closes it) or an error. */
    int (*open_read)(void *be, const char *location);
    /* Removes object `location` (absent: 0). */
    int (*remove)(void *be, const char *location);
    /* Removes every staged upload last written more than `older_than_s` seconds ago (abandoned:
     * a client that resumes later starts again from offset 0); one being written is left alone.
     * *removed = how many went. 0 or an error. */
    int (*gc_staged)(void *be, int64_t older_than_s, int64_t *removed);
    void (*destroy)(void *be);
};

struct artifact_store {
    const struct artifact_backend *ops;
    void *be;
    /* --storage-path-allow (borrowed; NULL: none): parts whose location is an absolute path are
     * directories on shared storage (shared.h), read and removed outside the backend. */
    const char *shared_allow;
};

/* A store of content-addressed files under `dir` (created 0700): objects in
 * dir/sha256/<2 hex>/<64 hex>, staged uploads in dir/uploads/<key>. NULL on failure (logged). */
struct artifact_store *artifact_store_open_local(const char *dir);
/* Frees the store (NULL is fine). */
void artifact_store_close(struct artifact_store *st);

/* Appends len bytes at `offset` in one call (append_begin, append_data, append_end). */
int artifact_append(struct artifact_store *st, const char *key, int64_t offset, const void *data,
                    size_t len, int64_t *size);

/* Whether `key` is a valid staging key. */
int artifact_key_valid(const char *key);
/* Whether `hex` is 64 lowercase hex digits. */
int artifact_sha256_valid(const char *hex);
/* A short text for an error code. */
const char *artifact_strerror(int code);

#endif

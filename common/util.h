/* Small helpers shared by every Trainyard program: checked number parsing, hashing, files. Names
 * carry the util_ prefix; ty_ belongs to the SDK (trainyard.h). */
#ifndef COMMON_UTIL_H
#define COMMON_UTIL_H

#include <stddef.h>
#include <stdint.h>
#include <time.h>

/* Parses the whole of `s` as a base-10 integer within [min, max]. Returns 0, or -1 when `s` is
 * empty, has trailing characters, or is out of range. */
int util_parse_int64(const char *s, int64_t min, int64_t max, int64_t *out);
int util_parse_double(const char *s, double min, double max, double *out);

/* Writes the lowercase hex SHA-256 of `data` into `hex` (65 bytes with the terminator). */
void util_sha256_hex(const void *data, size_t len, char hex[65]);

/* Extends the CRC32C (Castagnoli, as iSCSI and ext4 use it) `crc` of earlier bytes with `data`;
 * start from 0. util_crc32c(0, "123456789", 9) == 0xe3069283. Uses the SSE4.2 instruction where
 * the CPU has it (about 4x faster than SHA-256 with SHA-NI), a table otherwise. A cheap check
 * against corruption in transit, not against tampering. */
uint32_t util_crc32c(uint32_t crc, const void *data, size_t len);

/* Fills `buf` with `len` cryptographically random bytes. Returns 0 or -1. */
int util_random_bytes(void *buf, size_t len);

/* Reads a whole file into a NUL-terminated malloc'd buffer (caller frees). Returns NULL and sets
 * errno on failure. `len_out` may be NULL. */
char *util_read_file(const char *path, size_t *len_out);

/* Creates `path` and its parents with `mode` (like mkdir -p). Returns 0 or -1 with errno. */
int util_mkdir_p(const char *path, unsigned mode);

/* Writes all `len` bytes to fd, retrying short writes and EINTR. Returns 0 or -1 with errno. */
int util_write_all(int fd, const void *buf, size_t len);

/* fsync()s a directory, so that the entries created or renamed in it are durable. 0 or -1. */
int util_fsync_dir(const char *dir);

/* Replaces `path` durably with `len` bytes of `data` (file mode `mode`): written to a temporary
 * file beside it, synced, renamed over `path`, and the directory synced. A crash leaves the old
 * file or the new one, never a torn one. Returns 0, or -1 with errno (the temporary removed). */
int util_write_file_durable(const char *path, const void *data, size_t len, unsigned mode);

/* Whether user `uid` (group `gid`, no other groups) can search every directory from / down to
 * `dir` (absolute), checked in a forked child that takes that identity (needs root). Returns 1,
 * 0 with the first directory it cannot search in `blocked`, or -1 when the check itself failed. */
int util_uid_can_reach(unsigned uid, unsigned gid, const char *dir, char *blocked,
                       size_t blocked_len);

/* The start time of process `pid` (/proc/PID/stat field 22, clock ticks since boot): with the pid,
 * it names one process for good, as pids are reused. 0, or -1 when there is no such process or
 * it is a zombie. */
int util_proc_start_time(int pid, unsigned long long *start);

/* FNV-1a of the bytes of `s` (to its NUL) continued from `h` (start from UTIL_FNV1A_BASIS): the
 * hash of the in-memory tables (names, nodes, cache keys). Inline, as the clock below. */
#define UTIL_FNV1A_BASIS 14695981039346656037ull
static inline uint64_t util_fnv1a(uint64_t h, const char *s)
{
    for (const unsigned char *p = (const unsigned char *)s; *p; p++)
        h = (h ^ *p) * 1099511628211ull;
    return h;
}

/* The monotonic clock (CLOCK_MONOTONIC: never jumps with the wall clock), in milliseconds, in
 * nanoseconds (spin limits) and in seconds: the one clock for timeouts, deadlines and intervals
 * in every Trainyard program. Inline (no symbol), so that the static trainyard-supervisor and
 * libtrainyard read it without linking the rest of common. */
static inline int64_t util_mono_ms(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static inline int64_t util_mono_ns(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

static inline double util_mono_s(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

/* ts plus ms milliseconds (ms >= 0). */
static inline struct timespec util_timespec_add_ms(struct timespec ts, long ms)
{
    ts.tv_sec += ms / 1000;
    ts.tv_nsec += (ms % 1000) * 1000000L;
    if (ts.tv_nsec >= 1000000000L) {
        ts.tv_sec++;
        ts.tv_nsec -= 1000000000L;
    }
    return ts;
}

/* `clock`'s time ms milliseconds from now: the deadline of a pthread_cond_timedwait on a
 * condition variable with that clock (CLOCK_REALTIME for the default one). */
static inline struct timespec util_clock_in_ms(clockid_t clock, long ms)
{
    struct timespec now;
    clock_gettime(clock, &now);
    return util_timespec_add_ms(now, ms);
}

#define UTIL_FREE(p)                                                                               \
    do {                                                                                           \
        free(p);                                                                                   \
        (p) = NULL;                                                                                \
    } while (0)

#endif

/* Unpacking archives a job controls (issue 22): code packages, checkpoint packages
 * (resume_from_package) and checkpoint archives fetched from the server. Never `tar` as root:
 * libarchive in a child process that, for a job's package, takes the job's uid and gid before it
 * reads a byte, so nothing it writes can be more than what the job's own processes could write.
 *
 * What is unpacked: regular files, directories, and symbolic links whose target is relative and
 * has no ".." component (such a link, and any chain of them, resolves inside the tree: each one
 * only descends from its own directory). Everything else fails the unpacking with a message
 * naming the entry: devices, FIFOs, sockets, hard links (even inside the tree), links that are
 * absolute or climb with "..", names that are absolute or hold a ".." component. Modes are masked
 * to 0755 (no setuid, setgid or sticky bit, nothing writable by others); the owner may always read
 * and write. No owner, ACL, extended attribute or file flag is restored. libarchive's own guards
 * (ARCHIVE_EXTRACT_SECURE_*) are on as well: no write through a link, no absolute or ".." name.
 *
 * Caps (--unpack-max-bytes, --unpack-max-entries): a tar bomb stops at the cap, counted as the
 * bytes are written (a declared size over what is left stops it before). */
#include "agent.h"

#include "log.h"
#include "util.h"

#include <archive.h>
#include <archive_entry.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

/* "4 GiB", "512 MiB", "3 KiB" when exact, else "N bytes". */
static void human_bytes(int64_t n, char *buf, size_t len)
{
    static const char *const units[] = {"GiB", "MiB", "KiB"};
    for (int i = 0; i < 3; i++) {
        int64_t unit = INT64_C(1) << (10 * (3 - i));
        if (n >= unit && n % unit == 0) {
            snprintf(buf, len, "%lld %s", (long long)(n / unit), units[i]);
            return;
        }
    }
    snprintf(buf, len, "%lld bytes", (long long)n);
}

static int fail(char *err, size_t errlen, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

static int fail(char *err, size_t errlen, const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err, errlen, fmt, ap);
    va_end(ap);
    return -1;
}

/* Whether relative path `p` climbs: one of its components is "..". */
static bool climbs(const char *p)
{
    for (const char *c = p; *c;) {
        size_t n = strcspn(c, "/");
        if (n == 2 && c[0] == '.' && c[1] == '.')
            return true;
        c += n;
        c += strspn(c, "/");
    }
    return false;
}

/* What an entry of type `type` is, for messages. */
static const char *type_name(mode_t type)
{
    switch (type) {
    case AE_IFCHR:
        return "a character device";
    case AE_IFBLK:
        return "a block device";
    case AE_IFIFO:
        return "a FIFO";
    case AE_IFSOCK:
        return "a socket";
    default:
        return "of a type that is not unpacked";
    }
}

/* Checks one entry against the rules above and masks its mode. 1: unpack it, 0: skip it (the
 * tree's own "."), -1: refused (err says why). */
static int entry_check(const struct agent_unpack *u, struct archive_entry *e, char *err,
                       size_t errlen)
{
    const char *name = archive_entry_pathname(e);
    if (name == NULL || name[0] == '\0')
        return fail(err, errlen, "%s holds an entry without a name", u->what);
    if (name[0] == '/')
        return fail(err, errlen, "%s entry '%s' has an absolute name", u->what, name);
    if (climbs(name))
        return fail(err, errlen, "%s entry '%s' climbs out of the package with '..'", u->what,
                    name);
    const char *rest = name;
    while (rest[0] == '.' && (rest[1] == '/' || rest[1] == '\0'))
        rest += rest[1] ? 2 : 1;
    rest += strspn(rest, "/");
    if (archive_entry_hardlink(e) != NULL)
        return fail(err, errlen, "%s entry '%s' is a hard link: hard links are not unpacked",
                    u->what, name);
    mode_t type = archive_entry_filetype(e);
    mode_t perm = archive_entry_perm(e) & 0755;
    if (rest[0] == '\0' && type != AE_IFDIR)
        return fail(err, errlen, "%s entry '%s' names the package's top as a file", u->what, name);
    switch (type) {
    case AE_IFDIR:
        if (rest[0] == '\0')
            return 0; /* the package's top: the unpacking's own directory keeps its mode */
        archive_entry_set_perm(e, perm | 0700);
        break;
    case AE_IFREG:
        archive_entry_set_perm(e, perm | 0600);
        break;
    case AE_IFLNK: {
        const char *target = archive_entry_symlink(e);
        if (target == NULL || target[0] == '\0' || target[0] == '/' || climbs(target))
            return fail(err, errlen,
                        "%s entry '%s' is a symbolic link to '%s', outside the package: only "
                        "relative links without '..' are unpacked",
                        u->what, name, target ? target : "");
        break;
    }
    default:
        return fail(err, errlen,
                    "%s entry '%s' is %s: only regular files, directories and links inside the "
                    "package are unpacked",
                    u->what, name, type_name(type));
    }
    archive_entry_acl_clear(e);
    archive_entry_xattr_clear(e);
    archive_entry_set_fflags(e, 0, 0);
    return 1;
}

/* Whether a write of the unpacking failed for want of space (the child's; unpack.c's own). */
static bool no_space;

/* Notes a failed write of `out`: ENOSPC makes the child's exit say so. */
static const char *write_error(struct archive *out)
{
    if (archive_errno(out) == ENOSPC)
        no_space = true;
    return archive_errno(out) == ENOSPC ? strerror(ENOSPC) : archive_error_string(out);
}

/* Copies the data of the current entry, counting it into *bytes against the cap. */
static int entry_data(const struct agent_unpack *u, struct archive *in, struct archive *out,
                      const char *name, int64_t *bytes, char *err, size_t errlen)
{
    for (;;) {
        const void *buf;
        size_t size;
        la_int64_t off;
        int r = archive_read_data_block(in, &buf, &size, &off);
        if (r == ARCHIVE_EOF)
            return 0;
        if (r < ARCHIVE_WARN)
            return fail(err, errlen, "%s entry '%s' cannot be read: %s", u->what, name,
                        archive_error_string(in));
        *bytes += (int64_t)size;
        if (u->max_bytes > 0 && *bytes > u->max_bytes) {
            char cap[40];
            human_bytes(u->max_bytes, cap, sizeof(cap));
            return fail(err, errlen, "%s unpacks to more than %s%s%s%s", u->what, cap,
                        u->bytes_flag ? " (" : "", u->bytes_flag ? u->bytes_flag : "",
                        u->bytes_flag ? ")" : "");
        }
        if (archive_write_data_block(out, buf, size, off) < ARCHIVE_WARN)
            return fail(err, errlen, "%s entry '%s' cannot be written: %s", u->what, name,
                        write_error(out));
    }
}

/* The child's work, in its target directory (the working directory): reads archive `afd`. */
static int extract(const struct agent_unpack *u, int afd, char *err, size_t errlen)
{
    struct archive *in = archive_read_new();
    struct archive *out = archive_write_disk_new();
    if (in == NULL || out == NULL)
        return fail(err, errlen, "%s: out of memory", u->what);
    archive_read_support_filter_gzip(in);
    archive_read_support_filter_bzip2(in);
    archive_read_support_filter_xz(in);
    archive_read_support_format_tar(in);
    archive_write_disk_set_options(out, ARCHIVE_EXTRACT_SECURE_NODOTDOT |
                                            ARCHIVE_EXTRACT_SECURE_SYMLINKS |
                                            ARCHIVE_EXTRACT_SECURE_NOABSOLUTEPATHS |
                                            ARCHIVE_EXTRACT_PERM | ARCHIVE_EXTRACT_TIME);
    int rc = 0;
    if (archive_read_open_fd(in, afd, 65536) != ARCHIVE_OK)
        rc = fail(err, errlen, "%s is not an archive that can be unpacked: %s", u->what,
                  archive_error_string(in));
    int64_t entries = 0, bytes = 0;
    while (rc == 0) {
        struct archive_entry *e;
        int r = archive_read_next_header(in, &e);
        if (r == ARCHIVE_EOF)
            break;
        if (r < ARCHIVE_WARN) {
            rc = fail(err, errlen, "%s is not an archive that can be unpacked: %s", u->what,
                      archive_error_string(in));
            break;
        }
        if (u->max_entries > 0 && ++entries > u->max_entries) {
            rc = fail(err, errlen, "%s holds more than %lld entries%s%s%s", u->what,
                      (long long)u->max_entries, u->entries_flag ? " (" : "",
                      u->entries_flag ? u->entries_flag : "", u->entries_flag ? ")" : "");
            break;
        }
        int ok = entry_check(u, e, err, errlen);
        if (ok < 0) {
            rc = -1;
            break;
        }
        if (ok == 0)
            continue;
        const char *name = archive_entry_pathname(e);
        if (u->max_bytes > 0 && archive_entry_filetype(e) == AE_IFREG &&
            archive_entry_size(e) > u->max_bytes - bytes) {
            char cap[40];
            human_bytes(u->max_bytes, cap, sizeof(cap));
            rc = fail(err, errlen, "%s unpacks to more than %s%s%s%s", u->what, cap,
                      u->bytes_flag ? " (" : "", u->bytes_flag ? u->bytes_flag : "",
                      u->bytes_flag ? ")" : "");
            break;
        }
        if (archive_write_header(out, e) < ARCHIVE_WARN) {
            rc = fail(err, errlen, "%s entry '%s' cannot be unpacked: %s", u->what, name,
                      write_error(out));
            break;
        }
        if (archive_entry_filetype(e) == AE_IFREG)
            rc = entry_data(u, in, out, name, &bytes, err, errlen);
        if (rc == 0 && archive_write_finish_entry(out) < ARCHIVE_WARN)
            rc = fail(err, errlen, "%s entry '%s' cannot be unpacked: %s", u->what, name,
                      write_error(out));
    }
    if (archive_write_close(out) < ARCHIVE_WARN && rc == 0)
        rc = fail(err, errlen, "%s cannot be unpacked: %s", u->what, write_error(out));
    archive_write_free(out);
    archive_read_free(in);
    return rc;
}

/* Closes every descriptor from 3 up but the n (sorted, each >= 3) of keep. */
static void close_others(const int *keep, size_t n)
{
    unsigned int from = 3;
    for (size_t i = 0; i < n; i++) {
        if ((unsigned int)keep[i] > from)
            close_range(from, (unsigned int)keep[i] - 1, 0);
        from = (unsigned int)keep[i] + 1;
    }
    close_range(from, ~0U, 0);
}

static int cmp_int(const void *x, const void *y)
{
    return *(const int *)x - *(const int *)y;
}

/* The child: drops to the job's credentials, then unpacks. Never returns. */
static void child_main(const struct agent_unpack *u, int afd, int dirfd, int errfd)
{
    char err[512] = "";
    int keep[3] = {afd, dirfd, errfd};
    qsort(keep, 3, sizeof(keep[0]), cmp_int);
    close_others(keep, 3);
    sigset_t none;
    sigemptyset(&none);
    sigprocmask(SIG_SETMASK, &none, NULL);
    int rc = 0;
    if (u->uid != AGENT_NO_UID &&
        (setgroups(0, NULL) != 0 || setgid(u->gid) != 0 || setuid(u->uid) != 0 ||
         getuid() != u->uid || geteuid() != u->uid))
        rc = fail(err, sizeof(err), "%s: cannot take the job's uid %ld: %s", u->what, (long)u->uid,
                  strerror(errno));
    if (rc == 0 && fchdir(dirfd) != 0)
        rc = fail(err, sizeof(err), "%s: cannot enter its directory: %s", u->what, strerror(errno));
    close(dirfd);
    umask(022);
    if (rc == 0)
        rc = extract(u, afd, err, sizeof(err));
    if (rc != 0)
        util_write_all(errfd, err, strlen(err));
    _exit(rc == 0 ? 0 : no_space ? 2 : 1); /* 2: the file system is full (ENOSPC) */
}

int agent__unpack(const struct agent_unpack *u, char *err, size_t errlen)
{
    err[0] = '\0';
    int afd = open(u->archive, O_RDONLY | O_CLOEXEC | O_NOFOLLOW);
    if (afd < 0)
        return fail(err, errlen, "%s: cannot open the fetched archive: %s", u->what,
                    strerror(errno));
    int dirfd = open(u->dir, O_RDONLY | O_DIRECTORY | O_NOFOLLOW | O_CLOEXEC);
    if (dirfd < 0 || (u->uid != AGENT_NO_UID && fchown(dirfd, u->uid, u->gid) != 0)) {
        int e = errno;
        if (dirfd >= 0)
            close(dirfd);
        close(afd);
        return fail(err, errlen, "%s: cannot prepare its directory: %s", u->what, strerror(e));
    }
    int pfd[2];
    if (agent__iolib_load_archive() != 0) {
        close(dirfd);
        close(afd);
        return fail(err, errlen, "%s: cannot be unpacked: libarchive cannot be loaded", u->what);
    }
    if (pipe2(pfd, O_CLOEXEC) != 0) {
        close(dirfd);
        close(afd);
        return fail(err, errlen, "%s: cannot start the unpacking: %s", u->what, strerror(errno));
    }
    pid_t pid = fork();
    if (pid == 0) {
        close(pfd[0]);
        child_main(u, afd, dirfd, pfd[1]);
    }
    int fork_errno = errno;
    close(pfd[1]);
    close(dirfd);
    close(afd);
    if (pid < 0) {
        close(pfd[0]);
        return fail(err, errlen, "%s: cannot start the unpacking: %s", u->what,
                    strerror(fork_errno));
    }
    size_t got = 0;
    for (;;) {
        ssize_t n = read(pfd[0], err + got, errlen - 1 - got);
        if (n < 0 && errno == EINTR)
            continue;
        if (n <= 0)
            break;
        got += (size_t)n;
        if (got == errlen - 1)
            break;
    }
    err[got] = '\0';
    close(pfd[0]);
    int st = 0;
    while (waitpid(pid, &st, 0) < 0) {
        if (errno != EINTR) {
            st = -1;
            break;
        }
    }
    if (st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 0)
        return 0;
    bool full = st != -1 && WIFEXITED(st) && WEXITSTATUS(st) == 2;
    if (err[0] == '\0') {
        if (st != -1 && WIFSIGNALED(st))
            snprintf(err, errlen, "%s: the unpacking was killed by signal %d", u->what,
                     WTERMSIG(st));
        else
            snprintf(err, errlen, "%s cannot be unpacked", u->what);
    }
    errno = full ? ENOSPC : 0;
    return -1;
}

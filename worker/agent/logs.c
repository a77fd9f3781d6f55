/* Per-rank worker log files: <data>/logs/<job>/<attempt>/rank-<r>.log (stdout) and
 * rank-<r>.err.log (stderr). */
#include "agent.h"

#include "util.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

char *agent__log_path(const struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                      enum aproto_log_stream stream, bool create_dir)
{
    char dir[4096];
    int n = snprintf(dir, sizeof(dir), "%s/logs/%s/%lld", a->data_dir, job_id, (long long)attempt);
    if (n < 0 || (size_t)n >= sizeof(dir))
        return NULL;
    if (create_dir && util_mkdir_p(dir, 0755) != 0)
        return NULL;
    size_t len = (size_t)n + 40;
    char *path = malloc(len);
    if (path)
        snprintf(path, len, "%s/rank-%lld%s.log", dir, (long long)rank,
                 stream == APROTO_LOG_STDERR ? ".err" : "");
    return path;
}

int agent__log_open(const struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                    int fd[2])
{
    fd[0] = fd[1] = -1;
    for (int i = 0; i < 2; i++) {
        char *path = agent__log_path(a, job_id, attempt, rank, (enum aproto_log_stream)i, i == 0);
        int f = path ? open(path, O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600) : -1;
        free(path);
        if (f >= 0 && f < 3) {
            int hi = fcntl(f, F_DUPFD_CLOEXEC, 3);
            close(f);
            f = hi;
        }
        if (f < 0) {
            int e = errno;
            if (fd[0] >= 0)
                close(fd[0]);
            fd[0] = -1;
            errno = e;
            return -1;
        }
        fd[i] = f;
    }
    return 0;
}

/* The failure line at the end of one of w's log files (malloc'd), or NULL. */
static char *failure_in(const struct agent *a, const struct agent_worker *w,
                        enum aproto_log_stream stream)

{
    char *path = agent__log_path(a, w->job_id, w->attempt, w->rank, stream, false);
    int fd = path ? open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW) : -1;
    free(path);
    if (fd < 0)
        return NULL;
    struct stat st;
    char *buf = NULL, *reason = NULL;
    if (fstat(fd, &st) == 0 && S_ISREG(st.st_mode) && st.st_size > 0 &&
        (buf = malloc(AGENT_FAILURE_SCAN)) != NULL) {
        off_t from = st.st_size > AGENT_FAILURE_SCAN ? st.st_size - AGENT_FAILURE_SCAN : 0;
        ssize_t n = pread(fd, buf, AGENT_FAILURE_SCAN, from);
        char line[APROTO_MAX_EXIT_REASON + 1];
        if (n > 0 && agent_log_failure_line(buf, (size_t)n, from == 0, line, sizeof(line)) > 0)
            reason = strdup(line);
    }
    free(buf);
    close(fd);
    return reason;
}

char *agent__log_failure_reason(const struct agent *a, const struct agent_worker *w)
{
    char *r = failure_in(a, w, APROTO_LOG_STDERR);
    return r ? r : failure_in(a, w, APROTO_LOG_STDOUT);
}

/* Per-rank worker log files: <data>/logs/<job>/<attempt>/rank-<r>.log. */
#include "agent.h"

#include "util.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

char *agent__log_path(const struct agent *a, const char *job_id, int64_t attempt, int64_t rank,
                      bool create_dir)
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
        snprintf(path, len, "%s/rank-%lld.log", dir, (long long)rank);
    return path;
}

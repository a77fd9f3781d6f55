/* Job status names and predicates (job_status.h). */
#include "job_status.h"

#include <stdio.h>
#include <string.h>
#include <strings.h>

static const struct {
    const char *name;
    bool terminal;
} statuses[JOB_STATUS_COUNT] = {
#define JOB_STATUS_ROW(name, terminal) {#name, terminal},
    JOB_STATUS_MAP(JOB_STATUS_ROW)
#undef JOB_STATUS_ROW
};

static bool is_status(enum job_status s)
{
    return (unsigned)s < JOB_STATUS_COUNT;
}

const char *job_status_name(enum job_status s)
{
    return is_status(s) ? statuses[s].name : NULL;
}

int job_status_from_string(const char *name, enum job_status *out)
{
    if (name == NULL)
        return -1;
    for (int i = 0; i < JOB_STATUS_COUNT; i++) {
        if (strcmp(name, statuses[i].name) == 0) {
            *out = (enum job_status)i;
            return 0;
        }
    }
    return -1;
}

int job_status_from_token(const char *s, size_t len, enum job_status *out)
{
    if (s == NULL)
        return -1;
    for (int i = 0; i < JOB_STATUS_COUNT; i++) {
        if (strlen(statuses[i].name) == len && strncasecmp(statuses[i].name, s, len) == 0) {
            *out = (enum job_status)i;
            return 0;
        }
    }
    return -1;
}

bool job_status_is_terminal(enum job_status s)
{
    return is_status(s) && statuses[s].terminal;
}

size_t job_status_names_text(char *buf, size_t size)
{
    size_t need = 0;
    if (size > 0)
        buf[0] = '\0';
    for (int i = 0; i < JOB_STATUS_COUNT; i++) {
        const char *sep = i == 0 ? "" : i == JOB_STATUS_COUNT - 1 ? " or " : ", ";
        bool room = need < size;
        int n = snprintf(room ? buf + need : NULL, room ? size - need : 0, "%s%s", sep,
                         statuses[i].name);
        need += (size_t)n;
    }
    return need;
}

/* See log.h for what this module does and its contract. */
#include "log.h"
#include "util.h"

#include <pthread.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

enum log_level log_threshold = TY_LOG_INFO;

static char debug_subsystems[256];
static bool debug_all;

static const char *const level_names[] = {"error", "warn", "info", "debug"};

void log_set_level(enum log_level level)
{
    log_threshold = level;
}

int log_level_from_string(const char *name, enum log_level *out)
{
    for (size_t i = 0; i < sizeof(level_names) / sizeof(level_names[0]); i++) {
        if (strcmp(name, level_names[i]) == 0) {
            *out = (enum log_level)i;
            return 0;
        }
    }
    return -1;
}

void log_set_debug(const char *subsystems)
{
    snprintf(debug_subsystems, sizeof(debug_subsystems), ",%s,", subsystems ? subsystems : "");
    debug_all = strstr(debug_subsystems, ",all,") != NULL;
}

bool log_debug_enabled(const char *subsystem)
{
    if (debug_all)
        return true;
    if (debug_subsystems[0] == '\0')
        return false;
    char key[64];
    snprintf(key, sizeof(key), ",%s,", subsystem);
    return strstr(debug_subsystems, key) != NULL;
}

bool log_throttle_allow(struct log_throttle *t, unsigned limit_per_s, unsigned *suppressed)
{
    long long now = (long long)(util_mono_ms() / 1000);
    long long seen = __atomic_load_n(&t->window, __ATOMIC_ACQUIRE);
    if (seen != now && __atomic_compare_exchange_n(&t->window, &seen, now, false, __ATOMIC_ACQ_REL,
                                                   __ATOMIC_ACQUIRE))
        __atomic_store_n(&t->count, 0, __ATOMIC_RELEASE);
    if (__atomic_add_fetch(&t->count, 1, __ATOMIC_ACQ_REL) > limit_per_s) {
        __atomic_add_fetch(&t->suppressed, 1, __ATOMIC_ACQ_REL);
        return false;
    }
    *suppressed = __atomic_exchange_n(&t->suppressed, 0, __ATOMIC_ACQ_REL);
    return true;
}

void log_write(enum log_level level, const char *subsystem, const char *fmt, ...)
{
    char msg[2048];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof(msg), fmt, ap);
    va_end(ap);

    struct timespec ts;
    clock_gettime(CLOCK_REALTIME, &ts);
    struct tm tm;
    gmtime_r(&ts.tv_sec, &tm);
    char when[32];
    strftime(when, sizeof(when), "%Y-%m-%dT%H:%M:%S", &tm);
    /* One fprintf per line so lines from different threads do not interleave. */
    fprintf(stderr, "%s.%03ldZ %-5s %-6s %s\n", when, ts.tv_nsec / 1000000L, level_names[level],
            subsystem, msg);
}

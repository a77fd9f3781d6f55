/* Logging for every Trainyard process.
 *
 * TY_LOG(level, subsystem, fmt, ...) prints one line to stderr with a UTC timestamp, the level and
 * the subsystem. The arguments are not evaluated when the level is off (Redis serverLog).
 * Debug output is enabled per subsystem (Slurm's log_flag): log_set_debug("db,http") or
 * TRAINYARD_DEBUG=db,http.
 *
 * Two kinds of warnings keep "our bug" apart from "the peer's fault" (Taler's GNUNET_break vs
 * GNUNET_break_op): TY_BUG(...) logs an internal inconsistency, TY_BAD_PEER(...) logs malformed
 * input from a client, agent or worker.
 */
#ifndef TY_LOG_H
#define TY_LOG_H

#include <stdbool.h>

enum log_level { TY_LOG_ERROR = 0, TY_LOG_WARN = 1, TY_LOG_INFO = 2, TY_LOG_DEBUG = 3 };

extern enum log_level log_threshold;

void log_set_level(enum log_level level);
/* Parses "error|warn|info|debug"; returns 0 or -1 when the name is unknown. */
int log_level_from_string(const char *name, enum log_level *out);
/* Comma separated subsystem names whose debug lines are printed ("all" for every one). */
void log_set_debug(const char *subsystems);
bool log_debug_enabled(const char *subsystem);
void log_write(enum log_level level, const char *subsystem, const char *fmt, ...)
    __attribute__((format(printf, 3, 4)));

#define TY_LOG(level, subsys, ...)                                                                 \
    do {                                                                                           \
        if ((level) <= log_threshold)                                                              \
            log_write((level), (subsys), __VA_ARGS__);                                             \
    } while (0)

#define TY_ERROR(subsys, ...) TY_LOG(TY_LOG_ERROR, subsys, __VA_ARGS__)
#define TY_WARN(subsys, ...) TY_LOG(TY_LOG_WARN, subsys, __VA_ARGS__)
#define TY_INFO(subsys, ...) TY_LOG(TY_LOG_INFO, subsys, __VA_ARGS__)
#define TY_DEBUG(subsys, ...)                                                                      \
    do {                                                                                           \
        if (log_debug_enabled(subsys))                                                             \
            log_write(TY_LOG_DEBUG, (subsys), __VA_ARGS__);                                        \
    } while (0)

#define TY_BUG(subsys, ...)                                                                        \
    log_write(TY_LOG_ERROR, (subsys), "internal error at %s:%d", __FILE__, __LINE__),              \
        log_write(TY_LOG_ERROR, (subsys), __VA_ARGS__)
/* Per call site: at most LOG_BAD_PEER_PER_S lines a second, so a peer that keeps sending garbage
 * cannot flood the log; the next line that gets through says how many were left out. */
#define LOG_BAD_PEER_PER_S 10
struct log_throttle {
    long long window; /* the monotonic second being counted */
    unsigned count, suppressed;
};
/* Whether a line of this call site may be written now (thread-safe); *suppressed = lines left
 * out since the last one that was written (0 when none). */
bool log_throttle_allow(struct log_throttle *t, unsigned limit_per_s, unsigned *suppressed);

#define TY_BAD_PEER(subsys, ...)                                                                   \
    do {                                                                                           \
        static struct log_throttle ty_thr_;                                                        \
        unsigned ty_sup_ = 0;                                                                      \
        if (TY_LOG_WARN <= log_threshold &&                                                        \
            log_throttle_allow(&ty_thr_, LOG_BAD_PEER_PER_S, &ty_sup_)) {                          \
            if (ty_sup_)                                                                           \
                log_write(TY_LOG_WARN, (subsys),                                                   \
                          "bad input from peer: %u similar lines suppressed", ty_sup_);            \
            log_write(TY_LOG_WARN, (subsys), "bad input from peer: " __VA_ARGS__);                 \
        }                                                                                          \
    } while (0)

#endif

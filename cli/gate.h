/*
 * gate.h - CI quality gates: `submit --wait --assert 'accuracy>=0.85'` checks a job's final
 * rank-0 metrics (pure: no I/O).
 */
#ifndef TY_CLI_GATE_H
#define TY_CLI_GATE_H

#include <jansson.h>
#include <stddef.h>

enum gate_op { GATE_GE, GATE_LE, GATE_GT, GATE_LT, GATE_EQ, GATE_NE };

struct gate {
    char metric[128];
    enum gate_op op;
    double bound;
};

/*
 * Parses "NAME OP NUMBER" (OP one of >= <= > < == !=; spaces allowed around OP). Returns 0, or
 * -1 with the reason in err.
 */
int gate_parse(const char *text, struct gate *g, char *err, size_t errlen);

/*
 * Checks g against `metrics` (a JSON object of numbers). Returns 1 when it holds; 0 when it
 * misses, with a message naming the metric and its value (or its absence) in msg.
 */
int gate_check(const struct gate *g, const json_t *metrics, char *msg, size_t msglen);

#endif

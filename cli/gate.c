/*
 * gate.c - CI quality gates (gate.h).
 */
#include "gate.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const struct {
    const char *text;
    enum gate_op op;
} ops[] = {{">=", GATE_GE}, {"<=", GATE_LE}, {"==", GATE_EQ},
           {"!=", GATE_NE}, {">", GATE_GT},  {"<", GATE_LT}};

static const char *op_text(enum gate_op op)
{
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++)
        if (ops[i].op == op)
            return ops[i].text;
    return "?";
}

int gate_parse(const char *text, struct gate *g, char *err, size_t errlen)
{
    const char *p = text + strcspn(text, "<>=!");
    size_t n = (size_t)(p - text);
    while (n > 0 && text[n - 1] == ' ')
        n--;
    const char *start = text;
    while (*start == ' ' && start < p)
        start++, n--;
    size_t oplen = 0;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0] && !oplen; i++) {
        size_t l = strlen(ops[i].text);
        if (strncmp(p, ops[i].text, l) == 0) {
            g->op = ops[i].op;
            oplen = l;
        }
    }
    if (*p == '\0' || oplen == 0 || n == 0 || n >= sizeof g->metric) {
        snprintf(err, errlen, "--assert '%s' is not NAME OP NUMBER (OP: >= <= > < == !=)", text);
        return -1;
    }
    memcpy(g->metric, start, n);
    g->metric[n] = '\0';
    char *end;
    errno = 0;
    g->bound = strtod(p + oplen, &end);
    while (*end == ' ')
        end++;
    if (errno != 0 || end == p + oplen || *end != '\0') {
        snprintf(err, errlen, "--assert '%s': '%s' is not a number", text, p + oplen);
        return -1;
    }
    return 0;
}

int gate_check(const struct gate *g, const json_t *metrics, char *msg, size_t msglen)
{
    const json_t *v = json_object_get(metrics, g->metric);
    if (!json_is_number(v)) {
        snprintf(msg, msglen, "%s %s %g: the final rank-0 metrics have no '%s'", g->metric,
                 op_text(g->op), g->bound, g->metric);
        return 0;
    }
    double x = json_number_value(v);
    int ok = 0;
    switch (g->op) {
    case GATE_GE:
        ok = x >= g->bound;
        break;
    case GATE_LE:
        ok = x <= g->bound;
        break;
    case GATE_GT:
        ok = x > g->bound;
        break;
    case GATE_LT:
        ok = x < g->bound;
        break;
    case GATE_EQ:
        ok = x == g->bound;
        break;
    case GATE_NE:
        ok = x != g->bound;
        break;
    }
    if (!ok)
        snprintf(msg, msglen, "%s %s %g: %s is %.10g", g->metric, op_text(g->op), g->bound,
                 g->metric, x);
    return ok;
}

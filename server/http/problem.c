/* See problem.h for what this module does and its contract. */
#include "problem.h"

static const struct {
    unsigned status;
    const char *slug;
    const char *title;
} registry[] = {
#define X(name, status, slug, title) {status, slug, title},
    SRV_PROBLEM_MAP(X)
#undef X
};

unsigned srv_problem_status(enum srv_problem p)
{
    return registry[p].status;
}

const char *srv_problem_slug(enum srv_problem p)
{
    return registry[p].slug;
}

const char *srv_problem_title(enum srv_problem p)
{
    return registry[p].title;
}

/* Node status names (node_status.h). */
#include "node_status.h"

#include <stddef.h>

static const char *const names[NODE_STATUS_COUNT] = {
#define NODE_STATUS_NAME(name) #name,
    NODE_STATUS_MAP(NODE_STATUS_NAME)
#undef NODE_STATUS_NAME
};

const char *node_status_name(enum node_status s)
{
    return (unsigned)s < NODE_STATUS_COUNT ? names[s] : NULL;
}

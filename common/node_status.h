/* A node's status (NODE_STATUS_MAP of vocab.h) for the C programs. */
#ifndef TY_NODE_STATUS_H
#define TY_NODE_STATUS_H

#include "vocab.h"

enum node_status {
#define NODE_STATUS_ENUM(name) NODE_STATUS_##name,
    NODE_STATUS_MAP(NODE_STATUS_ENUM)
#undef NODE_STATUS_ENUM
        NODE_STATUS_COUNT
};

/* The status's name as the API and the database spell it ("ALIVE"); NULL when `s` is not a
 * status. */
const char *node_status_name(enum node_status s);

#endif

/* libFuzzer: the server's parser of agent messages (common/agent_proto_parse.c and
 * agent_proto_report.c, agent -> server), reached by anyone who opens the websocket port. */
#include "agent_proto.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct aproto_node_msg m;
    char err[256];
    if (aproto_node_msg_parse((const char *)data, size, &m, err, sizeof(err)) == 0)
        aproto_node_msg_free(&m);
    return 0;
}

/* libFuzzer: the agent's parser of server messages (common/agent_proto_parse.c). */
#include "agent_proto.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct agent_server_msg m;
    char err[256];
    if (agent_server_msg_parse((const char *)data, size, &m, err, sizeof(err)) == 0)
        agent_server_msg_free(&m);
    return 0;
}

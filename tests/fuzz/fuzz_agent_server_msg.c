/* libFuzzer: the agent's parser of server messages (common/agent_proto_parse.c), and of what a
 * launch it refused still names (aproto_launch_refused_parse), as ws.c calls them. */
#include "agent_proto.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct aproto_server_msg m;
    char err[256];
    if (aproto_server_msg_parse((const char *)data, size, &m, err, sizeof(err)) == 0) {
        aproto_server_msg_free(&m);
    } else if (m.type == APROTO_MSG_LAUNCH) {
        struct aproto_launch_refused r;
        if (aproto_launch_refused_parse((const char *)data, size, &r) == 0)
            aproto_launch_refused_free(&r);
    }
    return 0;
}

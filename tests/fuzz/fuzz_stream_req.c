/* libFuzzer: the /stream subscriber messages (server/stream/stream_proto.c). */
#include "stream_proto.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    struct stream_req req;
    const char *code = NULL;
    char detail[256];
    (void)stream_req_parse((const char *)data, size, &req, &code, detail, sizeof(detail));
    return 0;
}

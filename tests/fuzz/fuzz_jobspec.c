/* libFuzzer: the job spec validator (common/jobspec.c) on any JSON a client may POST. */
#include "jobspec.h"

#include <jansson.h>
#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    json_t *in = json_loadb((const char *)data, size, JSON_DECODE_ANY, NULL);
    if (!in)
        return 0;
    json_t *out = NULL, *errors = NULL;
    if (jobspec_validate(in, &out, &errors) == 0 && out) {
        struct jobspec spec;
        char err[256];
        if (jobspec_from_json(out, &spec, err, sizeof(err)) == 0)
            jobspec_clear(&spec);
    }
    json_decref(out);
    json_decref(errors);
    json_decref(in);
    return 0;
}
